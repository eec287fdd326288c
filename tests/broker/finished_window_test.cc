// FinishedWindow against an ordered set under seeded random marks, cursor advances and trims:
// membership, the count and where the cursor stops agree at every step, for offsets near the
// cursor (bits) and far above it (the overflow set).
#include "broker/finished_window.h"

#include <gtest/gtest.h>

#include <random>
#include <set>

namespace felix::broker {
namespace {

void RunAgainstSet(uint64_t seed, uint64_t start, uint64_t far_percent) {
  std::mt19937_64 random(seed);
  FinishedWindow window;
  window.Reset(Offset(start));
  std::set<uint64_t> model;
  uint64_t position = start;
  for (int step = 0; step < 20000; ++step) {
    const uint64_t op = random() % 100;
    if (op < 70) {
      // Mostly just above the cursor (acks of outstanding claims), sometimes far beyond the
      // window's words.
      const bool far = random() % 100 < far_percent;
      const uint64_t offset =
          position + (far ? FinishedWindow::kMaxWords * 64 + random() % 5000 : random() % 300);
      window.Mark(Offset(offset));
      model.insert(offset);
    } else if (op < 95) {
      uint64_t expected = position;
      while (model.count(expected) != 0) ++expected;
      ASSERT_EQ(window.AdvanceFrom(Offset(position)), Offset(expected)) << "step " << step;
      model.erase(model.begin(), model.lower_bound(expected));
      position = expected;
    } else {  // retention: everything below a later offset is gone
      const uint64_t oldest = position + random() % 2000;
      window.DropBelow(Offset(oldest));
      model.erase(model.begin(), model.lower_bound(oldest));
      position = oldest;
    }
    ASSERT_EQ(window.count(), model.size()) << "step " << step;
    ASSERT_LE(window.start(), Offset(position));
    for (int probe = 0; probe < 4; ++probe) {
      const uint64_t offset = position + random() % 400;
      ASSERT_EQ(window.Contains(Offset(offset)), model.count(offset) != 0) << "step " << step;
    }
    for (uint64_t offset : model) {
      if (offset > position + 400) break;
      ASSERT_TRUE(window.Contains(Offset(offset))) << "step " << step;
    }
  }
}

TEST(FinishedWindow, AgreesWithASetNearTheCursor) {
  RunAgainstSet(11, 0, 0);
}

TEST(FinishedWindow, AgreesWithASetWithOffsetsFarAboveTheCursor) {
  RunAgainstSet(12, 1'000'003, 5);
}

TEST(FinishedWindow, AnOffsetFarAboveTheCursorAllocatesNoWords) {
  FinishedWindow window;
  window.Reset(Offset(0));
  window.Mark(Offset(1'000'000'000'000));  // as words: ~125 GB
  EXPECT_TRUE(window.Contains(Offset(1'000'000'000'000)));
  EXPECT_EQ(window.count(), 1u);
  EXPECT_EQ(window.AdvanceFrom(Offset(0)), Offset(0));
  window.Mark(Offset(0));
  window.Mark(Offset(1));
  EXPECT_EQ(window.AdvanceFrom(Offset(0)), Offset(2));
  EXPECT_EQ(window.count(), 1u);
}

}  // namespace
}  // namespace felix::broker
