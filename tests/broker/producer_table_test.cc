#include "broker/producer_table.h"

#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace felix::broker {
namespace {

using Kind = ProducerTable::Verdict::Kind;

uint64_t Digest(std::vector<std::string> payloads) {
  std::vector<std::span<const uint8_t>> spans;
  for (const auto& p : payloads) {
    spans.emplace_back(reinterpret_cast<const uint8_t*>(p.data()), p.size());
  }
  return BatchDigest(spans);
}

TEST(BatchDigest, RecordBoundariesCount) {
  EXPECT_NE(Digest({"ab", "c"}), Digest({"a", "bc"}));
  EXPECT_EQ(Digest({"ab", "c"}), Digest({"ab", "c"}));
  EXPECT_NE(Digest({}), Digest({""}));
}

TEST(ProducerTable, SequencesFromZeroThenDuplicatesGapsAndReuse) {
  ProducerTable table;
  EXPECT_EQ(table.Admit(7, 1, 1, 1).kind, Kind::kUnknownProducer);
  EXPECT_EQ(table.Admit(7, 0, 10, 1).kind, Kind::kAppend);
  // A resend while the original is being written: a duplicate without an offset yet.
  auto pending = table.Admit(7, 0, 10, 1);
  EXPECT_EQ(pending.kind, Kind::kDuplicate);
  EXPECT_FALSE(pending.first_offset.has_value());
  table.Committed(7, 0, 40);
  auto done = table.Admit(7, 0, 10, 1);
  EXPECT_EQ(done.kind, Kind::kDuplicate);
  EXPECT_EQ(done.first_offset, 40u);
  EXPECT_EQ(table.Admit(7, 0, 11, 1).kind, Kind::kReused);
  auto gap = table.Admit(7, 2, 12, 1);
  EXPECT_EQ(gap.kind, Kind::kGap);
  EXPECT_EQ(gap.expected, 1u);
  EXPECT_EQ(table.Admit(7, 1, 12, 1).kind, Kind::kAppend);
}

TEST(ProducerTable, OnlyTheLastWindowOfBatchesIsRemembered) {
  ProducerTable table;
  for (uint64_t s = 0; s < ProducerTable::kWindow + 5; ++s) {
    ASSERT_EQ(table.Admit(1, s, s, 1).kind, Kind::kAppend);
    table.Committed(1, s, s);
  }
  EXPECT_EQ(table.Admit(1, 0, 0, 1).kind, Kind::kExpired);
  EXPECT_EQ(table.Admit(1, 5, 5, 1).kind, Kind::kDuplicate);
}

TEST(ProducerTable, AFailedWriteIsExpectedAgain) {
  ProducerTable table;
  ASSERT_EQ(table.Admit(1, 0, 0, 1).kind, Kind::kAppend);
  table.Committed(1, 0, 0);
  ASSERT_EQ(table.Admit(1, 1, 1, 1).kind, Kind::kAppend);
  table.Failed(1, 1);
  EXPECT_EQ(table.Admit(1, 1, 1, 1).kind, Kind::kAppend);
}

TEST(ProducerTable, RestoredMarksAnswerResendsAndSetTheNextSequence) {
  ProducerTable table;
  table.Restore(9, 0, 100, 2, 0);
  table.Restore(9, 1, 101, 1, 2);
  auto resend = table.Admit(9, 1, 101, 1);
  EXPECT_EQ(resend.kind, Kind::kDuplicate);
  EXPECT_EQ(resend.first_offset, 2u);
  EXPECT_EQ(table.Admit(9, 2, 102, 1).kind, Kind::kAppend);
}

TEST(ProducerTable, TheColdestProducerIsForgottenPastTheCap) {
  ProducerTable table;
  for (uint64_t p = 1; p <= ProducerTable::kMaxProducers; ++p) {
    ASSERT_EQ(table.Admit(p, 0, 0, 1).kind, Kind::kAppend);
  }
  ASSERT_EQ(table.Admit(1, 1, 1, 1).kind, Kind::kAppend);  // producer 1 is warm again
  ASSERT_EQ(table.Admit(ProducerTable::kMaxProducers + 1, 0, 0, 1).kind, Kind::kAppend);
  EXPECT_EQ(table.producers(), ProducerTable::kMaxProducers);
  EXPECT_EQ(table.Admit(2, 1, 1, 1).kind, Kind::kUnknownProducer);  // the coldest went
  EXPECT_EQ(table.Admit(1, 2, 2, 1).kind, Kind::kAppend);
}

}  // namespace
}  // namespace felix::broker
