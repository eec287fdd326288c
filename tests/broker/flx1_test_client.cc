#include "flx1_test_client.h"

#include <future>

#include <gtest/gtest.h>

#include "transport/tls_context.h"

namespace felix::broker::testing {

namespace flx1 = felix::wire::flx1;

void TestStream::Attach(std::shared_ptr<transport::Stream> stream, transport::Endpoint* endpoint) {
  stream_ = stream;
  endpoint_ = endpoint;
  InstallHandlers();
}

void TestStream::InstallHandlers() {
  std::weak_ptr<TestStream> weak = weak_from_this();
  transport::StreamHandlers handlers;
  handlers.on_data = [weak](transport::Stream& s, std::span<const uint8_t> data) {
    auto self = weak.lock();
    if (!self) {
      s.Consume(data.size());
      return;
    }
    std::lock_guard lock(self->mu_);
    if (self->paused_) return;  // not consumed: QUIC credit is not returned
    self->buffer_.insert(self->buffer_.end(), data.begin(), data.end());
    s.Consume(data.size());
    self->cv_.notify_all();
  };
  handlers.on_fin = [weak](transport::Stream&) {
    if (auto self = weak.lock()) {
      std::lock_guard lock(self->mu_);
      self->fin_ = true;
      self->cv_.notify_all();
    }
  };
  handlers.on_reset = [weak](transport::Stream&, uint64_t) {
    if (auto self = weak.lock()) {
      std::lock_guard lock(self->mu_);
      self->reset_ = true;
      self->cv_.notify_all();
    }
  };
  stream_->SetHandlers(std::move(handlers));
}

std::optional<std::vector<uint8_t>> TestStream::ReadFrameBytes(std::chrono::milliseconds timeout) {
  std::unique_lock lock(mu_);
  std::vector<uint8_t> out;
  bool got = cv_.wait_for(lock, timeout, [&] {
    if (buffer_.size() >= flx1::kHeaderSize) {
      uint32_t length = (uint32_t{buffer_[8]} << 24) | (uint32_t{buffer_[9]} << 16) |
                        (uint32_t{buffer_[10]} << 8) | buffer_[11];
      size_t total = flx1::kHeaderSize + length;
      if (buffer_.size() >= total) {
        out.assign(buffer_.begin(), buffer_.begin() + total);
        buffer_.erase(buffer_.begin(), buffer_.begin() + total);
        return true;
      }
    }
    return fin_ || reset_;
  });
  if (!got || out.empty()) return std::nullopt;
  return out;
}

std::optional<flx1::Flx1Frame> TestStream::ReadFrame(std::chrono::milliseconds timeout) {
  auto bytes = ReadFrameBytes(timeout);
  if (!bytes) return std::nullopt;
  auto frame = flx1::DecodeFrame(*bytes, 64u << 20);
  EXPECT_TRUE(frame.has_value()) << (frame ? "" : frame.error().ToString());
  if (!frame) return std::nullopt;
  // Binary frames view `bytes`; keep them alive with the stream (tests read them at once).
  static thread_local std::deque<std::vector<uint8_t>> keep;
  keep.push_back(std::move(*bytes));
  if (keep.size() > 4096) keep.pop_front();
  return flx1::DecodeFrame(keep.back(), 64u << 20).value();
}

bool TestStream::WaitEnded(std::chrono::milliseconds timeout) {
  std::unique_lock lock(mu_);
  return cv_.wait_for(lock, timeout, [&] { return (fin_ || reset_) && buffer_.empty(); });
}

bool TestStream::was_reset() {
  std::lock_guard lock(mu_);
  return reset_;
}

void TestStream::Send(std::vector<uint8_t> bytes) {
  auto stream = stream_;
  endpoint_->Post([stream, bytes = std::move(bytes)] { (void)stream->Write(bytes); });
}

void TestStream::SendMessage(const flx1::Message& message) {
  Send(Frame(message));
}

void TestStream::Finish() {
  auto stream = stream_;
  endpoint_->Post([stream] { stream->Finish(); });
}

void TestStream::SetPaused(bool paused) {
  {
    std::lock_guard lock(mu_);
    paused_ = paused;
  }
  if (!paused) {
    // Re-installing the handlers makes the transport deliver what it kept while paused.
    std::weak_ptr<TestStream> weak = weak_from_this();
    endpoint_->Post([weak] {
      if (auto self = weak.lock()) self->InstallHandlers();
    });
  }
}

std::unique_ptr<Flx1TestClient> Flx1TestClient::Connect(const HostPort& broker,
                                                        const std::string& ca_file) {
  auto client = std::unique_ptr<Flx1TestClient>(new Flx1TestClient());
  transport::TlsOptions tls;
  tls.role = transport::Role::kClient;
  tls.ca_file = ca_file;
  tls.dial_alpn = {transport::kClientAlpn};
  tls.no_certificate = true;
  auto context = transport::TlsContext::Create(tls);
  EXPECT_TRUE(context.has_value()) << (context ? "" : context.error().message);
  if (!context) return nullptr;
  transport::EndpointOptions options;
  options.tls = *context;
  options.name = "test-client";
  auto endpoint = transport::Endpoint::Create(HostPort{"127.0.0.1", 0}, options, client->metrics_,
                                              std::nullopt);
  EXPECT_TRUE(endpoint.has_value());
  if (!endpoint) return nullptr;
  client->endpoint_ = std::move(*endpoint);
  std::promise<Result<std::shared_ptr<transport::Connection>>> dialled;
  auto future = dialled.get_future();
  Flx1TestClient* raw = client.get();
  client->endpoint_->Dial(
      broker, transport::DialOptions{"localhost"},
      [&dialled, raw](Result<std::shared_ptr<transport::Connection>> r) {
        if (r) {
          transport::ConnectionHandlers handlers;
          handlers.on_stream = [raw](const std::shared_ptr<transport::Stream>& s) {
            auto test_stream = std::make_shared<TestStream>();
            test_stream->Attach(s, raw->endpoint_.get());
            std::lock_guard lock(raw->mu_);
            raw->incoming_.push_back(test_stream);
            raw->cv_.notify_all();
          };
          (*r)->SetHandlers(std::move(handlers));
        }
        dialled.set_value(std::move(r));
      });
  if (future.wait_for(std::chrono::seconds(20)) != std::future_status::ready) {
    ADD_FAILURE() << "dial timed out";
    return nullptr;
  }
  auto connection = future.get();
  EXPECT_TRUE(connection.has_value()) << (connection ? "" : connection.error().message);
  if (!connection) return nullptr;
  client->connection_ = *connection;
  return client;
}

Flx1TestClient::~Flx1TestClient() {
  if (endpoint_) endpoint_->Stop();
}

std::shared_ptr<TestStream> Flx1TestClient::OpenStream() {
  std::promise<std::shared_ptr<TestStream>> opened;
  auto future = opened.get_future();
  endpoint_->Post([&] {
    auto stream = connection_->OpenBidiStream();
    EXPECT_TRUE(stream.has_value());
    auto test_stream = std::make_shared<TestStream>();
    if (stream) test_stream->Attach(*stream, endpoint_.get());
    opened.set_value(test_stream);
  });
  return future.get();
}

std::shared_ptr<TestStream> Flx1TestClient::AcceptEventStream(std::chrono::milliseconds timeout) {
  std::unique_lock lock(mu_);
  if (!cv_.wait_for(lock, timeout, [&] { return !incoming_.empty(); })) return nullptr;
  auto s = incoming_.front();
  incoming_.pop_front();
  return s;
}

bool Flx1TestClient::connection_open() {
  std::promise<bool> open;
  auto f = open.get_future();
  endpoint_->Post([&] { open.set_value(connection_->is_open()); });
  return f.get();
}

std::vector<uint8_t> Frame(const flx1::Message& message) {
  auto bytes = flx1::EncodeMessageFrame(message);
  EXPECT_TRUE(bytes.has_value());
  return bytes ? *bytes : std::vector<uint8_t>{};
}

std::vector<uint8_t> FromHex(std::string_view hex) {
  std::vector<uint8_t> out;
  for (size_t i = 0; i + 1 < hex.size(); i += 2) {
    out.push_back(static_cast<uint8_t>(std::stoi(std::string(hex.substr(i, 2)), nullptr, 16)));
  }
  return out;
}

std::string ToHex(const std::vector<uint8_t>& bytes) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  for (uint8_t b : bytes) {
    out += kHex[b >> 4];
    out += kHex[b & 15];
  }
  return out;
}

}  // namespace felix::broker::testing
