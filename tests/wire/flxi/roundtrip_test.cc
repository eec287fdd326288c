// Properties over generated frames of every kind: the correlation-id-first invariant,
// encode/decode round trips, truncation at every byte and trailing bytes.
#include <gtest/gtest.h>

#include "generator.h"
#include "wire/flxi/flxi.h"

namespace felix::wire::flxi {
namespace {

using testing::AllKinds;
using testing::FrameGenerator;

constexpr int kIterationsPerKind = 400;

uint64_t BigEndian64(const std::vector<uint8_t>& b, size_t at) {
  uint64_t v = 0;
  for (size_t i = 0; i < 8; ++i) v = (v << 8) | b.at(at + i);
  return v;
}

void PatchLength(std::vector<uint8_t>& frame) {
  auto len = static_cast<uint32_t>(frame.size() - kHeaderBytes);
  for (int i = 0; i < 4; ++i) frame[8 + i] = static_cast<uint8_t>(len >> (24 - 8 * i));
}

// The wire-freezing discriminants; renumbering is forbidden.
TEST(FlxiKinds, DiscriminantsArePinned) {
  const std::pair<Kind, uint16_t> pins[] = {
      {Kind::kForwardPublish, 1},
      {Kind::kForwardPublishOk, 2},
      {Kind::kForwardPublishError, 3},
      {Kind::kNotLeader, 4},
      {Kind::kHello, 5},
      {Kind::kHelloOk, 6},
      {Kind::kReplicateRecords, 7},
      {Kind::kReplicateOk, 8},
      {Kind::kReplicateError, 9},
      {Kind::kReplicateBootstrap, 10},
      {Kind::kForwardCacheOp, 11},
      {Kind::kForwardCacheOk, 12},
      {Kind::kForwardCacheError, 13},
      {Kind::kReplicateCacheRecords, 14},
      {Kind::kReplicateCacheBootstrap, 15},
      {Kind::kReplicateGroupRecords, 16},
      {Kind::kReplicateGroupBootstrap, 17},
      {Kind::kReplicateDeadLetterRecords, 18},
      {Kind::kReplicateDeadLetterBootstrap, 19},
      {Kind::kReplicateCounterRecords, 20},
      {Kind::kReplicateCounterBootstrap, 21},
      {Kind::kAuthorizedForwardPublish, 22},
      {Kind::kAuthorizedForwardCacheOp, 23},
      {Kind::kReplicateRebuild, 24},
      {Kind::kReplicateMarkedRecords, 25},
      {Kind::kReplicateCommittedRecords, 26},
      {Kind::kHelloCapable, 27},
      {Kind::kHelloCapableOk, 28},
      {Kind::kFence, 29},
      {Kind::kFenceOk, 30},
      {Kind::kReplicateFetch, 31},
      {Kind::kReplicateLabelledRecords, 32},
      {Kind::kReplicateLabelledFetch, 33},
      {Kind::kConditionalForwardCacheOp, 34},
      {Kind::kConditionalForwardCacheOk, 35},
      {Kind::kReplicateTimedRecords, 36},
      {Kind::kReplicateTimedFetch, 37},
      {Kind::kPing, 38},
      {Kind::kPong, 39},
  };
  for (auto [kind, value] : pins) {
    EXPECT_EQ(static_cast<uint16_t>(kind), value);
    EXPECT_EQ(KindFromName(KindName(kind)), kind) << value;
  }
  EXPECT_EQ(std::size(pins), size_t{kMaxKnownKind});
  EXPECT_FALSE(IsKnownKind(0));
  EXPECT_FALSE(IsKnownKind(40));
}

TEST(FlxiKinds, EnumerationValuesArePinned) {
  EXPECT_EQ(static_cast<uint16_t>(ErrorCode::kStaleRoute), 1);
  EXPECT_EQ(static_cast<uint16_t>(ErrorCode::kMalformed), 6);
  EXPECT_EQ(static_cast<uint16_t>(ErrorCode::kUnsupportedKind), 11);
  for (uint16_t c = 1; c <= 11; ++c) {
    auto code = static_cast<ErrorCode>(c);
    EXPECT_EQ(ErrorCodeFromName(ErrorCodeName(code)), code);
    EXPECT_EQ(IsRetryable(code), c == 1 || c == 2 || c == 4 || c == 8) << c;
  }
  EXPECT_EQ(static_cast<uint8_t>(AckMode::kOnCommit), 2);
  EXPECT_EQ(static_cast<uint8_t>(CacheOpKind::kCounterAdd), 4);
  EXPECT_EQ(static_cast<uint8_t>(CacheOpKind::kCounterGet), 5);
  EXPECT_EQ(static_cast<uint8_t>(ReplicaLog::kStream), 1);
  EXPECT_EQ(static_cast<uint8_t>(ReplicaLog::kGroupCursors), 3);
  EXPECT_EQ(static_cast<uint8_t>(ReplicaLog::kGroupDeadLetters), 4);
  EXPECT_EQ(static_cast<uint8_t>(ReplicaLog::kCounters), 5);
  EXPECT_EQ(static_cast<uint8_t>(MarkType::kAtomicCommit), 4);
  EXPECT_EQ(static_cast<uint8_t>(CacheCondition::kVersion), 2);
  EXPECT_EQ(kCapPing, 0x80u);
}

// every_body_begins_with_its_correlation_id, for every kind.
TEST(FlxiInvariant, EveryBodyBeginsWithItsCorrelationId) {
  FrameGenerator gen(1);
  for (Kind kind : AllKinds()) {
    for (uint64_t corr : {uint64_t{0x0102030405060708}, uint64_t{42}, uint64_t{UINT64_MAX}}) {
      Frame f = gen.Make(kind);
      std::visit([corr](auto& m) { m.correlation_id = corr; }, f.body);
      auto bytes = EncodeFrame(f);
      ASSERT_TRUE(bytes) << KindName(kind) << ": " << bytes.error().message;
      ASSERT_GE(bytes->size(), 20u);
      EXPECT_EQ(BigEndian64(*bytes, 12), corr) << KindName(kind);
      EXPECT_EQ(CorrelationIdOfBody(std::span(*bytes).subspan(kHeaderBytes)), corr);
      EXPECT_EQ(CorrelationId(f), corr);
    }
  }
}

TEST(FlxiRoundTrip, GeneratedFramesOfEveryKind) {
  FrameGenerator gen(0xF1E1);
  for (Kind kind : AllKinds()) {
    for (int i = 0; i < kIterationsPerKind; ++i) {
      Frame f = gen.Make(kind);
      auto bytes = EncodeFrame(f);
      ASSERT_TRUE(bytes) << KindName(kind) << " #" << i << ": " << bytes.error().message;
      auto env = DecodeEnvelope(*bytes);
      ASSERT_TRUE(env);
      EXPECT_EQ(env->kind, static_cast<uint16_t>(kind));
      EXPECT_EQ(env->length, bytes->size() - kHeaderBytes);
      auto back = DecodeFrame(*bytes);
      ASSERT_TRUE(back) << KindName(kind) << " #" << i << ": " << back.error().ToString();
      EXPECT_EQ(*back, f) << KindName(kind) << " #" << i;
      auto again = EncodeFrame(*back);
      ASSERT_TRUE(again);
      EXPECT_EQ(*again, *bytes) << KindName(kind) << " #" << i;
    }
  }
}

// Every strict prefix of a body fails, both with the header's original length (the frame is
// short) and with the length patched to the prefix (the body is short of its fields).
TEST(FlxiStrict, TruncationAtEveryByteIsRefused) {
  FrameGenerator gen(7, /*large=*/false);
  for (Kind kind : AllKinds()) {
    for (int i = 0; i < 8; ++i) {
      auto bytes = EncodeFrame(gen.Make(kind));
      ASSERT_TRUE(bytes);
      for (size_t cut = 0; cut < bytes->size(); ++cut) {
        std::vector<uint8_t> prefix(bytes->begin(), bytes->begin() + cut);
        auto r = DecodeFrame(prefix);
        ASSERT_FALSE(r) << KindName(kind) << " cut " << cut;
        EXPECT_EQ(r.error().code, DecodeErrorCode::kIncomplete) << KindName(kind) << " " << cut;
        if (cut < kHeaderBytes) continue;
        PatchLength(prefix);
        auto patched = DecodeFrame(prefix);
        ASSERT_FALSE(patched) << KindName(kind) << " patched cut " << cut;
      }
    }
  }
}

TEST(FlxiStrict, TrailingBytesAreRefused) {
  FrameGenerator gen(8);
  for (Kind kind : AllKinds()) {
    for (int i = 0; i < 20; ++i) {
      auto bytes = EncodeFrame(gen.Make(kind));
      ASSERT_TRUE(bytes);
      // Beyond the declared length: the frame has more bytes than its header says.
      auto longer = *bytes;
      longer.push_back(0);
      auto r = DecodeFrame(longer);
      ASSERT_FALSE(r);
      EXPECT_EQ(r.error().code, DecodeErrorCode::kTrailingBytes);
      // Inside the declared length: the body has bytes after its last field.
      PatchLength(longer);
      r = DecodeFrame(longer);
      ASSERT_FALSE(r) << KindName(kind);
      EXPECT_EQ(r.error().code, DecodeErrorCode::kTrailingBytes) << KindName(kind);
      // DecodeBody applies the same rule to a body read off a stream.
      auto body = std::span(longer).subspan(kHeaderBytes);
      EXPECT_FALSE(DecodeBody(kind, body));
    }
  }
}

}  // namespace
}  // namespace felix::wire::flxi
