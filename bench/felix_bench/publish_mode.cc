// felix-bench publish mode: N publishers × M fanout subscribers (see modes.h).
#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "bench_target.h"
#include "modes.h"

namespace felix::bench {

namespace {

// One fanout subscriber: its own connection, and a reader thread calling Next — or, with
// --subscriber-handler, a handler the connection's I/O thread calls (push delivery).
struct Subscriber {
  std::unique_ptr<Client> client;
  std::unique_ptr<Subscription> subscription;
  std::thread thread;
  // The reader thread's (or the handler's) only until joined (or the subscription closed).
  LatencyHistogram latency;
  std::atomic<uint64_t> received{0};
  std::atomic<bool> ended{false};

  void Record(const Event& event) {
    const std::string& p = event.payload;
    latency.Record(NowNanos() - PayloadStamp(p.data(), p.size()));
    received.fetch_add(1, std::memory_order_release);
  }
};

void ReadEvents(Subscriber& s, const std::atomic<bool>& stop) {
  while (!stop.load(std::memory_order_acquire)) {
    auto event = s.subscription->Next(std::chrono::milliseconds(100));
    if (!event) {
      std::fprintf(stderr, "felix-bench: subscription ended: %s\n",
                   event.error().ToString().c_str());
      break;
    }
    if (*event) s.Record(**event);
  }
  s.ended.store(true, std::memory_order_release);
}

// Bounded in-flight window for pipelined acked publishes.
class Window {
 public:
  explicit Window(size_t capacity) : capacity_(capacity) {}
  void Acquire() {
    std::unique_lock lock(mu_);
    cv_.wait(lock, [&] { return in_flight_ < capacity_; });
    ++in_flight_;
  }
  void Release() {
    {
      std::lock_guard lock(mu_);
      --in_flight_;
    }
    cv_.notify_all();
  }
  void Drain() {
    std::unique_lock lock(mu_);
    cv_.wait(lock, [&] { return in_flight_ == 0; });
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  size_t capacity_;
  size_t in_flight_ = 0;
};

struct PublisherResult {
  LatencyHistogram ack;
  uint64_t sent = 0;
  uint64_t failed = 0;
  // Pipelined batches the broker refused with a retry class (e.g. `overloaded`: the window
  // outran its in-flight budget): nothing was written, so they are not counted as sent.
  uint64_t refused_batches = 0;
  uint64_t refused_messages = 0;
};

void Publish(const ClientOptions& options, const StreamRef& stream, const Workload& w,
             uint64_t messages, size_t window_size, PublisherResult& out) {
  auto client = ConnectOrDie(options);
  PublishOptions po;
  po.ack = w.acked ? AckMode::kPerBatch : AckMode::kNone;
  std::vector<std::string> batch(w.batch, std::string(w.payload_bytes, 'x'));
  Pacer pacer(w.rate);
  Window window(window_size);
  std::mutex ack_mu;  // the ack histogram is shared with the I/O thread's callbacks
  uint64_t start = NowNanos();
  PublishLimit limit(w, messages, start);
  while (limit.More(out.sent)) {
    size_t n = static_cast<size_t>(std::min<uint64_t>(w.batch, messages - out.sent));
    batch.resize(n);
    pacer.Wait(out.sent);
    if (w.StampsPayloads()) {
      for (auto& payload : batch) StampPayload(payload);
    }
    const uint64_t t0 = w.acked ? NowNanos() : 0;  // unread without an answer to time
    if (window_size <= 1 || !w.acked) {
      auto receipt = client->Publish(stream, batch, po);
      if (!receipt) {
        ++out.failed;
        std::fprintf(stderr, "felix-bench: publish: %s\n", receipt.error().ToString().c_str());
        if (receipt.error().code == ClientErrorCode::kClosed) break;
      } else if (w.acked) {
        out.ack.Record(NowNanos() - t0);
      }
    } else {
      window.Acquire();
      auto queued =
          client->PublishAsync(stream, batch, po, [&, t0, n](ClientResult<PublishReceipt> receipt) {
            {
              std::lock_guard lock(ack_mu);
              if (receipt) {
                out.ack.Record(NowNanos() - t0);
              } else if (receipt.error().retry == RetryClass::kRetry ||
                         receipt.error().retry == RetryClass::kRetryAfter) {
                ++out.refused_batches;
                out.refused_messages += n;
              } else if (++out.failed <= 5) {  // say why, without flooding
                std::fprintf(stderr, "felix-bench: publish: %s\n",
                             receipt.error().ToString().c_str());
              }
            }
            window.Release();
          });
      if (!queued) {
        window.Release();
        ++out.failed;
      }
    }
    out.sent += n;
  }
  window.Drain();
  out.sent -= out.refused_messages;
}

}  // namespace

int RunPublish(const Target& target, const Workload& w, uint32_t publishers, size_t window_size) {
  auto stream = StreamRef::Parse(target.stream);
  if (!stream) Die(stream.error().message);
  auto options =
      ResolveOptions(target, stream->namespace_name, stream->stream,
                     {"stream.publish:stream:{scope}", "stream.subscribe:stream:{scope}"});
  if (window_size > options.max_in_flight) options.max_in_flight = window_size;

  std::atomic<bool> stop{false};
  std::vector<std::unique_ptr<Subscriber>> subscribers;
  // --io-threads: the subscribers' connections share that many client I/O threads.
  std::vector<std::shared_ptr<IoThread>> io_threads;
  for (uint32_t i = 0; i < target.io_threads && w.fanout > 0; ++i) {
    auto thread = IoThread::Create();
    if (!thread) Die("client I/O thread: " + thread.error().ToString());
    io_threads.push_back(std::move(*thread));
  }
  for (uint32_t i = 0; i < w.fanout; ++i) {
    auto s = std::make_unique<Subscriber>();
    ClientOptions subscriber_options = options;
    if (!io_threads.empty()) subscriber_options.io_thread = io_threads[i % io_threads.size()];
    if (target.subscriber_spin_us > 0)
      subscriber_options.spin_wait = std::chrono::microseconds(target.subscriber_spin_us);
    s->client = ConnectOrDie(subscriber_options);
    SubscribeOptions so{.start = StartPosition::Latest()};
    if (target.subscriber_handler) {
      so.on_event = [sp = s.get()](ClientResult<Event> event) {
        if (event) {
          sp->Record(*event);
        } else {
          std::fprintf(stderr, "felix-bench: subscription ended: %s\n",
                       event.error().ToString().c_str());
        }
      };
    }
    auto sub = s->client->Subscribe(*stream, so);
    if (!sub) Die("subscribe: " + sub.error().ToString());
    s->subscription = std::move(*sub);
    subscribers.push_back(std::move(s));
  }
  if (!target.subscriber_handler) {
    for (auto& s : subscribers)
      s->thread = std::thread([&, sp = s.get()] { ReadEvents(*sp, stop); });
  }

  std::vector<PublisherResult> results(publishers);
  std::vector<std::thread> threads;
  uint64_t start = NowNanos();
  for (uint32_t i = 0; i < publishers; ++i) {
    uint64_t share = w.messages / publishers + (i < w.messages % publishers ? 1 : 0);
    threads.emplace_back(
        [&, i, share] { Publish(options, *stream, w, share, window_size, results[i]); });
  }
  for (auto& t : threads) t.join();
  double seconds = static_cast<double>(NowNanos() - start) / 1e9;

  LatencyHistogram ack;
  uint64_t sent = 0, failed = 0, refused = 0;
  for (auto& r : results) {
    ack.Merge(r.ack);
    sent += r.sent;
    failed += r.failed;
    refused += r.refused_batches;
  }
  if (refused != 0) {
    std::fprintf(stderr,
                 "felix-bench: %llu pipelined batches refused with a retry class (not counted)\n",
                 static_cast<unsigned long long>(refused));
  }
  uint64_t expected = sent * w.fanout;
  WaitForSubscribers(subscribers, expected);
  stop.store(true, std::memory_order_release);
  LatencyHistogram deliver;
  uint64_t delivered = 0;
  for (auto& s : subscribers) {
    if (s->thread.joinable()) s->thread.join();
    s->subscription->Close();  // a handler is not running once Close returns
    delivered += s->received.load();
    deliver.Merge(s->latency);
  }
  std::printf("%s\n",
              ResultJson("felix", w, seconds, sent, ack, deliver, delivered, expected).c_str());
  if (failed != 0) {
    std::fprintf(stderr, "felix-bench: %llu publishes failed\n",
                 static_cast<unsigned long long>(failed));
    return 1;
  }
  return 0;
}

}  // namespace felix::bench
