// PayloadArena: payloads read back where Append put them, blocks freed front first as the
// oldest payloads are dropped, and a ring's memory following what it holds.
#include <gtest/gtest.h>

#include <cstring>
#include <deque>
#include <string>

#include "storage/log_reader.h"
#include "storage/payload_arena.h"

namespace felix::storage {
namespace {

struct Kept {
  std::string bytes;
  PayloadArena::Placed placed;
};

std::string PayloadOf(uint64_t i, size_t size) {
  std::string p(size, char('a' + i % 26));
  const std::string tag = std::to_string(i);
  std::memcpy(p.data(), tag.data(), std::min(tag.size(), p.size()));
  return p;
}

// Appends payloads of cycling sizes as a ring keeping `keep` of them would, dropping the oldest,
// and checks every kept payload still reads back at its place.
void RunRing(PayloadArena& arena, std::deque<Kept>& kept, size_t keep, uint64_t appends,
             const std::vector<size_t>& sizes, uint64_t& next) {
  for (uint64_t n = 0; n < appends; ++n, ++next) {
    if (kept.size() == keep) {
      arena.Drop(kept.front().placed.block, kept.front().bytes.size());
      kept.pop_front();
    }
    Kept k{PayloadOf(next, sizes[next % sizes.size()]), {}};
    k.placed = arena.Append(AsBytes(k.bytes));
    kept.push_back(std::move(k));
  }
  for (const Kept& k : kept) {
    ASSERT_EQ(std::string(reinterpret_cast<const char*>(k.placed.data), k.bytes.size()), k.bytes);
  }
}

TEST(PayloadArena, PayloadsReadBackWhereTheyWerePutWhileTheOldestAreDropped) {
  PayloadArena arena;
  std::deque<Kept> kept;
  uint64_t next = 0;
  // Sizes around the block sizes, so payloads start blocks early, end them exactly and take
  // blocks of their own.
  const std::vector<size_t> sizes = {256, 1, 511, 512, 513, 4096, 70000, 3, 2 << 20, 256};
  for (int round = 0; round < 20; ++round) {
    RunRing(arena, kept, 1 + size_t(round) * 7 % 40, 50, sizes, next);
  }
  uint64_t live = 0;
  for (const Kept& k : kept) live += k.bytes.size();
  EXPECT_EQ(arena.live_bytes(), live);
}

TEST(PayloadArena, EmptyPayloadsTakeNoBlock) {
  PayloadArena arena;
  const PayloadArena::Placed placed = arena.Append({});
  EXPECT_EQ(placed.block, PayloadArena::kNoBlock);
  EXPECT_EQ(arena.block_count(), 0u);
  EXPECT_EQ(arena.capacity(), 0u);
  arena.Drop(placed.block, 0);
  EXPECT_EQ(arena.block_count(), 0u);
}

// A stream holding one small record holds one small block; a busy ring holds a bounded
// multiple of what it keeps, and in its steady state allocates nothing (its capacity stays).
TEST(PayloadArena, MemoryFollowsWhatTheRingHolds) {
  PayloadArena arena;
  std::string small(100, 's');
  arena.Append(AsBytes(small));
  EXPECT_EQ(arena.capacity(), PayloadArena::kFirstBlock);

  PayloadArena ring;
  std::deque<Kept> kept;
  uint64_t next = 0;
  RunRing(ring, kept, 1000, 20000, {256}, next);  // 256 KB kept
  const size_t settled = ring.capacity();
  EXPECT_LE(settled, 4 * ring.live_bytes());
  RunRing(ring, kept, 1000, 50000, {256}, next);
  EXPECT_EQ(ring.capacity(), settled);

  // A ring of ~25 MB reaches the largest blocks and holds only a few more than it needs.
  PayloadArena large;
  std::deque<Kept> large_kept;
  RunRing(large, large_kept, 100000, 300000, {256}, next);
  EXPECT_LE(large.capacity(), large.live_bytes() + 4 * PayloadArena::kMaxBlock);
}

// A payload larger than the largest block takes a block of its own, freed (not kept as a
// spare) once it is dropped; a ring emptied writes its one block again from the start.
TEST(PayloadArena, AHugePayloadsBlockIsFreedWithItAndAnEmptiedBlockIsReused) {
  PayloadArena arena;
  std::string first(300, 'f');
  const PayloadArena::Placed a = arena.Append(AsBytes(first));
  arena.Drop(a.block, first.size());
  const PayloadArena::Placed b = arena.Append(AsBytes(first));
  EXPECT_EQ(b.data, a.data);  // the lone block, emptied, is written from its start
  EXPECT_EQ(b.block, a.block);

  std::string huge(3 * PayloadArena::kMaxBlock, 'h');
  const PayloadArena::Placed h = arena.Append(AsBytes(huge));
  EXPECT_NE(h.block, b.block);
  EXPECT_GE(arena.capacity(), huge.size());
  std::string after(300, 'a');
  const PayloadArena::Placed c = arena.Append(AsBytes(after));
  arena.Drop(b.block, first.size());
  arena.Drop(h.block, huge.size());
  EXPECT_LT(arena.capacity(), huge.size());  // freed, not a spare
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(c.data), after.size()), after);
  EXPECT_EQ(arena.live_bytes(), after.size());
}

}  // namespace
}  // namespace felix::storage
