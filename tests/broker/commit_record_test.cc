// CommitRecord (storage.md §3.4) against the spec's computed example, refusals of bad bodies,
// and the state view projected from commits.
#include "broker/commit_record.h"

#include <gtest/gtest.h>

#include "broker/shard_state.h"

namespace felix::broker {
namespace {

std::vector<uint8_t> Hex(std::string_view hex) {
  std::vector<uint8_t> out;
  for (size_t i = 0; i + 1 < hex.size();) {
    if (hex[i] == ' ') {
      ++i;
      continue;
    }
    out.push_back(static_cast<uint8_t>(std::stoi(std::string(hex.substr(i, 2)), nullptr, 16)));
    i += 2;
  }
  return out;
}

std::vector<uint8_t> B(std::string_view s) {
  return {s.begin(), s.end()};
}

// storage.md §3.3: event "E", ops [put k=v, delete d] is this 27-byte body.
TEST(CommitRecord, EncodesTheSpecExampleByteForByte) {
  CommitRecord record{
      B("E"),
      {CommitOp{CommitOp::Kind::kPut, "k", B("v")}, CommitOp{CommitOp::Kind::kDelete, "d", {}}}};
  auto body = EncodeCommitRecord(record);
  EXPECT_EQ(body, Hex("01 00000001 45 00000002 00 00000001 6B 00000001 76 01 00000001 64"));
  EXPECT_EQ(body.size(), 27u);
  auto decoded = DecodeCommitRecord(body);
  ASSERT_TRUE(decoded);
  EXPECT_EQ(*decoded, record);
  auto event = CommitEventBytes(body);
  ASSERT_TRUE(event);
  EXPECT_EQ(std::vector<uint8_t>(event->begin(), event->end()), B("E"));
}

TEST(CommitRecord, RefusesEveryMalformedBodyWithATypedError) {
  auto good = Hex("01 00000001 45 00000002 00 00000001 6B 00000001 76 01 00000001 64");
  for (size_t cut = 0; cut < good.size(); ++cut) {
    auto r = DecodeCommitRecord(std::span(good).first(cut));
    ASSERT_FALSE(r) << cut;
    EXPECT_EQ(r.error(), CommitRecordError::kTruncated) << cut;
  }
  auto version = good;
  version[0] = 2;
  EXPECT_EQ(DecodeCommitRecord(version).error(), CommitRecordError::kVersion);
  auto kind = good;
  kind[10] = 7;
  EXPECT_EQ(DecodeCommitRecord(kind).error(), CommitRecordError::kOpKind);
  auto trailing = good;
  trailing.push_back(0);
  EXPECT_EQ(DecodeCommitRecord(trailing).error(), CommitRecordError::kTrailing);
  // A huge op count is refused before anything is reserved.
  auto count = Hex("01 00000000 FFFFFFFF 00");
  EXPECT_EQ(DecodeCommitRecord(count).error(), CommitRecordError::kTruncated);
  auto event_len = Hex("01 7FFFFFFF 00");
  EXPECT_EQ(CommitEventBytes(event_len).error(), CommitRecordError::kTruncated);
}

TEST(ShardState, KeysCarryTheVersionOfTheCommitThatWroteThem) {
  ShardState state;
  EXPECT_EQ(state.Get("k").as_of, std::nullopt);
  state.Apply(Offset(3), {CommitOp{CommitOp::Kind::kPut, "k", B("a")},
                          CommitOp{CommitOp::Kind::kPut, "j", B("")}});
  state.Apply(Offset(7), {CommitOp{CommitOp::Kind::kDelete, "j", {}}});
  auto k = state.Get("k");
  EXPECT_EQ(k.value, B("a"));
  EXPECT_EQ(k.version, Offset(3));
  EXPECT_EQ(k.as_of, Offset(7));
  auto j = state.Get("j");
  EXPECT_EQ(j.value, std::nullopt);
  EXPECT_EQ(j.version, std::nullopt);
  EXPECT_EQ(j.as_of, Offset(7));
}

}  // namespace
}  // namespace felix::broker
