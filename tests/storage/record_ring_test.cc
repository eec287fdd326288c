// RecordRing: records in order across the array's wrap and its growth.
#include <gtest/gtest.h>

#include "storage/record_ring.h"

namespace felix::storage {
namespace {

void Push(RecordRing<>& ring, uint64_t offset) {
  Record& r = ring.PushBack();
  r.offset = Offset(offset);
  r.payload = std::to_string(offset);
}

void ExpectOrder(const RecordRing<>& ring, uint64_t oldest, uint64_t newest) {
  ASSERT_EQ(ring.size(), newest - oldest + 1);
  for (size_t i = 0; i < ring.size(); ++i) {
    EXPECT_EQ(ring[i].offset, Offset(oldest + i));
    EXPECT_EQ(ring[i].payload, std::to_string(oldest + i));
  }
}

TEST(RecordRing, KeepsOrderWhenItWrapsAndWhenItGrowsWrapped) {
  RecordRing<> ring;
  EXPECT_TRUE(ring.empty());
  uint64_t oldest = 0, next = 0;
  // Push and pop in step so the oldest walks round the array many times, growing now and then
  // with the oldest anywhere in it.
  for (int round = 0; round < 200; ++round) {
    for (int i = 0; i < round % 13 + 1; ++i) Push(ring, next++);
    for (int i = 0; i < round % 7 && !ring.empty(); ++i) {
      EXPECT_EQ(ring.front().offset, Offset(oldest));
      ring.PopFront();
      ++oldest;
    }
    if (ring.empty()) continue;
    ExpectOrder(ring, oldest, next - 1);
  }
  EXPECT_GT(next - oldest, 16u);  // it grew past its first array while wrapped
  ring.Clear();
  EXPECT_TRUE(ring.empty());
  Push(ring, 7);
  ExpectOrder(ring, 7, 7);
}

}  // namespace
}  // namespace felix::storage
