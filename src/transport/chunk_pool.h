// ChunkPool: free send-buffer chunks of the largest size (SendBuffer::kMaxChunk), kept on an
// endpoint for its streams' next writes, and freed once the endpoint has not taken one for a
// while.
//
// Why: a busy stream's chunks are freed as the peer acknowledges them and allocated again for
// the next writes. A 64 KiB block freed at the top of the loop thread's heap is trimmed back to
// the kernel, so every new chunk came back as fresh pages: a fire-and-forget publisher's I/O
// thread spent ~12 % of the client's CPU in page faults inside SendBuffer::Append
// (docs/performance.md, change 56). Kept here, a chunk is reused warm.
//
// Bounded: at most kMaxChunks (2 MiB) are kept, and all of them are freed when none was taken
// for kIdleNs — the endpoint wakes for that (ReleaseAt joins its deadlines), so an idle
// endpoint ends up holding none (docs/performance.md change 15's rule).
//
// Single-threaded: the endpoint's loop (whichever thread runs it) is its only user.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

namespace felix::transport {

class ChunkPool {
 public:
  static constexpr size_t kMaxChunks = 32;
  static constexpr uint64_t kIdleNs = 1'000'000'000;

  // now_ns: the loop's monotonic clock in nanoseconds, read when an empty pool is given a chunk.
  explicit ChunkPool(uint64_t (*now_ns)()) : now_ns_(now_ns) {}

  // A kept chunk, or null when none is.
  std::unique_ptr<uint8_t[]> Take() {
    if (chunks_.empty()) return nullptr;
    taken_ = true;
    auto chunk = std::move(chunks_.back());
    chunks_.pop_back();
    return chunk;
  }
  // Keeps `chunk` (exactly SendBuffer::kMaxChunk bytes) unless kMaxChunks are kept already.
  void Give(std::unique_ptr<uint8_t[]> chunk) {
    if (chunks_.size() >= kMaxChunks) return;
    if (chunks_.empty()) release_at_ = now_ns_() + kIdleNs;  // the idle deadline starts
    chunks_.push_back(std::move(chunk));
  }
  // When Expire frees what is kept unless one is taken first; UINT64_MAX when none is kept.
  uint64_t ReleaseAt() const { return chunks_.empty() ? UINT64_MAX : release_at_; }
  // At or after ReleaseAt(): frees every kept chunk if none was taken since the last call,
  // otherwise waits kIdleNs more.
  void Expire(uint64_t now_ns) {
    if (chunks_.empty() || now_ns < release_at_) return;
    if (taken_) {
      taken_ = false;
      release_at_ = now_ns + kIdleNs;
      return;
    }
    std::vector<std::unique_ptr<uint8_t[]>>().swap(chunks_);
  }
  size_t size() const { return chunks_.size(); }

 private:
  uint64_t (*now_ns_)();
  std::vector<std::unique_ptr<uint8_t[]>> chunks_;
  uint64_t release_at_ = UINT64_MAX;
  bool taken_ = false;
};

}  // namespace felix::transport
