#include "server/broker_options.h"

#include <algorithm>
#include <chrono>

namespace felix::server {

broker::BrokerCoreOptions CoreOptionsFromConfig(const BrokerConfig& config) {
  broker::BrokerCoreOptions o;
  o.storage_dir = config.EffectiveStorageDir();
  o.log_defaults.fsync_mode = config.durable_fsync_mode;
  o.log_defaults.fsync_interval = std::chrono::milliseconds(config.durable_fsync_interval_ms);
  o.log_defaults.segment_bytes = config.durable_segment_bytes;
  o.log_defaults.preallocate_bytes = config.durable_preallocate_bytes;
  o.log_defaults.index_spacing_bytes = config.durable_index_spacing_bytes;
  o.log_defaults.retention_bytes = config.durable_retention_bytes;
  o.log_defaults.retention_age = std::chrono::seconds(config.durable_retention_seconds);
  o.retention_interval = std::chrono::seconds(config.durable_retention_interval_seconds);
  o.shard.default_queue_capacity = config.subscriber_queue_capacity;
  o.shard.max_queue_capacity = config.subscriber_queue_capacity_max;
  o.shard.event_batch_max_records = config.event_batch_max_events;
  o.shard.event_batch_max_bytes = config.event_batch_max_bytes;
  o.commit_gate.timeout = std::chrono::milliseconds(config.publish_quorum_timeout_ms);
  o.groups.visibility_timeout = std::chrono::milliseconds(config.group_visibility_timeout_ms);
  o.groups.max_attempts = static_cast<uint32_t>(config.group_max_attempts);
  o.groups.max_wait = std::chrono::milliseconds(config.group_max_wait_ms);
  o.groups.max_in_flight = config.group_max_in_flight;
  // A group answer must fit a frame whatever its records (issue 12 item 4).
  o.groups.max_bytes_per_poll = std::min<size_t>(
      o.groups.max_bytes_per_poll,
      std::max<size_t>(config.max_frame_bytes, 2 * broker::kGroupAnswerJsonOverhead) -
          broker::kGroupAnswerJsonOverhead);
  return o;
}

broker::ClientServiceOptions ServiceOptionsFromConfig(const BrokerConfig& config) {
  broker::ClientServiceOptions o;
  o.max_frame_bytes = static_cast<uint32_t>(config.max_frame_bytes);
  o.preauth_max_frame_bytes = static_cast<uint32_t>(config.preauth_max_frame_bytes);
  o.auth_timeout = std::chrono::milliseconds(config.auth_timeout_ms);
  o.max_subscriptions_per_conn = config.max_subscriptions_per_conn;
  o.max_connections = config.max_client_connections;
  o.max_connections_per_ip = config.max_connections_per_ip;
  o.ack_on_commit = config.ack_on_commit;
  o.publish_window = static_cast<uint32_t>(config.publish_window);
  o.max_inflight_bytes_per_stream = config.pub_conn_inflight_bytes;
  o.max_inflight_bytes_total = config.pub_inflight_bytes;
  o.publish_room_wait = std::chrono::milliseconds(config.publish_queue_wait_ms);
  o.publish_ingress_wait = config.pub_ingress_wait;
  o.record_publishers = config.record_publishers;
  o.cluster = config.cluster_mode();
  return o;
}

}  // namespace felix::server
