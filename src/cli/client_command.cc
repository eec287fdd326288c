// `felix pub` and `felix sub`: publish to and subscribe to a stream with the C++ client
// library. Both find the broker's QUIC address, the tenant, the CA file that verifies the
// broker, and a token by themselves from the credential file the broker writes in its data
// directory (the token is minted locally from its signing key, scoped to the one stream);
// --broker, --tenant, --token, --ca override each.
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "cli/client_connection.h"
#include "cli/command.h"
#include "felix/client.h"

namespace felix::cli {

namespace {

ClientOptions ResolveStreamOptions(const ClientConnection& c, const StreamRef& stream) {
  return ResolveClientOptions(c, stream.namespace_name, stream.stream,
                              {"stream.publish:stream:{scope}", "stream.subscribe:stream:{scope}"});
}

StreamRef ParseStream(const std::string& text) {
  auto ref = StreamRef::Parse(text);
  if (!ref) Die(ref.error().message, 2);
  return *ref;
}

struct PubOptions {
  std::string stream;
  std::vector<std::string> messages;
  double rate = 0;  // messages per second; 0 = as fast as acks allow
  std::string key;
  bool has_key = false;
  std::string ack = "per_batch";
  size_t batch = 1;
  bool quiet = false;
};

// Tracks outstanding acknowledgements and prints offsets as they come.
class PubTracker {
 public:
  explicit PubTracker(bool quiet) : quiet_(quiet) {}
  void Sent(size_t n) {
    std::lock_guard<std::mutex> lock(mu_);
    ++outstanding_;
    sent_ += n;
  }
  void Done(const ClientResult<PublishReceipt>& r) {
    std::lock_guard<std::mutex> lock(mu_);
    --outstanding_;
    if (!r) {
      if (!error_) error_ = r.error().ToString();
    } else {
      acked_ += r->count;
      if (r->offset && !quiet_)
        for (size_t i = 0; i < r->count; ++i) std::cout << (*r->offset + i) << "\n";
      std::cout.flush();
    }
    cv_.notify_all();
  }
  // Waits until nothing is outstanding (or the deadline passes); false on timeout.
  bool Drain(std::chrono::milliseconds timeout) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, timeout, [&] { return outstanding_ == 0; });
  }
  std::optional<std::string> error() {
    std::lock_guard<std::mutex> lock(mu_);
    return error_;
  }
  std::pair<size_t, size_t> counts() {
    std::lock_guard<std::mutex> lock(mu_);
    return {sent_, acked_};
  }

 private:
  const bool quiet_;
  std::mutex mu_;
  std::condition_variable cv_;
  size_t outstanding_ = 0;
  size_t sent_ = 0, acked_ = 0;
  std::optional<std::string> error_;
};

void RunPub(const ClientConnection& conn, const PubOptions& opts) {
  StreamRef stream = ParseStream(opts.stream);
  auto ack = ParseAckMode(opts.ack);
  if (!ack) Die(ack.error().message, 2);
  if (opts.batch == 0) Die("--batch must be at least 1", 2);
  if (opts.rate < 0) Die("--rate must not be negative", 2);
  ClientOptions options = ResolveStreamOptions(conn, stream);
  auto client = ConnectOrDie(options);
  PublishOptions po;
  po.ack = *ack;
  if (opts.has_key) po.key = opts.key;

  PubTracker tracker(opts.quiet);
  const bool from_args = !opts.messages.empty();
  size_t next_arg = 0;
  auto next_message = [&](std::string& out) -> bool {
    if (from_args) {
      if (next_arg >= opts.messages.size()) return false;
      out = opts.messages[next_arg++];
      return true;
    }
    return static_cast<bool>(std::getline(std::cin, out));
  };
  const auto start = std::chrono::steady_clock::now();
  auto last_progress = start;
  size_t published = 0;
  std::vector<std::string> batch;
  std::string line;
  bool more = true;
  while (more) {
    batch.clear();
    while (batch.size() < opts.batch && (more = next_message(line))) batch.push_back(line);
    if (batch.empty()) break;
    if (opts.rate > 0) {
      // Pace: message number `published` is due at start + published / rate.
      auto due = start + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                             std::chrono::duration<double>(double(published) / opts.rate));
      std::this_thread::sleep_until(due);
    }
    if (auto e = tracker.error()) break;
    tracker.Sent(batch.size());
    auto queued = client->PublishAsync(
        stream, batch, po, [&tracker](ClientResult<PublishReceipt> r) { tracker.Done(r); });
    if (!queued) {
      tracker.Done(tl::unexpected(queued.error()));
      break;
    }
    published += batch.size();
    auto now = std::chrono::steady_clock::now();
    if (now - last_progress >= std::chrono::seconds(1) && now - start >= std::chrono::seconds(2)) {
      auto [sent, acked] = tracker.counts();
      double secs = std::chrono::duration<double>(now - start).count();
      std::cerr << "felix pub: " << sent << " sent, " << acked << " acked, "
                << static_cast<uint64_t>(double(sent) / secs) << " msg/s\n";
      last_progress = now;
    }
  }
  if (!tracker.Drain(options.request_timeout)) Die("timed out waiting for acknowledgements");
  client->Close();
  if (auto e = tracker.error()) Die("publish failed: " + *e);
  auto [sent, acked] = tracker.counts();
  if (!opts.quiet)
    std::cerr << "felix pub: published " << sent << " message(s) to " << stream.ToString()
              << (*ack == AckMode::kNone ? " (unacknowledged)\n" : "\n");
}

struct SubOptions {
  std::string stream;
  std::string from = "latest";
  uint32_t shard = 0;
  uint64_t count = 0;  // 0 = until interrupted or the subscription ends
};

void RunSub(const ClientConnection& conn, const SubOptions& opts) {
  StreamRef stream = ParseStream(opts.stream);
  auto start = StartPosition::Parse(opts.from);
  if (!start) Die(start.error().message, 2);
  ClientOptions options = ResolveStreamOptions(conn, stream);
  auto client = ConnectOrDie(options);
  SubscribeOptions so;
  so.shard = opts.shard;
  so.start = *start;
  auto sub = client->Subscribe(stream, so);
  if (!sub) Die("subscribe " + stream.ToString() + ": " + sub.error().ToString());
  std::cerr << "felix sub: subscribed to " << stream.ToString() << " shard " << opts.shard;
  if (auto s = (*sub)->start_offset()) std::cerr << " start_offset=" << *s;
  if (auto l = (*sub)->live_offset()) std::cerr << " live_offset=" << *l;
  std::cerr << "\n";
  uint64_t received = 0;
  while (opts.count == 0 || received < opts.count) {
    auto event = (*sub)->Next(std::chrono::milliseconds(1000));
    if (!event) {
      std::cout.flush();
      const ClientError& why = event.error();
      if (why.code == ClientErrorCode::kLagged && why.resume_from) {
        // The broker dropped records for this (too slow) subscriber: say where to resume.
        Die("subscription lagged: records from offset " + std::to_string(*why.resume_from) +
                " were not delivered; resume with --from " + std::to_string(*why.resume_from),
            3);
      }
      Die("subscription ended: " + why.ToString());
    }
    if (!*event) continue;
    const Event& e = **event;
    if (e.offset)
      std::cout << *e.offset;
    else
      std::cout << "-";
    std::cout << "\t" << e.payload << "\n";
    std::cout.flush();
    ++received;
  }
  (*sub)->Close();
  client->Close();
}

}  // namespace

void RegisterClientCommands(CLI::App& app) {
  auto pub_conn = std::make_shared<ClientConnection>();
  auto pub = std::make_shared<PubOptions>();
  CLI::App* p = app.add_subcommand(
      "pub", "publish messages (arguments, or one per stdin line) to STREAM or NAMESPACE/STREAM");
  AddClientConnectionOptions(p, *pub_conn);
  p->add_option("stream", pub->stream, "STREAM or NAMESPACE/STREAM")->required();
  p->add_option("messages", pub->messages, "messages (default: read lines from stdin)");
  p->add_option("--rate", pub->rate, "messages per second (default: unlimited)");
  p->add_option("--key", pub->key, "routing key (selects the shard)")
      ->each([pub](const std::string&) { pub->has_key = true; });
  p->add_option("--ack", pub->ack, "none, per_message or per_batch (default)");
  p->add_option("--batch", pub->batch, "messages per publish batch (default 1)");
  p->add_flag("--quiet,-q", pub->quiet, "print no offsets");
  p->callback([pub_conn, pub] { RunPub(*pub_conn, *pub); });

  auto sub_conn = std::make_shared<ClientConnection>();
  auto sub = std::make_shared<SubOptions>();
  CLI::App* s = app.add_subcommand(
      "sub", "subscribe to one shard of a stream; prints offset<TAB>payload per event");
  AddClientConnectionOptions(s, *sub_conn);
  s->add_option("stream", sub->stream, "STREAM or NAMESPACE/STREAM")->required();
  s->add_option("--from", sub->from, "earliest, latest (default) or an offset");
  s->add_option("--shard", sub->shard, "shard to read (default 0)");
  s->add_option("--count", sub->count, "exit after N events (default: run until the end)");
  s->callback([sub_conn, sub] { RunSub(*sub_conn, *sub); });
}

}  // namespace felix::cli
