// SendBuffer: the bytes of one QUIC stream from the first unacknowledged to the last written.
//
// ngtcp2 keeps pointers into sent bytes until they are acknowledged, so bytes never move once
// appended: they live in chunks, freed front-first once fully acknowledged, and all of them
// once everything written is acknowledged — an idle stream (a subscription waiting for events,
// a connection's control stream) holds no buffer (docs/performance.md, change 15).
//
// Chunks grow with the stream's burst: the first is just large enough for the first write
// (at least kMinChunk), each next one twice the last or the write's size, up to kMaxChunk.
// Most streams write a few hundred bytes and end (an `auth` and one group request, its
// answer): a fixed 64 KiB chunk for those made every such stream a large allocation, and with
// many of them in flight glibc grew and trimmed its heap around them — page faults and
// TLB-flushing `madvise` on every request (docs/performance.md, change 28). A busy stream
// reaches kMaxChunk within a few chunks and stays there until it drains.
//
// Single-threaded: owned by its stream, used on the endpoint's loop thread only.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <vector>

#include "transport/chunk_pool.h"

namespace felix::transport {

class SendBuffer {
 public:
  // A short stream's chunk stays under 1,000 bytes, which glibc serves from its small bins:
  // a 1 KiB request is a large-bin one, and each that the per-thread cache (7 chunks a size)
  // cannot serve first consolidates the fast bins — with hundreds of short streams in flight
  // (a consumer's acknowledgements, each on its own stream) that was nearly every one
  // (docs/performance.md, change 36).
  static constexpr size_t kMinChunk = ChunkPool::kSmallChunkBytes;  // 512
  static constexpr size_t kMaxChunk = ChunkPool::kLargeChunkBytes;  // 64 KiB

  // Appends n bytes after the last written byte. A new chunk of kMinChunk or kMaxChunk comes
  // from `pool` when it keeps one (null: none used).
  void Append(const uint8_t* p, size_t n, ChunkPool* pool = nullptr);
  // Appends `bytes` without copying them: the buffer becomes a chunk of its own, kept until
  // every byte in it is acknowledged (ngtcp2 points into it until then), and the next Append
  // starts a new chunk after it. Nothing when empty.
  void Adopt(std::vector<uint8_t> bytes);
  // Fills up to out.size() spans with the written but unsent bytes, in order; returns how many.
  size_t Peek(std::span<std::span<const uint8_t>> out) const;
  // The first n unsent bytes were handed to the connection.
  void Sent(size_t n) { sent_ += n; }
  // Every byte below stream offset `upto` is acknowledged (a lower upto than before is ignored).
  // Freed kMinChunk and kMaxChunk chunks go to `pool` when given; adopted buffers, every byte of
  // them acknowledged, go to `returned` when given (their bytes as written), else are freed.
  using Returned = std::function<void(std::vector<uint8_t>)>;
  void Acked(uint64_t upto, ChunkPool* pool = nullptr, const Returned* returned = nullptr);

  uint64_t unsent() const { return end_ - sent_; }
  uint64_t unacked() const { return end_ - acked_; }
  size_t chunk_count() const { return chunks_.size(); }
  // Bytes allocated for the chunks held now.
  size_t capacity() const;

 private:
  struct Chunk {
    std::unique_ptr<uint8_t[]> bytes;  // null for an adopted chunk
    std::vector<uint8_t> adopted;      // Adopt's buffer
    size_t capacity = 0;               // the chunk's bytes in the stream once it is not the last
    size_t allocated = 0;              // of `bytes`: what goes back to a pool

    const uint8_t* data() const { return bytes ? bytes.get() : adopted.data(); }
  };

  // Every chunk but the last is full (Append fills one before it starts the next; Adopt ends
  // the last where it is filled to). A vector,
  // not a deque: an empty std::deque allocates (its map and a first block) with every stream,
  // and a stream rarely holds more than a few chunks (at most send_high_water / kMaxChunk).
  static void Release(Chunk& chunk, ChunkPool* pool, const Returned* returned);

  std::vector<Chunk> chunks_;
  size_t fill_ = 0;    // bytes used in the last chunk
  uint64_t base_ = 0;  // stream offset of chunks_.front().bytes[0]
  uint64_t sent_ = 0;
  uint64_t acked_ = 0;
  uint64_t end_ = 0;
};

}  // namespace felix::transport
