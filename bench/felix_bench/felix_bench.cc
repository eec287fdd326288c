// felix-bench: a load generator that speaks FLX1 to a Felix broker through the C++ client
// library, running the workload scripts/bench-compare also runs against the peers
// (bench/common/workload.h), and printing one JSON line per run.
//
// Publish mode: N publishers (one connection each) send `messages` in batches of `batch`, one
// batch per round trip (acked: Publish waits for the acknowledgement; --no-ack: fire and
// forget), optionally paced to --rate. M = --fanout subscribers (one connection each,
// subscribed at `latest` before publishing starts) measure publish→deliver latency from a
// send-time stamp in the first 8 bytes of every payload. --window > 1 pipelines acked batches
// (PublishAsync) instead of waiting for each.
//
// `felix-bench report` turns the JSON lines of many runs into docs/benchmarks.md tables (report.h).
//
// The broker and credentials come from --credentials (the broker's admin-credentials.json: its
// QUIC address, CA file and signing key, from which a token scoped to the stream is minted),
// or from --broker/--ca/--token. The stream must exist (`felix stream create`).
#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "auth/keys.h"
#include "auth/token.h"
#include "catalog/credentials.h"
#include "felix/client.h"
#include "report.h"
#include "workload.h"

namespace {

using felix::bench::LatencyHistogram;
using felix::bench::NowNanos;
using felix::bench::Workload;

struct Target {
  std::string credentials;
  std::string broker;
  std::string ca_file;
  std::string token;
  std::string tenant;
  std::string stream = "bench";
};

[[noreturn]] void Die(const std::string& message) {
  std::fprintf(stderr, "felix-bench: %s\n", message.c_str());
  std::exit(1);
}

felix::ClientOptions ResolveOptions(const Target& target, const felix::StreamRef& stream,
                                    const std::vector<std::string>& actions) {
  felix::ClientOptions o;
  o.broker = target.broker;
  o.ca_file = target.ca_file;
  o.token = target.token;
  if (!target.tenant.empty()) o.tenant_id = target.tenant;
  if (!target.credentials.empty()) {
    auto creds = felix::catalog::LoadAdminCredentials(target.credentials);
    if (!creds) Die("cannot read " + target.credentials + ": " + creds.error().message);
    if (o.broker.empty()) o.broker = creds->quic_addr;
    if (o.ca_file.empty()) o.ca_file = creds->ca_file;
    if (target.tenant.empty()) o.tenant_id = creds->tenant_id;
    if (o.token.empty()) {
      auto key = felix::auth::SigningKey::FromSeedBase64(creds->signing_kid, creds->signing_seed);
      if (!key) Die("bad signing key in " + target.credentials + ": " + key.error().ToString());
      felix::auth::TokenClaims claims;
      claims.sub = "felix-bench";
      claims.tid = o.tenant_id;
      std::string scope = o.tenant_id + "/" + stream.namespace_name + "/" + stream.stream;
      for (const auto& action : actions) claims.perms.push_back(action + ":stream:" + scope);
      claims.iat = felix::auth::NowUnixSeconds();
      claims.exp = claims.iat + 24 * 3600;
      o.token = felix::auth::MintToken(*key, claims);
    }
  }
  if (o.broker.empty()) o.broker = "127.0.0.1:5000";
  if (o.ca_file.empty() || o.token.empty())
    Die("need --credentials, or --ca and --token (see felix-bench --help)");
  return o;
}

std::unique_ptr<felix::Client> ConnectOrDie(const felix::ClientOptions& options) {
  auto client = felix::Client::Connect(options);
  if (!client) Die("cannot connect to " + options.broker + ": " + client.error().ToString());
  return std::move(*client);
}

// One fanout subscriber: its own connection and reader thread.
struct Subscriber {
  std::unique_ptr<felix::Client> client;
  std::unique_ptr<felix::Subscription> subscription;
  std::thread thread;
  LatencyHistogram latency;  // reader thread only until joined
  std::atomic<uint64_t> received{0};
  std::atomic<bool> ended{false};
};

void ReadEvents(Subscriber& s, const std::atomic<bool>& stop) {
  while (!stop.load(std::memory_order_acquire)) {
    auto event = s.subscription->Next(std::chrono::milliseconds(100));
    if (!event) {
      std::fprintf(stderr, "felix-bench: subscription ended: %s\n",
                   event.error().ToString().c_str());
      break;
    }
    if (!*event) continue;
    const std::string& p = (*event)->payload;
    s.latency.Record(NowNanos() - felix::bench::PayloadStamp(p.data(), p.size()));
    s.received.fetch_add(1, std::memory_order_release);
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
};

void Publish(const felix::ClientOptions& options, const felix::StreamRef& stream, const Workload& w,
             uint64_t messages, size_t window_size, PublisherResult& out) {
  auto client = ConnectOrDie(options);
  felix::PublishOptions po;
  po.ack = w.acked ? felix::AckMode::kPerBatch : felix::AckMode::kNone;
  std::vector<std::string> batch(w.batch, std::string(w.payload_bytes, 'x'));
  felix::bench::Pacer pacer(w.rate);
  Window window(window_size);
  std::mutex ack_mu;  // the ack histogram is shared with the I/O thread's callbacks
  uint64_t start = NowNanos();
  Workload limits = w;
  limits.messages = messages;
  while (limits.More(out.sent, start, NowNanos())) {
    size_t n = static_cast<size_t>(std::min<uint64_t>(w.batch, messages - out.sent));
    batch.resize(n);
    pacer.Wait(out.sent);
    for (auto& payload : batch) felix::bench::StampPayload(payload);
    uint64_t t0 = NowNanos();
    if (window_size <= 1 || !w.acked) {
      auto receipt = client->Publish(stream, batch, po);
      if (!receipt) {
        ++out.failed;
        std::fprintf(stderr, "felix-bench: publish: %s\n", receipt.error().ToString().c_str());
        if (receipt.error().code == felix::ClientErrorCode::kClosed) break;
      } else if (w.acked) {
        out.ack.Record(NowNanos() - t0);
      }
    } else {
      window.Acquire();
      auto queued = client->PublishAsync(
          stream, batch, po, [&, t0](felix::ClientResult<felix::PublishReceipt> receipt) {
            {
              std::lock_guard lock(ack_mu);
              if (receipt) {
                out.ack.Record(NowNanos() - t0);
              } else {
                ++out.failed;
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
}

int RunPublish(const Target& target, const Workload& w, uint32_t publishers, size_t window_size) {
  auto stream = felix::StreamRef::Parse(target.stream);
  if (!stream) Die(stream.error().message);
  auto options = ResolveOptions(target, *stream, {"stream.publish", "stream.subscribe"});
  if (window_size > options.max_in_flight) options.max_in_flight = window_size;

  std::atomic<bool> stop{false};
  std::vector<std::unique_ptr<Subscriber>> subscribers;
  for (uint32_t i = 0; i < w.fanout; ++i) {
    auto s = std::make_unique<Subscriber>();
    s->client = ConnectOrDie(options);
    auto sub = s->client->Subscribe(*stream, {.start = felix::StartPosition::Latest()});
    if (!sub) Die("subscribe: " + sub.error().ToString());
    s->subscription = std::move(*sub);
    subscribers.push_back(std::move(s));
  }
  for (auto& s : subscribers) s->thread = std::thread([&, sp = s.get()] { ReadEvents(*sp, stop); });

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
  uint64_t sent = 0, failed = 0;
  for (auto& r : results) {
    ack.Merge(r.ack);
    sent += r.sent;
    failed += r.failed;
  }
  uint64_t expected = sent * w.fanout;
  felix::bench::WaitForSubscribers(subscribers, expected);
  stop.store(true, std::memory_order_release);
  LatencyHistogram deliver;
  uint64_t delivered = 0;
  for (auto& s : subscribers) {
    s->thread.join();
    delivered += s->received.load();
    deliver.Merge(s->latency);
  }
  std::printf("%s\n",
              felix::bench::ResultJson("felix", w, seconds, sent, ack, deliver, delivered, expected)
                  .c_str());
  if (failed != 0) {
    std::fprintf(stderr, "felix-bench: %llu publishes failed\n",
                 static_cast<unsigned long long>(failed));
    return 1;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"felix-bench: FLX1 load generator for Felix (see docs/benchmarks.md)"};
  Target target;
  Workload w;
  uint32_t publishers = 1;
  size_t window = 1;
  app.add_option("--credentials", target.credentials,
                 "the broker's admin-credentials.json (address, CA file, signing key)");
  app.add_option("--broker", target.broker, "broker QUIC address host:port");
  app.add_option("--ca", target.ca_file, "PEM file that verifies the broker");
  app.add_option("--token", target.token, "Felix token");
  app.add_option("--tenant", target.tenant, "tenant (default: the credential file's)");
  app.add_option("--stream", target.stream, "stream (namespace/stream or stream), must exist");
  app.add_option("--publishers", publishers, "publishing connections (default 1)")
      ->check(CLI::Range(1u, 1024u));
  app.add_option("--window", window, "acked batches in flight per publisher (default 1)")
      ->check(CLI::Range(size_t{1}, size_t{4096}));
  felix::bench::AddWorkloadOptions(app, w);

  felix::bench::ReportOptions report;
  CLI::App* report_cmd =
      app.add_subcommand("report", "JSON lines of a bench-compare run to Markdown tables + plots");
  report_cmd->add_option("--in", report.input, "JSON lines (one run each)")->required();
  report_cmd->add_option("--markdown", report.markdown, "Markdown output")->required();
  report_cmd->add_option("--plots", report.plot_dir, "directory for gnuplot data and script");
  report_cmd->add_option("--command", report.command, "command line quoted in the report");
  report_cmd->add_option("--machine", report.machine, "machine description");
  CLI11_PARSE(app, argc, argv);
  if (report_cmd->parsed()) return felix::bench::RunReport(report);
  if (w.batch == 0) Die("--batch must be at least 1");
  return RunPublish(target, w, publishers, window);
}
