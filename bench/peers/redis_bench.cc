// peer-bench-redis: the bench-compare workload against Redis through hiredis.
//
// Acked publishes are XADDs to stream bench:x (batch B = B pipelined XADDs, then their B
// replies); durability is the server's setting (bench-compare starts it with appendfsync
// always for the durable rows). Fire-and-forget uses PUBLISH (pub/sub), pipelined. Fanout
// readers use XREAD BLOCK (streams) or SUBSCRIBE (pub/sub) on their own connections. Cache
// mode runs GET/SET from --clients threads, one connection each. Queue mode (--queue) is
// felix-bench's --group drain: a backlog of --messages XADDs, then --clients consumers of one
// consumer group each XREADGROUP COUNT --batch and XACK every entry, one round trip each (with
// --ack-together, the XACKs of a batch pipelined).
#include <hiredis/hiredis.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "workload.h"

namespace {

using felix::bench::LatencyHistogram;
using felix::bench::NowNanos;

redisContext* Connect(const std::string& host, int port) {
  redisContext* c = redisConnect(host.c_str(), port);
  if (c == nullptr || c->err) {
    std::fprintf(stderr, "peer-bench-redis: connect: %s\n", c ? c->errstr : "out of memory");
    std::exit(1);
  }
  return c;
}

void Check(redisReply* r, redisContext* c) {
  if (r == nullptr || r->type == REDIS_REPLY_ERROR) {
    std::fprintf(stderr, "peer-bench-redis: %s\n", r ? r->str : c->errstr);
    std::exit(1);
  }
}

struct Reader {
  std::thread thread;
  LatencyHistogram latency;
  std::atomic<uint64_t> received{0};
};

void ReadStream(const std::string& host, int port, bool pubsub, std::atomic<bool>& stop,
                std::atomic<uint32_t>& ready, Reader& reader) {
  redisContext* c = Connect(host, port);
  struct timeval tv {
    0, 200000
  };
  redisSetTimeout(c, tv);
  std::string last = "0";  // the stream was deleted before the run: read all of it
  if (pubsub) {
    redisReply* r = static_cast<redisReply*>(redisCommand(c, "SUBSCRIBE bench:x"));
    Check(r, c);
    freeReplyObject(r);
  }
  ready.fetch_add(1);
  while (!stop.load()) {
    redisReply* r = nullptr;
    if (pubsub) {
      if (redisGetReply(c, reinterpret_cast<void**>(&r)) != REDIS_OK) {
        c->err = 0;  // read timeout: poll the stop flag again
        continue;
      }
      uint64_t now = NowNanos();
      if (r->type == REDIS_REPLY_ARRAY && r->elements == 3) {
        reader.latency.Record(now -
                              felix::bench::PayloadStamp(r->element[2]->str, r->element[2]->len));
        reader.received.fetch_add(1);
      }
    } else {
      r = static_cast<redisReply*>(
          redisCommand(c, "XREAD COUNT 1000 BLOCK 100 STREAMS bench:x %s", last.c_str()));
      if (r == nullptr) break;
      uint64_t now = NowNanos();
      if (r->type == REDIS_REPLY_ARRAY && r->elements == 1) {
        redisReply* entries = r->element[0]->element[1];
        for (size_t i = 0; i < entries->elements; ++i) {
          redisReply* entry = entries->element[i];
          last.assign(entry->element[0]->str, entry->element[0]->len);
          redisReply* fields = entry->element[1];
          reader.latency.Record(
              now - felix::bench::PayloadStamp(fields->element[1]->str, fields->element[1]->len));
          reader.received.fetch_add(1);
        }
      }
    }
    freeReplyObject(r);
  }
  redisFree(c);
}

int RunCache(const std::string& host, int port, const felix::bench::Workload& w) {
  std::vector<LatencyHistogram> latencies(w.clients);
  std::vector<uint64_t> ops(w.clients, 0);
  std::vector<std::thread> threads;
  uint64_t per_client = w.messages / w.clients;
  uint64_t start = NowNanos();
  for (uint32_t t = 0; t < w.clients; ++t) {
    threads.emplace_back([&, t] {
      redisContext* c = Connect(host, port);
      std::mt19937_64 rng(t + 1);
      std::uniform_int_distribution<uint32_t> key(0, w.key_space - 1);
      std::uniform_real_distribution<double> op(0, 1);
      std::string value(w.payload_bytes, 'v');
      uint64_t i = 0;
      for (; w.More(i, start, NowNanos()) && i < per_client; ++i) {
        std::string k = "bench:" + std::to_string(key(rng));
        uint64_t t0 = NowNanos();
        redisReply* r = op(rng) < w.get_ratio
                            ? static_cast<redisReply*>(redisCommand(c, "GET %s", k.c_str()))
                            : static_cast<redisReply*>(redisCommand(c, "SET %s %b", k.c_str(),
                                                                    value.data(), value.size()));
        Check(r, c);
        latencies[t].Record(NowNanos() - t0);
        freeReplyObject(r);
      }
      ops[t] = i;
      redisFree(c);
    });
  }
  for (auto& th : threads) th.join();
  double seconds = static_cast<double>(NowNanos() - start) / 1e9;
  LatencyHistogram all, none;
  uint64_t total = 0;
  for (uint32_t t = 0; t < w.clients; ++t) {
    all.Merge(latencies[t]);
    total += ops[t];
  }
  std::printf("%s\n",
              felix::bench::ResultJson("redis", w, seconds, total, all, none, 0, 0).c_str());
  return 0;
}

int RunQueue(const std::string& host, int port, const felix::bench::Workload& w) {
  redisContext* c = Connect(host, port);
  freeReplyObject(redisCommand(c, "DEL bench:q"));
  std::string payload(w.payload_bytes, 'q');
  for (uint64_t queued = 0; queued < w.messages;) {  // the backlog, 256 pipelined XADDs a time
    uint64_t n = std::min<uint64_t>(256, w.messages - queued);
    for (uint64_t i = 0; i < n; ++i) {
      redisAppendCommand(c, "XADD bench:q * p %b", payload.data(), payload.size());
    }
    for (uint64_t i = 0; i < n; ++i) {
      redisReply* r = nullptr;
      if (redisGetReply(c, reinterpret_cast<void**>(&r)) != REDIS_OK) Check(nullptr, c);
      Check(r, c);
      freeReplyObject(r);
    }
    queued += n;
  }
  redisReply* created = static_cast<redisReply*>(redisCommand(c, "XGROUP CREATE bench:q drain 0"));
  Check(created, c);
  freeReplyObject(created);

  std::atomic<uint64_t> acked{0};
  std::vector<LatencyHistogram> latencies(w.clients);
  std::vector<std::thread> threads;
  uint64_t start = NowNanos();
  for (uint32_t t = 0; t < w.clients; ++t) {
    threads.emplace_back([&, t] {
      redisContext* rc = Connect(host, port);
      std::string consumer = "c" + std::to_string(t);
      while (acked.load() < w.messages && w.More(0, start, NowNanos())) {
        redisReply* r = static_cast<redisReply*>(
            redisCommand(rc, "XREADGROUP GROUP drain %s COUNT %u BLOCK 200 STREAMS bench:q >",
                         consumer.c_str(), w.batch));
        Check(r, rc);
        if (r->type == REDIS_REPLY_ARRAY && r->elements == 1) {
          redisReply* entries = r->element[0]->element[1];
          if (w.ack_together && entries->elements > 0) {
            // One XACK per entry, pipelined: all written, then every reply read.
            uint64_t t0 = NowNanos();
            for (size_t i = 0; i < entries->elements; ++i) {
              redisReply* id = entries->element[i]->element[0];
              redisAppendCommand(rc, "XACK bench:q drain %b", id->str, id->len);
            }
            for (size_t i = 0; i < entries->elements; ++i) {
              void* reply = nullptr;
              if (redisGetReply(rc, &reply) != REDIS_OK) Check(nullptr, rc);
              Check(static_cast<redisReply*>(reply), rc);
              freeReplyObject(reply);
            }
            uint64_t waited = NowNanos() - t0;
            for (size_t i = 0; i < entries->elements; ++i) latencies[t].Record(waited);
            acked.fetch_add(entries->elements);
            freeReplyObject(r);
            continue;
          }
          for (size_t i = 0; i < entries->elements; ++i) {
            redisReply* id = entries->element[i]->element[0];
            uint64_t t0 = NowNanos();
            redisReply* a = static_cast<redisReply*>(
                redisCommand(rc, "XACK bench:q drain %b", id->str, id->len));
            Check(a, rc);
            freeReplyObject(a);
            latencies[t].Record(NowNanos() - t0);
            acked.fetch_add(1);
          }
        }
        freeReplyObject(r);
      }
      redisFree(rc);
    });
  }
  for (auto& th : threads) th.join();
  double seconds = static_cast<double>(NowNanos() - start) / 1e9;
  LatencyHistogram all, none;
  for (auto& h : latencies) all.Merge(h);
  std::printf("%s\n", felix::bench::ResultJson("redis-streams-group", w, seconds, acked.load(), all,
                                               none, 0, 0)
                          .c_str());
  redisFree(c);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"peer-bench-redis: bench-compare workload against Redis"};
  felix::bench::Workload w;
  std::string host = "127.0.0.1";
  int port = 6379;
  bool cache = false, queue = false;
  app.add_option("--host", host);
  app.add_option("--port", port);
  app.add_flag("--cache", cache, "cache GET/SET mode");
  app.add_flag("--queue", queue, "queue drain mode (consumer group, XREADGROUP + XACK)");
  felix::bench::AddWorkloadOptions(app, w);
  CLI11_PARSE(app, argc, argv);
  if (w.clients == 0) w.clients = 1;
  if (cache) return RunCache(host, port, w);
  if (queue) return RunQueue(host, port, w);

  redisContext* c = Connect(host, port);
  freeReplyObject(redisCommand(c, "DEL bench:x"));
  bool pubsub = !w.acked;
  std::atomic<bool> stop{false};
  std::atomic<uint32_t> ready{0};
  std::vector<std::unique_ptr<Reader>> readers;
  for (uint32_t i = 0; i < w.fanout; ++i) {
    readers.push_back(std::make_unique<Reader>());
    Reader& r = *readers.back();
    r.thread = std::thread([&, pubsub] { ReadStream(host, port, pubsub, stop, ready, r); });
  }
  while (ready.load() < w.fanout) std::this_thread::yield();

  std::string payload(w.payload_bytes, 'x');
  LatencyHistogram ack;
  uint64_t start = NowNanos();
  felix::bench::Pacer pacer(w.rate);
  uint64_t sent = 0;
  felix::bench::PublishLimit limit(w, w.messages, start);
  while (limit.More(sent)) {
    uint32_t n = static_cast<uint32_t>(std::min<uint64_t>(w.batch, w.messages - sent));
    pacer.Wait(sent);
    uint64_t t0 = NowNanos();
    for (uint32_t i = 0; i < n; ++i) {
      if (w.StampsPayloads()) felix::bench::StampPayload(payload);
      if (pubsub) {
        redisAppendCommand(c, "PUBLISH bench:x %b", payload.data(), payload.size());
      } else {
        redisAppendCommand(c, "XADD bench:x * p %b", payload.data(), payload.size());
      }
    }
    for (uint32_t i = 0; i < n; ++i) {
      redisReply* r = nullptr;
      if (redisGetReply(c, reinterpret_cast<void**>(&r)) != REDIS_OK) Check(nullptr, c);
      Check(r, c);
      freeReplyObject(r);
    }
    if (!pubsub) ack.Record(NowNanos() - t0);
    sent += n;
  }
  double seconds = static_cast<double>(NowNanos() - start) / 1e9;

  uint64_t expected = sent * w.fanout;
  felix::bench::WaitForSubscribers(readers, expected);
  stop.store(true);
  LatencyHistogram deliver;
  uint64_t delivered = 0;
  for (auto& r : readers) {
    r->thread.join();
    delivered += r->received.load();
    deliver.Merge(r->latency);
  }
  std::printf("%s\n", felix::bench::ResultJson(pubsub ? "redis-pubsub" : "redis-streams", w,
                                               seconds, sent, ack, deliver, delivered, expected)
                          .c_str());
  redisFree(c);
  return 0;
}
