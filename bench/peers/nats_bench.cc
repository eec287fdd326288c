// peer-bench-nats: the bench-compare workload against NATS JetStream through libnats.
//
// Acked publishes go through JetStream (stream BENCH on subject bench.x, file or memory
// storage); batch B = B async publishes then wait for all their acks. Fire-and-forget uses
// core NATS publish, to a subject nothing listens on (stream BENCH deleted first), or with
// --into-stream into stream BENCH (stored, never acknowledged). Fanout subscribers are core NATS
// subscriptions on the subject, each on its own connection, measuring publish→deliver latency from
// a stamp in the payload. Queue mode (--queue) is felix-bench's --group drain: a backlog of
// --messages records in stream BENCHQ, then --clients connections share one durable pull consumer
// (explicit acks), each fetching up to --batch and acknowledging every message with AckSync (one
// round trip each; with --ack-together, Ack for each then one flush round trip).
#include <nats/nats.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "workload.h"

namespace {

using felix::bench::LatencyHistogram;
using felix::bench::NowNanos;

struct Subscriber {
  natsConnection* conn = nullptr;
  natsSubscription* sub = nullptr;
  LatencyHistogram latency;  // touched only by this subscription's callback thread
  std::atomic<uint64_t> received{0};
};

void OnMessage(natsConnection*, natsSubscription*, natsMsg* msg, void* closure) {
  auto* s = static_cast<Subscriber*>(closure);
  uint64_t now = NowNanos();
  s->latency.Record(now -
                    felix::bench::PayloadStamp(natsMsg_GetData(msg),
                                               static_cast<size_t>(natsMsg_GetDataLength(msg))));
  s->received.fetch_add(1, std::memory_order_release);
  natsMsg_Destroy(msg);
}

int Fail(const char* what, natsStatus s) {
  std::fprintf(stderr, "peer-bench-nats: %s: %s\n", what, natsStatus_GetText(s));
  return 1;
}

// Creates (again, empty) the JetStream stream `name` on `subject`, file or memory storage,
// with `replicas` copies (a clustered JetStream acknowledges once a majority holds a message).
natsStatus RecreateStream(jsCtx* js, const char* name, const char* subject, bool durable,
                          int replicas) {
  jsErrCode jerr = static_cast<jsErrCode>(0);
  js_DeleteStream(js, name, nullptr, &jerr);
  jsStreamConfig sc;
  jsStreamConfig_Init(&sc);
  sc.Name = name;
  const char* subjects[] = {subject};
  sc.Subjects = subjects;
  sc.SubjectsLen = 1;
  sc.Storage = durable ? js_FileStorage : js_MemoryStorage;
  sc.Replicas = replicas;
  jsStreamInfo* si = nullptr;
  natsStatus s = js_AddStream(&si, js, &sc, nullptr, &jerr);
  if (s == NATS_OK) jsStreamInfo_Destroy(si);
  return s;
}

int RunQueue(const std::string& url, const felix::bench::Workload& w) {
  const char* subject = "bench.q";
  natsConnection* nc = nullptr;
  natsStatus s = natsConnection_ConnectTo(&nc, url.c_str());
  if (s != NATS_OK) return Fail("connect", s);
  jsCtx* js = nullptr;
  jsOptions jo;
  jsOptions_Init(&jo);
  jo.PublishAsync.MaxPending = 256;
  if ((s = natsConnection_JetStream(&js, nc, &jo)) != NATS_OK) return Fail("jetstream", s);
  if ((s = RecreateStream(js, "BENCHQ", subject, w.durable, 1)) != NATS_OK) {
    return Fail("add stream", s);
  }
  jsErrCode jerr = static_cast<jsErrCode>(0);
  std::string payload(w.payload_bytes, 'q');
  for (uint64_t i = 0; i < w.messages; ++i) {
    s = js_PublishAsync(js, subject, payload.data(), static_cast<int>(payload.size()), nullptr);
    if (s != NATS_OK) return Fail("publish async", s);
  }
  if ((s = js_PublishAsyncComplete(js, nullptr)) != NATS_OK) return Fail("backlog acks", s);
  jsConsumerConfig cc;
  jsConsumerConfig_Init(&cc);
  cc.Durable = "drain";
  cc.AckPolicy = js_AckExplicit;
  cc.DeliverPolicy = js_DeliverAll;
  jsConsumerInfo* ci = nullptr;
  if ((s = js_AddConsumer(&ci, js, "BENCHQ", &cc, nullptr, &jerr)) != NATS_OK) {
    return Fail("add consumer", s);
  }
  jsConsumerInfo_Destroy(ci);

  uint32_t clients = w.clients == 0 ? 1 : w.clients;
  std::atomic<uint64_t> acked{0};
  std::atomic<bool> failed{false};
  std::vector<LatencyHistogram> latencies(clients);
  std::vector<std::thread> threads;
  uint64_t start = NowNanos();
  for (uint32_t t = 0; t < clients; ++t) {
    threads.emplace_back([&, t] {
      natsConnection* cn = nullptr;
      jsCtx* cjs = nullptr;
      natsSubscription* sub = nullptr;
      jsErrCode e = static_cast<jsErrCode>(0);
      if (natsConnection_ConnectTo(&cn, url.c_str()) != NATS_OK ||
          natsConnection_JetStream(&cjs, cn, nullptr) != NATS_OK ||
          js_PullSubscribe(&sub, cjs, subject, "drain", nullptr, nullptr, &e) != NATS_OK) {
        std::fprintf(stderr, "peer-bench-nats: consumer %u could not start\n", t);
        failed.store(true);
        return;
      }
      while (acked.load() < w.messages && !failed.load() && w.More(0, start, NowNanos())) {
        natsMsgList list{};
        natsStatus fs = natsSubscription_Fetch(&list, sub, static_cast<int>(w.batch), 200, &e);
        if (fs == NATS_TIMEOUT) continue;
        if (fs != NATS_OK) {
          Fail("fetch", fs);
          failed.store(true);
          break;
        }
        if (w.ack_together && list.Count > 0) {
          // One ack per message, all sent, then one round trip (PING/PONG): the server has
          // read every ack once the flush returns.
          uint64_t t0 = NowNanos();
          bool ok = true;
          for (int i = 0; i < list.Count && ok; ++i)
            ok = natsMsg_Ack(list.Msgs[i], nullptr) == NATS_OK;
          if (!ok || natsConnection_FlushTimeout(cn, 10000) != NATS_OK) {
            failed.store(true);
            natsMsgList_Destroy(&list);
            break;
          }
          uint64_t waited = NowNanos() - t0;
          for (int i = 0; i < list.Count; ++i) latencies[t].Record(waited);
          acked.fetch_add(static_cast<uint64_t>(list.Count));
          natsMsgList_Destroy(&list);
          continue;
        }
        for (int i = 0; i < list.Count; ++i) {
          uint64_t t0 = NowNanos();
          if (natsMsg_AckSync(list.Msgs[i], nullptr, &e) != NATS_OK) {
            failed.store(true);
            break;
          }
          latencies[t].Record(NowNanos() - t0);
          acked.fetch_add(1);
        }
        natsMsgList_Destroy(&list);
      }
      natsSubscription_Destroy(sub);
      jsCtx_Destroy(cjs);
      natsConnection_Destroy(cn);
    });
  }
  for (auto& th : threads) th.join();
  double seconds = static_cast<double>(NowNanos() - start) / 1e9;
  LatencyHistogram all, none;
  for (auto& h : latencies) all.Merge(h);
  std::printf("%s\n", felix::bench::ResultJson("nats-jetstream-pull", w, seconds, acked.load(), all,
                                               none, 0, 0)
                          .c_str());
  jsCtx_Destroy(js);
  natsConnection_Destroy(nc);
  nats_Close();
  return failed.load() ? 1 : 0;
}

// Probe mode (--probe-ms N): the failover bench's client (scripts/bench-failover), like
// felix-bench --probe-ms: creates stream PROBE (subject probe.x, file storage, --replicas
// copies) unless it exists, then one JetStream publish of one message every N ms, each waiting
// at most --probe-timeout-ms for its ack, for --duration seconds; one line per attempt:
// "ok <sent_unix_ms> <answered_unix_ms> <seq>" or "err <sent_unix_ms>
// <answered_unix_ms> <status>". The connection knows every --url and
// reconnects after 50 ms (not the library's default 2 s), so the client is not what is measured.
// --stream-leader prints the server leading PROBE (its -n name) and how many of its other
// replicas are current, and exits.
long long UnixMillis() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

natsStatus ConnectProbe(natsConnection** nc, const std::string& url, int timeout_ms) {
  natsOptions* opts = nullptr;
  natsStatus s = natsOptions_Create(&opts);
  // Every server of the comma list, so that the client reconnects to a live one.
  std::vector<std::string> servers;
  for (size_t at = 0; at <= url.size();) {
    size_t comma = url.find(',', at);
    if (comma == std::string::npos) comma = url.size();
    if (comma > at) servers.push_back(url.substr(at, comma - at));
    at = comma + 1;
  }
  std::vector<const char*> list;
  for (const auto& server : servers) list.push_back(server.c_str());
  if (s == NATS_OK) s = natsOptions_SetServers(opts, list.data(), static_cast<int>(list.size()));
  if (s == NATS_OK) s = natsOptions_SetTimeout(opts, timeout_ms);
  if (s == NATS_OK) s = natsOptions_SetMaxReconnect(opts, -1);
  if (s == NATS_OK) s = natsOptions_SetReconnectWait(opts, 50);
  if (s == NATS_OK) s = natsConnection_Connect(nc, opts);
  natsOptions_Destroy(opts);
  return s;
}

int RunProbe(const std::string& url, const felix::bench::Workload& w, int replicas, int interval_ms,
             int timeout_ms, bool leader_only) {
  natsConnection* nc = nullptr;
  natsStatus s = ConnectProbe(&nc, url, timeout_ms);
  if (s != NATS_OK) return Fail("connect", s);
  jsCtx* js = nullptr;
  if ((s = natsConnection_JetStream(&js, nc, nullptr)) != NATS_OK) return Fail("jetstream", s);
  jsErrCode jerr = static_cast<jsErrCode>(0);
  jsStreamInfo* si = nullptr;
  if (js_GetStreamInfo(&si, js, "PROBE", nullptr, &jerr) != NATS_OK) {
    jsStreamConfig sc;
    jsStreamConfig_Init(&sc);
    sc.Name = "PROBE";
    const char* subjects[] = {"probe.x"};
    sc.Subjects = subjects;
    sc.SubjectsLen = 1;
    sc.Storage = js_FileStorage;
    sc.Replicas = replicas;
    if ((s = js_AddStream(&si, js, &sc, nullptr, &jerr)) != NATS_OK) return Fail("add stream", s);
  }
  if (leader_only) {
    // "<leader> <replicas current>": the bench waits for both followers to be current
    // again before the next kill.
    int current = 0;
    for (int i = 0; si->Cluster != nullptr && i < si->Cluster->ReplicasLen; ++i) {
      if (si->Cluster->Replicas[i]->Current && !si->Cluster->Replicas[i]->Offline) ++current;
    }
    std::printf("%s %d\n", si->Cluster && si->Cluster->Leader ? si->Cluster->Leader : "-", current);
    jsStreamInfo_Destroy(si);
    return 0;
  }
  jsStreamInfo_Destroy(si);
  std::string payload(w.payload_bytes, 'p');
  jsPubOptions po;
  jsPubOptions_Init(&po);
  po.MaxWait = timeout_ms;
  const auto start = std::chrono::steady_clock::now();
  auto next = start;
  while (w.duration <= 0 ||
         std::chrono::steady_clock::now() - start < std::chrono::duration<double>(w.duration)) {
    std::this_thread::sleep_until(next);
    next += std::chrono::milliseconds(interval_ms);
    jsPubAck* ack = nullptr;
    const long long sent = UnixMillis();
    s = js_Publish(&ack, js, "probe.x", payload.data(), static_cast<int>(payload.size()), &po,
                   &jerr);
    if (s == NATS_OK) {
      std::printf("ok %lld %lld %llu\n", sent, UnixMillis(),
                  static_cast<unsigned long long>(ack->Sequence));
      jsPubAck_Destroy(ack);
    } else {
      std::printf("err %lld %lld %s\n", sent, UnixMillis(), natsStatus_GetText(s));
    }
    std::fflush(stdout);
  }
  jsCtx_Destroy(js);
  natsConnection_Destroy(nc);
  nats_Close();
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"peer-bench-nats: bench-compare workload against NATS JetStream"};
  felix::bench::Workload w;
  std::string url = "nats://127.0.0.1:4222";
  bool queue = false, into_stream = false;
  int replicas = 1;
  app.add_option("--url", url, "NATS server (a cluster: comma-separated URLs)");
  app.add_option("--replicas", replicas, "JetStream stream replicas (1, 3 on a 3-server cluster)")
      ->check(CLI::Range(1, 5));
  app.add_flag("--queue", queue, "queue drain mode (pull consumer, fetch --batch, ack each)");
  int probe_ms = 0;
  int probe_timeout_ms = 100;
  bool stream_leader = false;
  app.add_flag("--into-stream", into_stream,
               "fire-and-forget: publish into JetStream stream BENCH (stored, unacknowledged) "
               "instead of core NATS with nothing listening");
  app.add_option("--probe-ms", probe_ms, "probe mode: one publish every N ms (failover bench)");
  app.add_option("--probe-timeout-ms", probe_timeout_ms, "probe mode: ack wait (default 100)");
  app.add_flag("--stream-leader", stream_leader, "print the server leading stream PROBE, exit");
  felix::bench::AddWorkloadOptions(app, w);
  CLI11_PARSE(app, argc, argv);
  if (queue) return RunQueue(url, w);
  if (probe_ms > 0 || stream_leader) {
    return RunProbe(url, w, replicas, std::max(probe_ms, 1), probe_timeout_ms, stream_leader);
  }
  const char* subject = "bench.x";

  natsConnection* nc = nullptr;
  natsStatus s = natsConnection_ConnectTo(&nc, url.c_str());
  if (s != NATS_OK) return Fail("connect", s);

  jsCtx* js = nullptr;
  if (!w.acked) {
    // Core NATS with nothing listening discards each message; --into-stream publishes the same
    // way into stream BENCH, which stores every message (what Felix's in-memory stream does
    // with a fire-and-forget publish). Without it an earlier acked row's stream on the subject
    // would capture them: it is deleted first.
    if ((s = natsConnection_JetStream(&js, nc, nullptr)) != NATS_OK) return Fail("jetstream", s);
    if (into_stream) {
      if ((s = RecreateStream(js, "BENCH", subject, w.durable, replicas)) != NATS_OK) {
        return Fail("add stream", s);
      }
    } else {
      jsErrCode jerr = static_cast<jsErrCode>(0);
      js_DeleteStream(js, "BENCH", nullptr, &jerr);  // absent (or no JetStream): nothing to do
    }
  } else {
    jsOptions jo;
    jsOptions_Init(&jo);
    jo.PublishAsync.MaxPending = std::max<uint32_t>(w.batch, 1);
    if ((s = natsConnection_JetStream(&js, nc, &jo)) != NATS_OK) return Fail("jetstream", s);
    if ((s = RecreateStream(js, "BENCH", subject, w.durable, replicas)) != NATS_OK) {
      return Fail("add stream", s);
    }
  }

  std::vector<std::unique_ptr<Subscriber>> subs;
  for (uint32_t i = 0; i < w.fanout; ++i) {
    auto sub = std::make_unique<Subscriber>();
    if ((s = natsConnection_ConnectTo(&sub->conn, url.c_str())) != NATS_OK) {
      return Fail("subscriber connect", s);
    }
    s = natsConnection_Subscribe(&sub->sub, sub->conn, subject, OnMessage, sub.get());
    if (s != NATS_OK) return Fail("subscribe", s);
    natsSubscription_SetPendingLimits(sub->sub, 1 << 20, 1 << 30);
    natsConnection_Flush(sub->conn);
    subs.push_back(std::move(sub));
  }

  std::string payload(w.payload_bytes, 'x');
  LatencyHistogram ack;
  uint64_t start = NowNanos();
  felix::bench::Pacer pacer(w.rate);
  uint64_t sent = 0;
  felix::bench::PublishLimit limit(w, w.messages, start);
  while (limit.More(sent)) {
    uint32_t n = static_cast<uint32_t>(std::min<uint64_t>(w.batch, w.messages - sent));
    pacer.Wait(sent);
    const uint64_t t0 = w.acked ? NowNanos() : 0;  // unread without an answer to time
    if (!w.acked) {
      for (uint32_t i = 0; i < n; ++i) {
        if (w.StampsPayloads()) felix::bench::StampPayload(payload);
        natsConnection_Publish(nc, subject, payload.data(), static_cast<int>(payload.size()));
      }
    } else if (n == 1) {
      if (w.StampsPayloads()) felix::bench::StampPayload(payload);
      jsPubAck* pa = nullptr;
      jsErrCode jerr = static_cast<jsErrCode>(0);
      s = js_Publish(&pa, js, subject, payload.data(), static_cast<int>(payload.size()), nullptr,
                     &jerr);
      if (s != NATS_OK) return Fail("publish", s);
      jsPubAck_Destroy(pa);
      ack.Record(NowNanos() - t0);
    } else {
      for (uint32_t i = 0; i < n; ++i) {
        if (w.StampsPayloads()) felix::bench::StampPayload(payload);
        s = js_PublishAsync(js, subject, payload.data(), static_cast<int>(payload.size()), nullptr);
        if (s != NATS_OK) return Fail("publish async", s);
      }
      if ((s = js_PublishAsyncComplete(js, nullptr)) != NATS_OK) return Fail("acks", s);
      ack.Record(NowNanos() - t0);
    }
    sent += n;
  }
  if (!w.acked) natsConnection_Flush(nc);
  double seconds = static_cast<double>(NowNanos() - start) / 1e9;

  // Let subscribers finish: stop when all arrived or nothing arrived for 2 s.
  uint64_t expected = sent * w.fanout;
  felix::bench::WaitForSubscribers(subs, expected);
  LatencyHistogram deliver;
  uint64_t delivered = 0;
  for (auto& sub : subs) {
    natsSubscription_Unsubscribe(sub->sub);
    natsSubscription_Destroy(sub->sub);
    natsConnection_Destroy(sub->conn);
    delivered += sub->received.load();
    deliver.Merge(sub->latency);
  }
  const char* system =
      w.acked ? "nats-jetstream" : (into_stream ? "nats-jetstream-unacked" : "nats-core");
  std::printf("%s\n",
              felix::bench::ResultJson(system, w, seconds, sent, ack, deliver, delivered, expected)
                  .c_str());
  if (js != nullptr) jsCtx_Destroy(js);
  natsConnection_Destroy(nc);
  nats_Close();
  return 0;
}
