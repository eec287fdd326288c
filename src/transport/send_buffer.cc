#include "transport/send_buffer.h"

#include <algorithm>
#include <cstring>

namespace felix::transport {

void SendBuffer::Append(const uint8_t* p, size_t n, ChunkPool* pool) {
  while (n > 0) {
    if (chunks_.empty() || fill_ == chunks_.back().capacity) {
      const size_t grown = chunks_.empty() ? kMinChunk : chunks_.back().capacity * 2;
      const size_t capacity = std::min(kMaxChunk, std::max(grown, n));
      std::unique_ptr<uint8_t[]> bytes = pool != nullptr ? pool->Take(capacity) : nullptr;
      if (!bytes) bytes = std::make_unique_for_overwrite<uint8_t[]>(capacity);
      chunks_.push_back(Chunk{std::move(bytes), {}, capacity, capacity});
      fill_ = 0;
    }
    const size_t k = std::min(n, chunks_.back().capacity - fill_);
    std::memcpy(chunks_.back().bytes.get() + fill_, p, k);
    fill_ += k;
    p += k;
    n -= k;
    end_ += k;
  }
}

void SendBuffer::Adopt(std::vector<uint8_t> bytes) {
  if (bytes.empty()) return;
  // The last chunk ends where it is filled to: what it has room for comes after the adopted
  // bytes in the stream only through a new chunk.
  if (!chunks_.empty()) chunks_.back().capacity = fill_;
  const size_t n = bytes.size();
  chunks_.push_back(Chunk{nullptr, std::move(bytes), n, 0});
  fill_ = n;
  end_ += n;
}

size_t SendBuffer::Peek(std::span<std::span<const uint8_t>> out) const {
  size_t count = 0;
  uint64_t offset = base_;
  for (size_t i = 0; i < chunks_.size() && count < out.size(); ++i) {
    const size_t size = i + 1 == chunks_.size() ? fill_ : chunks_[i].capacity;
    const uint64_t chunk_end = offset + size;
    if (chunk_end > sent_) {
      const size_t skip = sent_ > offset ? size_t(sent_ - offset) : 0;
      out[count++] = {chunks_[i].data() + skip, size - skip};
    }
    offset = chunk_end;
  }
  return count;
}

void SendBuffer::Release(Chunk& chunk, ChunkPool* pool, const Returned* returned) {
  if (!chunk.bytes) {
    if (returned != nullptr && *returned) (*returned)(std::move(chunk.adopted));
    return;
  }
  if (pool != nullptr) pool->Give(std::move(chunk.bytes), chunk.allocated);
}

void SendBuffer::Acked(uint64_t upto, ChunkPool* pool, const Returned* returned) {
  acked_ = std::max(acked_, upto);
  while (chunks_.size() > 1 && base_ + chunks_.front().capacity <= acked_) {
    base_ += chunks_.front().capacity;
    Release(chunks_.front(), pool, returned);
    chunks_.erase(chunks_.begin());
  }
  if (acked_ == end_ && !chunks_.empty()) {  // nothing in flight: the next write starts afresh
    for (Chunk& chunk : chunks_) Release(chunk, pool, returned);
    chunks_.clear();
    base_ = end_;
    fill_ = 0;
  }
}

size_t SendBuffer::capacity() const {
  size_t total = 0;
  for (const Chunk& c : chunks_) total += c.bytes ? c.allocated : c.adopted.capacity();
  return total;
}

}  // namespace felix::transport
