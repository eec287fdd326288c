// felix-bench queue mode: publishes a backlog of w.messages records to a durable stream, then
// w.clients consumers (own connections and threads) of one consumer group drain it: poll up to
// w.batch records, acknowledge each (one round trip each, or with --ack-together all of a
// batch's acks sent before their answers are awaited: Client::GroupAckAll). Reports the drain
// rate and the acknowledgement round trip.
#include <atomic>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "bench_target.h"
#include "modes.h"

namespace felix::bench {

int RunQueue(const Target& target, const Workload& w) {
  auto stream = StreamRef::Parse(target.stream);
  if (!stream) Die(stream.error().message);
  if (target.group.empty()) Die("queue mode needs --group");
  auto options = ResolveOptions(target, stream->namespace_name, stream->stream,
                                {"stream.publish:stream:{scope}", "stream.subscribe:stream:{scope}",
                                 "stream.manage:stream:{scope}"});
  auto producer = ConnectOrDie(options);

  // The backlog, in acknowledged batches of up to 256 records.
  std::optional<uint64_t> first_offset;
  uint64_t published = 0;
  std::vector<std::string> batch;
  while (published < w.messages) {
    size_t n = static_cast<size_t>(std::min<uint64_t>(256, w.messages - published));
    batch.assign(n, std::string(w.payload_bytes, 'q'));
    auto receipt = producer->Publish(*stream, batch);
    if (!receipt) Die("publish: " + receipt.error().ToString());
    if (!receipt->offset) Die("queue mode needs a durable stream (no offsets in acknowledgements)");
    if (!first_offset) first_offset = receipt->offset;
    published += n;
  }
  GroupRef group{*stream, 0, target.group};
  auto seek = producer->GroupSeek(group, StartPosition::Offset(*first_offset));
  if (!seek) Die("group seek: " + seek.error().ToString());

  uint32_t consumers = w.clients == 0 ? 1 : w.clients;
  std::atomic<uint64_t> acked{0};
  std::atomic<uint64_t> failed{0};
  std::vector<LatencyHistogram> latencies(consumers);
  std::vector<std::unique_ptr<Client>> connections = ConnectManyOrDie(target, options, consumers);
  std::vector<std::thread> threads;
  uint64_t start = NowNanos();
  for (uint32_t c = 0; c < consumers; ++c) {
    threads.emplace_back([&, c] {
      Client& client = *connections[c];
      GroupPollOptions poll{.max_records = w.batch, .wait = std::chrono::milliseconds(200)};
      while (acked.load() < published && failed.load() == 0 &&
             (w.duration <= 0 || static_cast<double>(NowNanos() - start) < w.duration * 1e9)) {
        auto records = client.GroupPoll(group, poll);
        if (!records) {
          std::fprintf(stderr, "felix-bench: poll: %s\n", records.error().ToString().c_str());
          failed.fetch_add(1);
          return;
        }
        if (w.ack_together && !records->empty()) {
          std::vector<uint64_t> offsets;
          offsets.reserve(records->size());
          for (const auto& record : *records) offsets.push_back(record.offset);
          uint64_t t0 = NowNanos();
          auto ack = client.GroupAckAll(group, offsets);
          if (!ack) {
            std::fprintf(stderr, "felix-bench: ack: %s\n", ack.error().ToString().c_str());
            failed.fetch_add(1);
            return;
          }
          uint64_t waited = NowNanos() - t0;  // each record's ack waited for the whole batch
          for (size_t i = 0; i < offsets.size(); ++i) latencies[c].Record(waited);
          acked.fetch_add(offsets.size());
          continue;
        }
        for (const auto& record : *records) {
          uint64_t t0 = NowNanos();
          auto ack = client.GroupAck(group, record.offset);
          if (!ack) {
            std::fprintf(stderr, "felix-bench: ack: %s\n", ack.error().ToString().c_str());
            failed.fetch_add(1);
            return;
          }
          latencies[c].Record(NowNanos() - t0);
          acked.fetch_add(1);
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  double seconds = static_cast<double>(NowNanos() - start) / 1e9;
  LatencyHistogram all, none;
  for (auto& h : latencies) all.Merge(h);
  std::printf("%s\n", ResultJson("felix", w, seconds, acked.load(), all, none, 0, 0).c_str());
  return failed.load() == 0 ? 0 : 1;
}

}  // namespace felix::bench
