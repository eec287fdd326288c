// peer-bench-nats: the bench-compare workload against NATS JetStream through libnats.
//
// Acked publishes go through JetStream (stream BENCH on subject bench.x, file or memory
// storage); batch B = B async publishes then wait for all their acks. Fire-and-forget uses
// core NATS publish. Fanout subscribers are core NATS subscriptions on the subject, each on
// its own connection, measuring publish→deliver latency from a stamp in the payload.
#include <nats/nats.h>

#include <atomic>
#include <cstdio>
#include <memory>
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

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"peer-bench-nats: bench-compare workload against NATS JetStream"};
  felix::bench::Workload w;
  std::string url = "nats://127.0.0.1:4222";
  app.add_option("--url", url, "NATS server");
  felix::bench::AddWorkloadOptions(app, w);
  CLI11_PARSE(app, argc, argv);
  const char* subject = "bench.x";

  natsConnection* nc = nullptr;
  natsStatus s = natsConnection_ConnectTo(&nc, url.c_str());
  if (s != NATS_OK) return Fail("connect", s);

  jsCtx* js = nullptr;
  if (w.acked) {
    jsOptions jo;
    jsOptions_Init(&jo);
    jo.PublishAsync.MaxPending = std::max<uint32_t>(w.batch, 1);
    if ((s = natsConnection_JetStream(&js, nc, &jo)) != NATS_OK) return Fail("jetstream", s);
    jsErrCode jerr = static_cast<jsErrCode>(0);
    js_DeleteStream(js, "BENCH", nullptr, &jerr);
    jsStreamConfig sc;
    jsStreamConfig_Init(&sc);
    sc.Name = "BENCH";
    const char* subjects[] = {subject};
    sc.Subjects = subjects;
    sc.SubjectsLen = 1;
    sc.Storage = w.durable ? js_FileStorage : js_MemoryStorage;
    jsStreamInfo* si = nullptr;
    if ((s = js_AddStream(&si, js, &sc, nullptr, &jerr)) != NATS_OK) return Fail("add stream", s);
    jsStreamInfo_Destroy(si);
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
  while (w.More(sent, start, NowNanos())) {
    uint32_t n = static_cast<uint32_t>(std::min<uint64_t>(w.batch, w.messages - sent));
    pacer.Wait(sent);
    uint64_t t0 = NowNanos();
    if (!w.acked) {
      for (uint32_t i = 0; i < n; ++i) {
        felix::bench::StampPayload(payload);
        natsConnection_Publish(nc, subject, payload.data(), static_cast<int>(payload.size()));
      }
    } else if (n == 1) {
      felix::bench::StampPayload(payload);
      jsPubAck* pa = nullptr;
      jsErrCode jerr = static_cast<jsErrCode>(0);
      s = js_Publish(&pa, js, subject, payload.data(), static_cast<int>(payload.size()), nullptr,
                     &jerr);
      if (s != NATS_OK) return Fail("publish", s);
      jsPubAck_Destroy(pa);
      ack.Record(NowNanos() - t0);
    } else {
      for (uint32_t i = 0; i < n; ++i) {
        felix::bench::StampPayload(payload);
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
  std::printf("%s\n", felix::bench::ResultJson(w.acked ? "nats-jetstream" : "nats-core", w, seconds,
                                               sent, ack, deliver, delivered, expected)
                          .c_str());
  if (js != nullptr) jsCtx_Destroy(js);
  natsConnection_Destroy(nc);
  nats_Close();
  return 0;
}
