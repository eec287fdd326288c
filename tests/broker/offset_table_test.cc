// OffsetTable against std::map under seeded random inserts and erases: every lookup, the size
// and the full contents agree after each step, through growth, shrinking and the backward
// shift of erase in long probe runs.
#include "broker/offset_table.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>
#include <string>
#include <vector>

namespace felix::broker {
namespace {

std::map<uint64_t, std::string> Contents(const OffsetTable<std::string>& table) {
  std::map<uint64_t, std::string> out;
  table.ForEach([&](Offset key, const std::string& value) {
    EXPECT_TRUE(out.emplace(key.value(), value).second) << "key listed twice: " << key;
  });
  return out;
}

// `span`: keys are drawn from [base, base + span); a small span makes runs collide and erase
// shift entries back, a large one keeps the table sparse.
void RunAgainstMap(uint64_t seed, uint64_t base, uint64_t span, int steps) {
  std::mt19937_64 random(seed);
  OffsetTable<std::string> table;
  std::map<uint64_t, std::string> model;
  for (int step = 0; step < steps; ++step) {
    const uint64_t key = base + random() % span;
    // Phases: mostly inserts, then mostly erases, so the table grows and shrinks again.
    const bool growing = (step / 2000) % 2 == 0;
    const bool insert = random() % 4 < (growing ? 3u : 1u);
    if (insert) {
      std::string value = "v" + std::to_string(step) + std::string(step % 40, 'x');
      table.Insert(Offset(key), value);
      model[key] = value;
    } else {
      EXPECT_EQ(table.Erase(Offset(key)), model.erase(key) == 1) << "step " << step;
    }
    ASSERT_EQ(table.size(), model.size()) << "step " << step;
    const uint64_t probe = base + random() % span;
    const std::string* found = table.Find(Offset(probe));
    auto expected = model.find(probe);
    ASSERT_EQ(found != nullptr, expected != model.end()) << "step " << step;
    if (found != nullptr) {
      EXPECT_EQ(*found, expected->second);
    }
    if (step % 500 == 0) {
      ASSERT_EQ(Contents(table), model) << "step " << step;
    }
  }
  EXPECT_EQ(Contents(table), model);
}

TEST(OffsetTable, AgreesWithAMapOnDenseKeys) {
  RunAgainstMap(1, 0, 300, 12000);
}

TEST(OffsetTable, AgreesWithAMapOnSparseKeys) {
  RunAgainstMap(2, 1'000'000, 1u << 30, 12000);
}

TEST(OffsetTable, AgreesWithAMapNearTheTopOfTheRange) {
  RunAgainstMap(3, UINT64_MAX - 5000, 5000, 12000);
}

// A burst: the table grows to 50,000 entries, then every entry is erased in random order, so
// it halves back down step by step; the survivors stay findable through every shrink.
TEST(OffsetTable, EveryEntrySurvivesGrowthAndShrinkingThroughABurst) {
  std::mt19937_64 random(4);
  OffsetTable<std::string> table;
  std::vector<uint64_t> keys;
  for (uint64_t i = 0; i < 50000; ++i) {
    keys.push_back(7 + i * 3);
    table.Insert(Offset(keys.back()), std::to_string(i));
  }
  std::shuffle(keys.begin(), keys.end(), random);
  for (size_t i = 0; i < keys.size(); ++i) {
    ASSERT_TRUE(table.Erase(Offset(keys[i])));
    ASSERT_FALSE(table.contains(Offset(keys[i])));
    if (i % 997 == 0 || keys.size() - i < 40) {
      for (size_t j = i + 1; j < keys.size(); ++j) {
        const std::string* value = table.Find(Offset(keys[j]));
        ASSERT_NE(value, nullptr) << "erased " << i;
        ASSERT_EQ(*value, std::to_string((keys[j] - 7) / 3));
      }
    }
  }
  EXPECT_TRUE(table.empty());
}

TEST(OffsetTable, FindOrInsertStartsAtTheDefaultAndEraseIfRemovesExactlyTheMatches) {
  OffsetTable<uint32_t> table;
  for (uint64_t i = 0; i < 1000; ++i) ++table.FindOrInsert(Offset(i));
  ++table.FindOrInsert(Offset(7));
  EXPECT_EQ(*table.Find(Offset(7)), 2u);
  EXPECT_EQ(*table.Find(Offset(8)), 1u);
  table.EraseIf([](Offset key, uint32_t) { return key.value() % 3 == 0; });
  EXPECT_EQ(table.size(), 666u);
  for (uint64_t i = 0; i < 1000; ++i) EXPECT_EQ(table.contains(Offset(i)), i % 3 != 0) << i;
  table.clear();
  EXPECT_TRUE(table.empty());
  EXPECT_EQ(table.Find(Offset(1)), nullptr);
  EXPECT_FALSE(table.Erase(Offset(1)));
  EXPECT_EQ(table.FindOrInsert(Offset(1)), 0u);  // usable again after clear
}

}  // namespace
}  // namespace felix::broker
