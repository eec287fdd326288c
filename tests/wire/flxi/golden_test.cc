// internal-protocol-bodies.md §11: every worked frame decodes to the fields the spec states
// and re-encodes to identical bytes.
#include <gtest/gtest.h>

#include "generator.h"
#include "golden_frames.h"
#include "wire/flxi/flxi.h"

namespace felix::wire::flxi {
namespace {

using testing::FromHex;
using testing::kGoldenFrames;

const ShardRef kShard{"t1", "ns", "orders", 3, 7};

// Decodes golden frame number `index` (spec order); `storage` keeps the bytes the frame views.
Frame Golden(size_t index, std::vector<uint8_t>& storage) {
  storage = FromHex(kGoldenFrames[index].hex);
  auto f = DecodeFrame(storage);
  EXPECT_TRUE(f) << kGoldenFrames[index].title << ": " << f.error().ToString();
  return f ? *f : Frame{};
}

size_t IndexOf(uint16_t kind, std::string_view title_part) {
  for (size_t i = 0; i < std::size(kGoldenFrames); ++i) {
    if (kGoldenFrames[i].kind == kind &&
        std::string_view(kGoldenFrames[i].title).find(title_part) != std::string_view::npos) {
      return i;
    }
  }
  ADD_FAILURE() << "no golden frame for kind " << kind << " " << title_part;
  return 0;
}

template <typename T>
T Body(uint16_t kind, std::string_view title_part, std::vector<uint8_t>& storage) {
  Frame f = Golden(IndexOf(kind, title_part), storage);
  EXPECT_EQ(static_cast<uint16_t>(f.kind), kind);
  const T* body = std::get_if<T>(&f.body);
  EXPECT_NE(body, nullptr) << "kind " << kind;
  return body ? *body : T{};
}

TEST(FlxiGolden, EveryFrameDecodesAndReencodesIdentically) {
  for (const auto& g : kGoldenFrames) {
    auto bytes = FromHex(g.hex);
    auto f = DecodeFrame(bytes);
    ASSERT_TRUE(f) << g.title << ": " << f.error().ToString();
    EXPECT_EQ(static_cast<uint16_t>(f->kind), g.kind) << g.title;
    auto again = EncodeFrame(*f);
    ASSERT_TRUE(again) << g.title << ": " << again.error().message;
    EXPECT_EQ(*again, bytes) << g.title;
    uint64_t want_corr = g.kind == 4 ? 1 : (g.kind == 38 || g.kind == 39) ? 9 : 42;
    EXPECT_EQ(CorrelationId(*f), want_corr) << g.title;
  }
}

TEST(FlxiGolden, CoversEveryKind) {
  std::vector<bool> seen(kMaxKnownKind + 1, false);
  for (const auto& g : kGoldenFrames) seen.at(g.kind) = true;
  for (uint16_t k = 1; k <= kMaxKnownKind; ++k) EXPECT_TRUE(seen[k]) << "kind " << k;
}

TEST(FlxiGolden, Kind1ForwardPublish) {
  std::vector<uint8_t> s;
  auto m = Body<ForwardPublish>(1, "ForwardPublish", s);
  EXPECT_EQ(m.correlation_id, 42u);
  EXPECT_EQ(m.shard, kShard);
  EXPECT_EQ(m.ack, AckMode::kOnCommit);
  EXPECT_EQ(m.payloads, (std::vector<Bytes>{"a", "bb"}));
  EXPECT_FALSE(m.credential);
  // Zero copy: the payload views point into the input.
  EXPECT_GE(reinterpret_cast<const uint8_t*>(m.payloads[0].data()), s.data());
  EXPECT_LT(reinterpret_cast<const uint8_t*>(m.payloads[0].data()), s.data() + s.size());
}

TEST(FlxiGolden, Kind2ForwardPublishOk) {
  std::vector<uint8_t> s;
  auto m = Body<ForwardPublishOk>(2, "100..=101", s);
  EXPECT_EQ(m.first_offset, 100u);
  EXPECT_EQ(m.last_offset, 101u);
  m = Body<ForwardPublishOk>(2, "no-log", s);
  EXPECT_EQ(m.first_offset, 1u);
  EXPECT_EQ(m.last_offset, 0u);
}

TEST(FlxiGolden, Kind3ForwardPublishError) {
  std::vector<uint8_t> s;
  auto m = Body<ErrorAnswer>(3, "StaleRoute", s);
  EXPECT_EQ(m.code, ErrorCode::kStaleRoute);
  EXPECT_EQ(m.detail, "stale");
  m = Body<ErrorAnswer>(3, "UnsupportedKind", s);
  EXPECT_EQ(m.code, ErrorCode::kUnsupportedKind);
  EXPECT_EQ(m.detail, "this broker does not know frame kind 40");
}

TEST(FlxiGolden, Kind4NotLeader) {
  std::vector<uint8_t> s;
  auto m = Body<NotLeader>(4, "NotLeader", s);
  EXPECT_EQ(m.correlation_id, 1u);
  EXPECT_EQ(m.node_id, "b");
  EXPECT_EQ(m.advertise_addr, "h:1");
  EXPECT_EQ(m.generation, 2u);
}

TEST(FlxiGolden, Kinds5And6Handshake) {
  std::vector<uint8_t> s;
  auto m = Body<Hello>(5, "Hello", s);
  EXPECT_EQ(m.node_id, "broker-a");
  EXPECT_FALSE(m.capabilities);
  m = Body<Hello>(6, "HelloOk", s);
  EXPECT_EQ(m.node_id, "broker-b");
  EXPECT_FALSE(m.capabilities);
}

TEST(FlxiGolden, Kind7ReplicateRecords) {
  std::vector<uint8_t> s;
  auto m = Body<Records>(7, "fake checksum", s);
  EXPECT_EQ(m.shard, kShard);
  EXPECT_EQ(m.first_offset, 100u);
  EXPECT_EQ(m.checksum, 0x01020304u);  // the codec never judges the checksum
  EXPECT_EQ(m.payloads, (std::vector<Bytes>{"a", "bb"}));
  EXPECT_TRUE(m.marks.empty());
  EXPECT_FALSE(m.log);
  m = Body<Records>(7, "real checksum", s);
  EXPECT_EQ(m.checksum, 0x7D1F2B1Cu);
  EXPECT_EQ(m.checksum, BatchChecksum(m.payloads, m.marks));
}

TEST(FlxiGolden, Kinds8And9ReplicateAnswers) {
  std::vector<uint8_t> s;
  EXPECT_EQ(Body<ReplicateOk>(8, "ReplicateOk", s).durable_offset, 102u);
  auto e = Body<ReplicateError>(9, "LogGap", s);
  EXPECT_EQ(e.code, ErrorCode::kLogGap);
  EXPECT_EQ(e.expected_offset, 100u);
  EXPECT_EQ(e.detail, "gap");
}

TEST(FlxiGolden, BootstrapFamily) {
  for (uint16_t kind : {10, 15, 17, 19, 21}) {
    std::vector<uint8_t> s;
    auto m = Body<Bootstrap>(kind, "Bootstrap", s);
    EXPECT_EQ(m.shard, kShard) << kind;
    EXPECT_EQ(m.base_offset, 5000u) << kind;
  }
}

TEST(FlxiGolden, Kind11ForwardCacheOpLegacy) {
  std::vector<uint8_t> s;
  auto m = Body<CacheOp>(11, "ForwardCacheOp", s);
  EXPECT_EQ(m.shard, kShard);
  EXPECT_EQ(m.op, CacheOpKind::kPut);
  EXPECT_EQ(m.key, "k");
  EXPECT_EQ(m.ttl_ms, 30000u);
  EXPECT_EQ(m.value, "v");
  EXPECT_FALSE(m.credential);
  EXPECT_FALSE(m.condition);
}

TEST(FlxiGolden, Kind12ForwardCacheOkDistinguishesMissFromEmpty) {
  std::vector<uint8_t> s;
  EXPECT_EQ(Body<ForwardCacheOk>(12, "value 'v'", s).value, std::optional<Bytes>("v"));
  EXPECT_EQ(Body<ForwardCacheOk>(12, "miss", s).value, std::nullopt);
  EXPECT_EQ(Body<ForwardCacheOk>(12, "empty value", s).value, std::optional<Bytes>(""));
}

TEST(FlxiGolden, Kind13ForwardCacheError) {
  std::vector<uint8_t> s;
  auto m = Body<ErrorAnswer>(13, "Unavailable", s);
  EXPECT_EQ(m.code, ErrorCode::kUnavailable);
  EXPECT_EQ(m.detail, "no");
}

TEST(FlxiGolden, PlainRecordsFamilyCarriesOnePayload) {
  for (uint16_t kind : {14, 16, 18, 20}) {
    std::vector<uint8_t> s;
    auto m = Body<Records>(kind, "['a']", s);
    EXPECT_EQ(m.payloads, (std::vector<Bytes>{"a"})) << kind;
    EXPECT_EQ(m.checksum, 0xE58C9792u) << kind;
    EXPECT_EQ(m.checksum, BatchChecksum(m.payloads, m.marks)) << kind;
    EXPECT_EQ(m.first_offset, 100u);
  }
}

TEST(FlxiGolden, Kind22AuthorizedForwardPublish) {
  std::vector<uint8_t> s;
  auto m = Body<ForwardPublish>(22, "AuthorizedForwardPublish", s);
  EXPECT_EQ(m.payloads, (std::vector<Bytes>{"a", "bb"}));
  EXPECT_EQ(m.credential, std::optional<std::string_view>("tok"));
}

TEST(FlxiGolden, Kind23AuthorizedForwardCacheOp) {
  std::vector<uint8_t> s;
  auto m = Body<CacheOp>(23, "AuthorizedForwardCacheOp", s);
  EXPECT_EQ(m.op, CacheOpKind::kGet);
  EXPECT_EQ(m.key, "k");
  EXPECT_EQ(m.ttl_ms, 0u);
  EXPECT_EQ(m.value, "");
  EXPECT_EQ(m.credential, std::optional<std::string_view>("tok"));
  EXPECT_FALSE(m.condition);
}

TEST(FlxiGolden, Kind24ReplicateRebuild) {
  std::vector<uint8_t> s;
  auto m = Body<Rebuild>(24, "Rebuild", s);
  EXPECT_EQ(m.log, ReplicaLog::kCounters);
  EXPECT_EQ(m.base_offset, 5000u);
}

TEST(FlxiGolden, Kind25MarkedRecords) {
  std::vector<uint8_t> s;
  auto m = Body<Records>(25, "Opens(7,1,2)", s);
  EXPECT_EQ(m.first_offset, 10u);
  EXPECT_EQ(m.payloads, (std::vector<Bytes>{"x", "y"}));
  ASSERT_EQ(m.marks.size(), 2u);
  EXPECT_EQ(m.marks[0], (RecordMark{MarkType::kOpens, 7, 1, 2, std::nullopt}));
  EXPECT_EQ(m.marks[1], (RecordMark{MarkType::kContinues, 0, 0, 0, std::nullopt}));
  EXPECT_EQ(m.checksum, 0x4E0E106Bu);
  EXPECT_EQ(m.checksum, BatchChecksum(m.payloads, m.marks));

  m = Body<Records>(25, "publishers", s);
  ASSERT_EQ(m.marks.size(), 2u);
  EXPECT_EQ(m.marks[0].type, MarkType::kNone);
  EXPECT_EQ(m.marks[0].publisher, std::optional<std::string_view>("alice"));
  EXPECT_EQ(m.marks[1].publisher, std::nullopt);
  EXPECT_EQ(m.checksum, 0xD839063Au);
  EXPECT_EQ(m.checksum, BatchChecksum(m.payloads, m.marks));
}

TEST(FlxiGolden, Kind26CommittedRecords) {
  std::vector<uint8_t> s;
  auto m = Body<Records>(26, "CommittedRecords", s);
  EXPECT_EQ(m.payloads, (std::vector<Bytes>{"x"}));
  ASSERT_EQ(m.marks.size(), 1u);
  EXPECT_FALSE(HasAnyMark(m.marks));
  EXPECT_EQ(m.log, ReplicaLog::kStream);
  EXPECT_EQ(m.commit_offset, std::optional<uint64_t>(8));
  EXPECT_EQ(m.checksum, 0x81E73F52u);
  EXPECT_EQ(m.checksum, BatchChecksum(m.payloads, m.marks));  // all-none marks not hashed
}

TEST(FlxiGolden, Kinds27And28CapableHandshake) {
  std::vector<uint8_t> s;
  auto m = Body<Hello>(27, "HelloCapable", s);
  EXPECT_EQ(m.node_id, "broker-a");
  EXPECT_EQ(m.capabilities, std::optional<uint64_t>(0xFF));
  m = Body<Hello>(28, "HelloCapableOk", s);
  EXPECT_EQ(m.node_id, "broker-b");
  EXPECT_EQ(m.capabilities, std::optional<uint64_t>(0xFF));
}

TEST(FlxiGolden, Kinds29And30Fence) {
  std::vector<uint8_t> s;
  auto f = Body<Fence>(29, "Fence", s);
  EXPECT_EQ(f.shard, kShard);
  EXPECT_EQ(f.log, ReplicaLog::kStream);
  auto ok = Body<FenceOk>(30, "FenceOk", s);
  EXPECT_EQ(ok.log_end, 120u);
  EXPECT_EQ(ok.commit_offset, 100u);
  EXPECT_EQ(ok.last_generation, 6u);
}

TEST(FlxiGolden, FetchFamily) {
  for (uint16_t kind : {31, 33, 37}) {
    std::vector<uint8_t> s;
    auto m = Body<Fetch>(kind, "Fetch", s);
    EXPECT_EQ(m.shard, kShard);
    EXPECT_EQ(m.log, ReplicaLog::kStream);
    EXPECT_EQ(m.from_offset, 100u);
    EXPECT_EQ(m.max_bytes, 1u << 20);
  }
}

TEST(FlxiGolden, Kinds32And36LabelledAndTimedRecords) {
  std::vector<uint8_t> s;
  auto m = Body<Records>(32, "LabelledRecords", s);
  EXPECT_EQ(m.log, ReplicaLog::kStream);
  EXPECT_EQ(m.commit_offset, std::optional<uint64_t>(8));
  EXPECT_EQ(m.generations, (std::vector<GenerationStart>{{3, 4}}));
  EXPECT_TRUE(m.times.empty());
  m = Body<Records>(36, "TimedRecords", s);
  EXPECT_EQ(m.generations, (std::vector<GenerationStart>{{3, 4}}));
  EXPECT_EQ(m.times, (std::vector<uint64_t>{1700000000000001ull}));
}

TEST(FlxiGolden, Kind34ConditionalForwardCacheOp) {
  std::vector<uint8_t> s;
  auto m = Body<CacheOp>(34, "Conditional", s);
  EXPECT_EQ(m.op, CacheOpKind::kPut);
  EXPECT_EQ(m.key, "k");
  EXPECT_EQ(m.value, "v");
  EXPECT_EQ(m.credential, std::optional<std::string_view>(""));
  EXPECT_EQ(m.condition, (std::optional<Condition>(Condition{CacheCondition::kVersion, 7})));
}

TEST(FlxiGolden, Kind35ConditionalForwardCacheOk) {
  std::vector<uint8_t> s;
  auto m = Body<ConditionalCacheOk>(35, "Conditional", s);
  EXPECT_TRUE(m.applied);
  EXPECT_EQ(m.version, std::optional<uint64_t>(9));
  EXPECT_EQ(m.value, std::optional<Bytes>("v"));
}

TEST(FlxiGolden, Kinds38And39PingPong) {
  std::vector<uint8_t> s;
  EXPECT_EQ(Body<PingPong>(38, "Ping", s).correlation_id, 9u);
  EXPECT_EQ(Body<PingPong>(39, "Pong", s).correlation_id, 9u);
}

}  // namespace
}  // namespace felix::wire::flxi
