// Flx1TestClient: a deliberately small, blocking FLX1 client for broker end-to-end tests. It
// sends exact bytes (so golden frames can be replayed verbatim) and hands back exact bytes and
// decoded frames, over the real QUIC transport.
//
// Each TestStream buffers what the broker sends; Read* calls wait (with a deadline) on a
// condition variable fed by the transport's loop thread. Broker-opened unidirectional streams
// (event streams) are collected by the client in arrival order.
#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "common/metrics.h"
#include "transport/endpoint.h"
#include "wire/flx1/frame.h"

namespace felix::broker::testing {

class TestStream : public std::enable_shared_from_this<TestStream> {
 public:
  // One whole frame's bytes (header + payload), or nullopt on timeout / end of stream.
  std::optional<std::vector<uint8_t>> ReadFrameBytes(
      std::chrono::milliseconds timeout = std::chrono::seconds(20));
  // The next frame, decoded.
  std::optional<wire::flx1::Flx1Frame> ReadFrame(
      std::chrono::milliseconds timeout = std::chrono::seconds(20));
  // The next frame as a JSON message of type T (fails the test otherwise).
  template <typename T>
  std::optional<T> Read(std::chrono::milliseconds timeout = std::chrono::seconds(20)) {
    auto frame = ReadFrame(timeout);
    if (!frame) return std::nullopt;
    auto* message = std::get_if<wire::flx1::Message>(&*frame);
    if (message == nullptr) return std::nullopt;
    auto* typed = std::get_if<T>(message);
    if (typed == nullptr) return std::nullopt;
    return *typed;
  }
  // True once the broker finished (FIN) or reset the stream and every byte was read.
  bool WaitEnded(std::chrono::milliseconds timeout = std::chrono::seconds(20));
  bool was_reset();

  void Send(std::vector<uint8_t> bytes);
  void SendMessage(const wire::flx1::Message& message);
  void Finish();
  // Stops consuming: bytes stay in QUIC's buffer, so flow control stops the broker.
  void SetPaused(bool paused);

 private:
  friend class Flx1TestClient;
  void Attach(std::shared_ptr<transport::Stream> stream, transport::Endpoint* endpoint);
  void InstallHandlers();

  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<uint8_t> buffer_;
  bool fin_ = false;
  bool reset_ = false;
  bool paused_ = false;
  std::shared_ptr<transport::Stream> stream_;
  transport::Endpoint* endpoint_ = nullptr;
};

class Flx1TestClient {
 public:
  // Dials `broker` verifying its certificate against `ca_file` (name "localhost").
  static std::unique_ptr<Flx1TestClient> Connect(const HostPort& broker,
                                                 const std::string& ca_file);
  ~Flx1TestClient();

  std::shared_ptr<TestStream> OpenStream();
  // The next broker-opened unidirectional stream.
  std::shared_ptr<TestStream> AcceptEventStream(
      std::chrono::milliseconds timeout = std::chrono::seconds(20));
  bool connection_open();

 private:
  MetricsRegistry metrics_;
  std::unique_ptr<transport::Endpoint> endpoint_;
  std::shared_ptr<transport::Connection> connection_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::shared_ptr<TestStream>> incoming_;
};

// Encodes `message` as one frame (test helper).
std::vector<uint8_t> Frame(const wire::flx1::Message& message);
std::vector<uint8_t> FromHex(std::string_view hex);
std::string ToHex(const std::vector<uint8_t>& bytes);

}  // namespace felix::broker::testing
