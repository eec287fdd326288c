// The client-port series (broker-config.md §5 names where the reference has them).
#pragma once

#include "common/metrics.h"

namespace felix::broker {

struct ClientMetrics {
  explicit ClientMetrics(MetricsRegistry& r)
      : publish_ok(r.AddCounter("felix_publish_requests_total", "publish requests by result",
                                "result=\"ok\"")),
        publish_error(r.AddCounter("felix_publish_requests_total", "publish requests by result",
                                   "result=\"error\"")),
        publish_dropped(r.AddCounter("felix_publish_requests_total", "publish requests by result",
                                     "result=\"dropped\"")),
        publish_room_waits(r.AddCounter(
            "felix_publish_room_waits_total",
            "publishes that waited for room in the in-flight budgets, their stream not read")),
        publish_messages(
            r.AddCounter("felix_tenant_published_messages_total", "records published")),
        publish_bytes(r.AddCounter("felix_publish_bytes_total", "payload bytes published")),
        acks(r.AddCounter("felix_broker_acks_total", "publish acknowledgements sent")),
        json_publishes(r.AddCounter("felix_broker_json_publishes_total",
                                    "publishes that used the JSON encoding")),
        deliveries(r.AddCounter("felix_tenant_delivered_messages_total",
                                "records written to subscribers")),
        delivered_bytes(r.AddCounter("felix_tenant_delivered_bytes_total",
                                     "payload bytes written to subscribers")),
        sub_dropped(r.AddCounter("felix_sub_queue_dropped_total",
                                 "batches dropped from full subscriber queues")),
        subscribers(r.AddGauge("felix_sub_connection_subscribers", "live subscriptions")),
        sub_queue_len(r.AddGauge("felix_sub_queue_len", "batches queued for subscribers")),
        connections(r.AddGauge("felix_sub_active_connections", "client connections")),
        auth_failures(r.AddCounter("felix_auth_failures_total", "refused auth messages")),
        auth_timeouts(r.AddCounter("felix_quic_auth_timeout_total",
                                   "connections closed for not authenticating in time")),
        redirects(r.AddCounter("felix_client_redirects_total",
                               "requests answered not_leader: another broker serves the shard")),
        sub_lagged(r.AddCounter("felix_sub_lagged_total",
                                "durable subscriptions ended with subscription_lagged")),
        sub_read_errors(r.AddCounter("felix_sub_read_errors_total",
                                     "subscriptions ended because history could not be read")),
        refused_limit(r.AddCounter("felix_quic_connections_refused_total",
                                   "client connections refused at admission", "reason=\"limit\"")),
        refused_per_ip(r.AddCounter("felix_quic_connections_refused_total",
                                    "client connections refused at admission",
                                    "reason=\"per_ip_limit\"")),
        refused_draining(r.AddCounter("felix_quic_connections_refused_total",
                                      "client connections refused at admission",
                                      "reason=\"draining\"")) {}

  Counter& publish_ok;
  Counter& publish_error;
  Counter& publish_dropped;
  Counter& publish_room_waits;
  Counter& publish_messages;
  Counter& publish_bytes;
  Counter& acks;
  Counter& json_publishes;
  Counter& deliveries;
  Counter& delivered_bytes;
  Counter& sub_dropped;
  Gauge& subscribers;
  Gauge& sub_queue_len;
  Gauge& connections;
  Counter& auth_failures;
  Counter& auth_timeouts;
  Counter& redirects;
  Counter& sub_lagged;
  Counter& sub_read_errors;
  Counter& refused_limit;
  Counter& refused_per_ip;
  Counter& refused_draining;
};

}  // namespace felix::broker
