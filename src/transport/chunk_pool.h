// ChunkPool: free send-buffer chunks of the largest size (SendBuffer::kMaxChunk) and of the
// smallest (SendBuffer::kMinChunk), kept on an endpoint for its streams' next writes, and freed
// once the endpoint has not taken one for a while.
//
// Why the largest: a busy stream's chunks are freed as the peer acknowledges them and allocated
// again for the next writes. A 64 KiB block freed at the top of the loop thread's heap is
// trimmed back to the kernel, so every new chunk came back as fresh pages: a fire-and-forget
// publisher's I/O thread spent ~12 % of the client's CPU in page faults inside
// SendBuffer::Append (docs/performance.md, change 56). Kept here, a chunk is reused warm.
//
// Why the smallest: a stream per request (a consumer's acknowledgements, each on its own
// stream) takes one small chunk for its answer and frees it once the answer is acknowledged;
// with hundreds of such streams in flight glibc's per-thread cache (7 blocks a size) cannot
// serve them, and each allocation and free went through the small bins — ~3 % of the broker's
// loop thread in a drain with acknowledgements sent together (docs/performance.md, change 66).
//
// Bounded: at most kMaxChunks (2 MiB) large and kMaxSmallChunks (256 KiB) small chunks are
// kept, and all of them are freed when none was taken for kIdleNs — the endpoint wakes for that
// (ReleaseAt joins its deadlines), so an idle endpoint ends up holding none (docs/performance.md
// change 15's rule).
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
  static constexpr size_t kSmallChunkBytes = 512;
  static constexpr size_t kLargeChunkBytes = size_t{64} * 1024;
  static constexpr size_t kMaxChunks = 32;
  static constexpr size_t kMaxSmallChunks = 512;
  static constexpr uint64_t kIdleNs = 1'000'000'000;

  // now_ns: the loop's monotonic clock in nanoseconds, read when an empty pool is given a chunk.
  explicit ChunkPool(uint64_t (*now_ns)()) : now_ns_(now_ns) {}

  // A kept chunk of `bytes` (kSmallChunkBytes or kLargeChunkBytes), or null when none is.
  std::unique_ptr<uint8_t[]> Take(size_t bytes) {
    auto* list = ListFor(bytes);
    if (list == nullptr || list->empty()) return nullptr;
    taken_ = true;
    auto chunk = std::move(list->back());
    list->pop_back();
    return chunk;
  }
  // Keeps `chunk` (exactly `bytes` long) if that is a size kept and fewer than the bound of that
  // size are kept; frees it otherwise.
  void Give(std::unique_ptr<uint8_t[]> chunk, size_t bytes) {
    auto* list = ListFor(bytes);
    if (list == nullptr) return;
    if (list->size() >= (bytes == kLargeChunkBytes ? kMaxChunks : kMaxSmallChunks)) return;
    if (empty()) release_at_ = now_ns_() + kIdleNs;  // the idle deadline starts
    list->push_back(std::move(chunk));
  }
  // When Expire frees what is kept unless one is taken first; UINT64_MAX when none is kept.
  uint64_t ReleaseAt() const { return empty() ? UINT64_MAX : release_at_; }
  // At or after ReleaseAt(): frees every kept chunk if none was taken since the last call,
  // otherwise waits kIdleNs more.
  void Expire(uint64_t now_ns) {
    if (empty() || now_ns < release_at_) return;
    if (taken_) {
      taken_ = false;
      release_at_ = now_ns + kIdleNs;
      return;
    }
    std::vector<std::unique_ptr<uint8_t[]>>().swap(large_);
    std::vector<std::unique_ptr<uint8_t[]>>().swap(small_);
  }
  // Chunks kept of the largest size and of the smallest.
  size_t size() const { return large_.size(); }
  size_t small_size() const { return small_.size(); }

 private:
  using List = std::vector<std::unique_ptr<uint8_t[]>>;
  List* ListFor(size_t bytes) {
    if (bytes == kLargeChunkBytes) return &large_;
    if (bytes == kSmallChunkBytes) return &small_;
    return nullptr;
  }
  bool empty() const { return large_.empty() && small_.empty(); }

  uint64_t (*now_ns_)();
  List large_;
  List small_;
  uint64_t release_at_ = UINT64_MAX;
  bool taken_ = false;
};

}  // namespace felix::transport
