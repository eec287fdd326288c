// PayloadArena: a RingLog's payload bytes, one after another in the order appended, in blocks
// freed front first as the oldest payloads are dropped.
//
// Why not a buffer per record (the ring's storage until change 60): a full ring of the default
// size (100,000 records of 256 bytes) is larger than this machine's caches, so every append
// writes memory last touched a ring's length ago. A buffer per record made that a string
// header, a slot holding it and a heap chunk with its own header per record, each read from
// memory before being written, in the order eviction happened to leave the buffers; here a
// record is its bytes alone, written where the last ones ended, which the hardware prefetcher
// follows (docs/performance.md, change 60).
//
// Blocks grow with the ring, as a stream's send chunks do: the first is kFirstBlock, each next
// twice the last up to kMaxBlock, and never more than half the live bytes (or kFirstBlock), so
// a stream holding a few small records holds a KiB or two, and a small busy ring a fraction more
// than it stores, not megabytes. A payload larger than that gets a block of its own size. A block
// is freed once no payload in it is live and it is not the one written into; up to kSpareBlocks of
// them are kept for the next blocks, so a busy ring allocates nothing in its steady state.
//
// Payloads are dropped oldest first (a ring evicts that way); Drop names the block Append
// said the payload went to. Not thread-safe: its RingLog's mutex guards it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <span>
#include <vector>

namespace felix::storage {

class PayloadArena {
 public:
  static constexpr size_t kFirstBlock = 512;
  static constexpr size_t kMaxBlock = size_t{1} << 20;
  static constexpr size_t kSpareBlocks = 2;
  // The block of an empty payload: it holds no bytes, and dropping it frees nothing.
  static constexpr uint64_t kNoBlock = UINT64_MAX;

  struct Placed {
    const uint8_t* data = nullptr;  // valid until the payload is dropped or the arena cleared
    uint64_t block = kNoBlock;
  };

  // Copies `bytes` in after the last payload appended, contiguous.
  Placed Append(std::span<const uint8_t> bytes);
  // The oldest live payload, `size` bytes placed in `block`, is no longer needed.
  void Drop(uint64_t block, size_t size);
  // Every payload dropped and every block freed.
  void Clear();

  // Bytes allocated for the blocks held now, spare ones included.
  size_t capacity() const;
  size_t block_count() const { return blocks_.size(); }
  uint64_t live_bytes() const { return live_bytes_; }

 private:
  struct Block {
    std::unique_ptr<uint8_t[]> bytes;
    size_t capacity = 0;
    size_t used = 0;
    uint64_t live = 0;  // payloads placed here and not yet dropped
  };

  Block& StartBlock(size_t at_least);
  void FreeFront();

  std::deque<Block> blocks_;  // oldest first; the back one is written into
  uint64_t first_block_ = 0;  // the number of blocks_.front() (numbers only ever grow)
  size_t last_capacity_ = 0;  // of the last block started, for the next one's size
  uint64_t live_bytes_ = 0;   // appended and not dropped
  std::vector<Block> spare_;  // freed blocks of at most kMaxBlock, kept for the next ones
};

}  // namespace felix::storage
