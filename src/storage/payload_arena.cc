#include "storage/payload_arena.h"

#include <algorithm>
#include <cstring>

namespace felix::storage {

PayloadArena::Placed PayloadArena::Append(std::span<const uint8_t> bytes) {
  if (bytes.empty()) return {};
  Block* block = blocks_.empty() ? nullptr : &blocks_.back();
  if (block == nullptr || block->capacity - block->used < bytes.size()) {
    block = &StartBlock(bytes.size());
  }
  uint8_t* at = block->bytes.get() + block->used;
  std::memcpy(at, bytes.data(), bytes.size());
  block->used += bytes.size();
  block->live += 1;
  live_bytes_ += bytes.size();
  return {at, first_block_ + blocks_.size() - 1};
}

PayloadArena::Block& PayloadArena::StartBlock(size_t at_least) {
  const size_t grown = last_capacity_ == 0 ? kFirstBlock : 2 * last_capacity_;
  const size_t bounded =
      std::min({grown, kMaxBlock, std::max<size_t>(kFirstBlock, size_t(live_bytes_ / 2))});
  const size_t capacity = std::max(bounded, at_least);
  last_capacity_ = bounded;
  Block block;
  // A spare block as large as needed; the largest spares are the kMaxBlock ones a busy ring
  // frees, and a block larger than asked only gives the ring room to go on writing into.
  auto spare = std::find_if(spare_.begin(), spare_.end(),
                            [&](const Block& b) { return b.capacity >= capacity; });
  if (spare != spare_.end()) {
    block = std::move(*spare);
    spare_.erase(spare);
  } else {
    block.bytes = std::make_unique_for_overwrite<uint8_t[]>(capacity);
    block.capacity = capacity;
  }
  block.used = 0;
  block.live = 0;
  // The block written until now may hold nothing live (its payloads all dropped): freed now,
  // as Drop would have had it not been the one written into.
  if (!blocks_.empty() && blocks_.back().live == 0 && blocks_.size() == 1) {
    FreeFront();
  }
  blocks_.push_back(std::move(block));
  return blocks_.back();
}

void PayloadArena::Drop(uint64_t block, size_t size) {
  live_bytes_ -= std::min<uint64_t>(live_bytes_, size);
  if (block == kNoBlock || block < first_block_ || block - first_block_ >= blocks_.size()) return;
  Block& b = blocks_[block - first_block_];
  if (b.live > 0) b.live -= 1;
  while (!blocks_.empty() && blocks_.front().live == 0) {
    if (blocks_.size() == 1) {
      blocks_.front().used = 0;  // still the one written into: written again from its start
      break;
    }
    FreeFront();
  }
}

void PayloadArena::FreeFront() {
  Block& front = blocks_.front();
  if (front.capacity <= kMaxBlock && spare_.size() < kSpareBlocks)
    spare_.push_back(std::move(front));
  blocks_.pop_front();
  first_block_ += 1;
}

void PayloadArena::Clear() {
  first_block_ += blocks_.size();
  blocks_.clear();
  spare_.clear();
  last_capacity_ = 0;
  live_bytes_ = 0;
}

size_t PayloadArena::capacity() const {
  size_t total = 0;
  for (const Block& b : blocks_) total += b.capacity;
  for (const Block& b : spare_) total += b.capacity;
  return total;
}

}  // namespace felix::storage
