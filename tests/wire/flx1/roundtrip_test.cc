// Property tests: randomly generated messages of every type and binary frames of every layout
// survive encode → decode (and the canonical JSON rendering) unchanged. Seeded, so a failure
// reproduces.
#include <deque>
#include <random>

#include <gtest/gtest.h>

#include "wire/flx1/frame.h"
#include "wire/flx1/json_codec.h"
#include "wire/flx1/test_util.h"

namespace felix::wire::flx1 {
namespace {

constexpr int kIterations = 300;

class Gen {
 public:
  explicit Gen(uint64_t seed) : rng_(seed) {}

  uint64_t Below(uint64_t n) { return n == 0 ? 0 : rng_() % n; }
  bool Coin() { return Below(2) == 0; }

  template <class T>
  void operator()(const char*, T& field, unsigned = kPlain) {
    Fill(field);
  }

  std::string Text() {
    static const std::vector<std::string> kPieces = {
        "a",    "t1", "default", "demo", " ",    "\"",       "\\",           "/",
        "\n",   "\t", "\x01",    "\x1f", "\x7f", "\xc3\xa9", "\xe2\x82\xac", "\xf0\x9f\x98\x80",
        "key:", "{",  "}",       ",",    "0"};
    std::string s;
    const auto n = Below(6);
    for (uint64_t i = 0; i < n; ++i) s += kPieces[Below(kPieces.size())];
    return s;
  }
  std::string RawBytes(size_t max) {
    std::string s(Below(max + 1), '\0');
    for (auto& c : s) c = static_cast<char>(Below(256));
    return s;
  }
  uint64_t U64() {
    switch (Below(4)) {
      case 0:
        return 0;
      case 1:
        return UINT64_MAX;
      case 2:
        return Below(1000);
      default:
        return rng_();
    }
  }

  void Fill(std::string& s) { s = Text(); }
  void Fill(flx1::Bytes& b) {
    auto raw = RawBytes(24);
    b.assign(raw.begin(), raw.end());
  }
  void Fill(bool& b) { b = Coin(); }
  void Fill(uint16_t& v) { v = static_cast<uint16_t>(Coin() ? U64() : Below(65536)); }
  void Fill(uint32_t& v) { v = static_cast<uint32_t>(U64()); }
  void Fill(uint64_t& v) { v = U64(); }
  void Fill(int64_t& v) { v = static_cast<int64_t>(U64()); }
  void Fill(AckMode& m) { m = static_cast<AckMode>(Below(3)); }
  void Fill(ShardKind& k) { k = static_cast<ShardKind>(Below(2)); }
  void Fill(ShardRouting& r) { r = static_cast<ShardRouting>(Below(2)); }
  void Fill(CursorErrorReason& r) { r = static_cast<CursorErrorReason>(Below(2)); }
  void Fill(StartPosition& p) {
    p.kind = static_cast<StartPosition::Kind>(Below(3));
    p.offset = p.kind == StartPosition::Kind::kOffset ? U64() : 0;
  }
  void Fill(CacheCondition& c) {
    c.kind = static_cast<CacheCondition::Kind>(Below(2));
    c.version = c.kind == CacheCondition::Kind::kVersion ? U64() : 0;
  }
  void Fill(StateChange& c) {
    c.op = static_cast<StateChange::Op>(Below(2));
    c.key = Text();
    c.value.clear();
    if (c.op == StateChange::Op::kPut) Fill(c.value);
  }
  void Fill(PublishRefusalReason& r) {
    r = PublishRefusalReason{};
    r.kind = static_cast<PublishRefusalReason::Kind>(Below(6));
    if (r.kind == PublishRefusalReason::Kind::kSequenceGap) r.expected = U64();
    if (r.kind == PublishRefusalReason::Kind::kOffsetMismatch) r.tail = U64();
    if (r.kind == PublishRefusalReason::Kind::kNotLeader) {
      r.node_id = Text();
      if (Coin()) r.addr = Text();
    }
  }
  void Fill(JsonValue& j, int depth = 0) {
    j = JsonValue::object();
    const auto n = Below(4);
    for (uint64_t i = 0; i < n; ++i) {
      const std::string key = "k" + std::to_string(i) + Text();
      switch (Below(depth < 3 ? 6 : 4)) {
        case 0:
          j[key] = U64();
          break;
        case 1:
          j[key] = Text();
          break;
        case 2:
          j[key] = Coin();
          break;
        case 3:
          j[key] = -static_cast<int64_t>(Below(1000)) - 1;
          break;
        case 4: {
          JsonValue inner;
          Fill(inner, depth + 1);
          j[key] = JsonValue::array({inner, nullptr, 1});
          break;
        }
        default: {
          JsonValue inner;
          Fill(inner, depth + 1);
          j[key] = inner;
        }
      }
    }
  }
  template <class T>
  void Fill(std::optional<T>& o) {
    if (Coin()) {
      o.reset();
    } else {
      o.emplace();
      Fill(*o);
    }
  }
  template <class T>
  void Fill(std::vector<T>& v) {
    v.clear();
    v.resize(Below(4));
    for (auto& item : v) Fill(item);
  }
  template <class T>
  requires requires(T& t, Gen& g) { T::Fields(t, g); }
  void Fill(T& record) { T::Fields(record, *this); }

  // Owned storage for binary views.
  std::string_view Keep(std::string s) { return store_.emplace_back(std::move(s)); }
  std::string_view KeepText() { return Keep(Text()); }

 private:
  std::mt19937_64 rng_;
  std::deque<std::string> store_;
};

template <class T>
void RoundTripType(uint64_t seed) {
  Gen gen(seed);
  for (int i = 0; i < kIterations; ++i) {
    T m{};
    T::Fields(m, gen);
    const Message message(m);
    auto text = EncodeMessageJson(message);
    ASSERT_TRUE(text) << text.error().ToString();
    auto decoded = DecodeMessageJson(*text);
    ASSERT_TRUE(decoded) << *text << ": " << decoded.error().ToString();
    ASSERT_EQ(*decoded, message) << *text;
    // Encoding is a function of the value: decode → encode reproduces the bytes.
    auto again = EncodeMessageJson(*decoded);
    ASSERT_TRUE(again);
    ASSERT_EQ(*again, *text);

    // Whole frame.
    auto frame = EncodeMessageFrame(message);
    ASSERT_TRUE(frame);
    auto back = DecodeFrame(*frame, kDefaultMaxFrameBytes);
    ASSERT_TRUE(back) << back.error().ToString();
    ASSERT_EQ(*back, Flx1Frame(message));
    auto general = EncodeFrame(Flx1Frame(message));
    ASSERT_TRUE(general);
    ASSERT_EQ(*frame, *general);
    // Appended after what a buffer holds, the same bytes.
    std::string appended = "prefix";
    ASSERT_TRUE(AppendMessageFrame(message, appended));
    ASSERT_EQ(appended.substr(0, 6), "prefix");
    ASSERT_EQ(appended.substr(6), std::string(frame->begin(), frame->end()));

    // Canonical rendering (every field present) reads back to the same message.
    auto canonical = FrameToCanonicalJson(message);
    ASSERT_TRUE(canonical);
    auto from_canonical = FrameFromCanonicalJson(*canonical);
    ASSERT_TRUE(from_canonical) << *canonical << ": " << from_canonical.error().ToString();
    ASSERT_EQ(from_canonical->frame, Flx1Frame(message)) << *canonical;

    // The flat-object reading (json_flat_object.h) and the full parser agree.
    auto fully = DecodeMessageJsonFully(*text);
    ASSERT_TRUE(fully) << *text;
    ASSERT_EQ(*fully, message) << *text;

    // Tolerance: reversed key order plus unknown keys decode to the same message.
    auto parsed = JsonValue::parse(*text);
    JsonValue flat_shuffled = JsonValue::object();
    flat_shuffled["zz_unknown_scalar"] = 1;
    for (auto& [k, v] : parsed.items()) flat_shuffled[k] = v;
    auto flat_tolerant = DecodeMessageJson(flat_shuffled.dump(1));  // whitespace too
    ASSERT_TRUE(flat_tolerant) << flat_shuffled.dump(1);
    ASSERT_EQ(*flat_tolerant, message) << flat_shuffled.dump(1);
    JsonValue shuffled = JsonValue::object();
    shuffled["zz_unknown_field"] = JsonValue::object({{"x", 1}});
    std::vector<std::pair<std::string, JsonValue>> items;
    for (auto& [k, v] : parsed.items()) items.emplace_back(k, v);
    for (auto it = items.rbegin(); it != items.rend(); ++it) shuffled[it->first] = it->second;
    auto tolerant = DecodeMessageJson(shuffled.dump());
    ASSERT_TRUE(tolerant) << shuffled.dump();
    ASSERT_EQ(*tolerant, message) << shuffled.dump();
  }
}

template <size_t... I>
void RoundTripAll(std::index_sequence<I...>) {
  (
      [] {
        using T = std::variant_alternative_t<I, Message>;
        if constexpr (!std::is_same_v<T, UnknownMessage>) {
          SCOPED_TRACE(std::string(T::kType));
          RoundTripType<T>(0xF1E1 + I);
        }
      }(),
      ...);
}

TEST(Flx1RoundTrip, EveryJsonMessageType) {
  RoundTripAll(std::make_index_sequence<std::variant_size_v<Message> - 1>{});
  // Every alternative but UnknownMessage (the last) is a typed message.
  static_assert(
      std::is_same_v<std::variant_alternative_t<std::variant_size_v<Message> - 1, Message>,
                     UnknownMessage>);
}

// A group_records answer sent from views (the broker's path: payloads where the log's read left
// them) is byte for byte the frame of the GroupRecords holding the same records — random
// records with every optional field present or absent and publishers of any text — and one
// whose publisher is not UTF-8 is refused the same way, leaving the buffer as it was.
TEST(Flx1GroupRecordsView, EncodesTheBytesOfTheSameGroupRecords) {
  Gen gen(76);
  for (int i = 0; i < kIterations; ++i) {
    GroupRecords owned;
    gen.Fill(owned);
    std::vector<GroupRecordView> views;
    for (const GroupRecord& r : owned.records) {
      views.push_back(GroupRecordView{
          r.offset, r.payload, r.attempts, r.skipped_before,
          r.publisher ? std::optional<std::string_view>(*r.publisher) : std::nullopt,
          r.timestamp_micros});
    }
    std::string expected = "prefix";
    std::string got = "prefix";
    const bool encoded = AppendMessageFrame(owned, expected).has_value();
    ASSERT_EQ(AppendGroupRecordsFrame(GroupRecordsView{views, owned.request_id}, got).has_value(),
              encoded);
    ASSERT_EQ(got, expected);
  }
  GroupRecords bad;
  bad.records.push_back(GroupRecord{.offset = 1, .publisher = std::string("\xff")});
  const std::string_view bad_publisher = "\xff";
  const GroupRecordView bad_view{.offset = 1, .publisher = bad_publisher};
  std::string buffer = "kept";
  EXPECT_FALSE(AppendMessageFrame(bad, buffer));
  EXPECT_FALSE(AppendGroupRecordsFrame(GroupRecordsView{{&bad_view, 1}, 0}, buffer));
  EXPECT_EQ(buffer, "kept");
}

void ExpectFrameRoundTrip(const Flx1Frame& frame) {
  auto bytes = EncodeFrame(frame);
  ASSERT_TRUE(bytes) << bytes.error().ToString();
  auto back = DecodeFrame(*bytes, kDefaultMaxFrameBytes);
  ASSERT_TRUE(back) << test::ToHex(*bytes) << ": " << back.error().ToString();
  ASSERT_EQ(*back, frame) << test::ToHex(*bytes);
  auto again = EncodeFrame(*back);
  ASSERT_TRUE(again);
  ASSERT_EQ(*again, *bytes);
  auto canonical = FrameToCanonicalJson(frame);
  ASSERT_TRUE(canonical);
  auto from_canonical = FrameFromCanonicalJson(*canonical);
  ASSERT_TRUE(from_canonical) << *canonical << ": " << from_canonical.error().ToString();
  ASSERT_EQ(from_canonical->frame, frame) << *canonical;
}

TEST(Flx1RoundTrip, BinaryPublishBatches) {
  Gen gen(71);
  for (int i = 0; i < kIterations * 3; ++i) {
    BinaryPublishBatch b;
    if (gen.Coin()) {
      b.acked = BinaryPublishBatch::Acked{gen.U64(),
                                          gen.Coin() ? AckMode::kPerMessage : AckMode::kPerBatch};
      if (gen.Coin()) {
        b.acked->ack_mode = AckMode::kPerBatch;
        b.idempotent = BinaryPublishBatch::Idempotent{gen.U64(), gen.U64()};
      }
    }
    if (gen.Coin()) b.key = gen.Keep(gen.RawBytes(8));
    b.tenant_id = gen.KeepText();
    b.namespace_ = gen.KeepText();
    b.stream = gen.KeepText();
    const auto n = gen.Below(5);
    for (uint64_t k = 0; k < n; ++k) b.payloads.push_back(gen.Keep(gen.RawBytes(40)));
    ExpectFrameRoundTrip(b);
  }
}

// AppendToPublishBatchFrame: a plain publish batch frame that later payloads join reads, byte
// for byte, as the one batch of all of them encoded at once; whatever follows it in the buffer
// stays (a frame before it is untouched).
TEST(Flx1PublishBatchJoin, AJoinedFrameIsTheBatchOfAllItsPayloads) {
  Gen gen(29);
  for (int i = 0; i < kIterations; ++i) {
    const std::string tenant = gen.Text(), ns = gen.Text(), stream = gen.Text();
    std::vector<std::vector<std::string>> runs(1 + gen.Below(5));
    BinaryPublishBatch whole;
    whole.tenant_id = tenant;
    whole.namespace_ = ns;
    whole.stream = stream;
    for (auto& run : runs) {
      const auto n = 1 + gen.Below(4);
      for (uint64_t k = 0; k < n; ++k) run.push_back(gen.RawBytes(40));
    }
    for (const auto& run : runs)
      for (const auto& p : run) whole.payloads.push_back(p);
    std::vector<uint8_t> out = {0xAA, 0xBB};  // what came before the frame stays
    BinaryPublishBatch first;
    first.tenant_id = tenant;
    first.namespace_ = ns;
    first.stream = stream;
    for (const auto& p : runs[0]) first.payloads.push_back(p);
    ASSERT_TRUE(AppendFrame(Flx1Frame(first), out));
    for (size_t r = 1; r < runs.size(); ++r) {
      auto joined = AppendToPublishBatchFrame(out, 2, tenant, ns, stream, runs[r]);
      ASSERT_TRUE(joined) << joined.error().message;
      EXPECT_TRUE(*joined);
    }
    std::vector<uint8_t> expected = {0xAA, 0xBB};
    ASSERT_TRUE(AppendFrame(Flx1Frame(whole), expected));
    EXPECT_EQ(out, expected) << "iteration " << i;
  }
}

// OpenPublishBatchFrame once, then AppendToOpenPublishBatch for every later run (how the client
// joins a fire-and-forget run, change 57): the same bytes as the batch encoded at once.
TEST(Flx1PublishBatchJoin, AFrameOpenedOnceTakesEveryLaterRun) {
  Gen gen(31);
  for (int i = 0; i < kIterations; ++i) {
    BinaryPublishBatch whole;
    whole.tenant_id = gen.Keep(gen.Text());
    whole.namespace_ = gen.Keep(gen.Text());
    whole.stream = gen.Keep(gen.Text());
    BinaryPublishBatch first = whole;
    first.payloads.push_back(gen.Keep(gen.RawBytes(40)));
    whole.payloads = first.payloads;
    std::vector<uint8_t> out = {0x01};
    ASSERT_TRUE(AppendFrame(Flx1Frame(first), out));
    auto open = OpenPublishBatchFrame(out, 1, whole.tenant_id, whole.namespace_, whole.stream);
    ASSERT_TRUE(open.has_value());
    EXPECT_FALSE(OpenPublishBatchFrame(out, 1, whole.tenant_id, whole.namespace_, "other"));
    for (uint64_t r = gen.Below(6); r > 0; --r) {
      std::vector<std::string> run;
      for (uint64_t k = 1 + gen.Below(3); k > 0; --k) run.push_back(gen.RawBytes(40));
      ASSERT_TRUE(AppendToOpenPublishBatch(out, *open, run));
      for (const auto& p : run) whole.payloads.push_back(gen.Keep(p));
    }
    EXPECT_EQ(open->count, whole.payloads.size());
    std::vector<uint8_t> expected = {0x01};
    ASSERT_TRUE(AppendFrame(Flx1Frame(whole), expected));
    EXPECT_EQ(out, expected) << "iteration " << i;
  }
}

// Anything but a plain publish batch frame for those names, ending the buffer, is left alone:
// another tenant, namespace or stream; an acked, idempotent or keyed batch; a JSON frame; a
// frame with bytes after it; an offset that is not a frame's start.
TEST(Flx1PublishBatchJoin, OnlyAPlainFrameForTheSameStreamAtTheEndIsJoined) {
  const std::vector<std::string> more = {"more"};
  auto plain = [] {
    BinaryPublishBatch b;
    b.tenant_id = "t";
    b.namespace_ = "ns";
    b.stream = "s";
    b.payloads = {"p"};
    return b;
  };
  auto refused = [&](const Flx1Frame& frame, size_t start, std::string_view tenant,
                     std::string_view ns, std::string_view stream, bool trailing = false) {
    std::vector<uint8_t> out;
    EXPECT_TRUE(AppendFrame(frame, out));
    if (trailing) out.push_back(0);
    const auto before = out;
    auto joined = AppendToPublishBatchFrame(out, start, tenant, ns, stream, more);
    EXPECT_TRUE(joined);
    EXPECT_FALSE(joined && *joined);
    EXPECT_EQ(out, before);
  };
  refused(Flx1Frame(plain()), 0, "other", "ns", "s");
  refused(Flx1Frame(plain()), 0, "t", "other", "s");
  refused(Flx1Frame(plain()), 0, "t", "ns", "other");
  refused(Flx1Frame(plain()), 0, "t", "ns", "s", /*trailing=*/true);
  refused(Flx1Frame(plain()), 1, "t", "ns", "s");
  refused(Flx1Frame(plain()), 1000, "t", "ns", "s");
  auto acked = plain();
  acked.acked = BinaryPublishBatch::Acked{7, AckMode::kPerBatch};
  refused(Flx1Frame(acked), 0, "t", "ns", "s");
  auto keyed = plain();
  keyed.key = "k";
  refused(Flx1Frame(keyed), 0, "t", "ns", "s");
  Ok ok;
  refused(Flx1Frame(Message(ok)), 0, "t", "ns", "s");
  // The same frame is joined once nothing follows it.
  std::vector<uint8_t> out;
  ASSERT_TRUE(AppendFrame(Flx1Frame(plain()), out));
  auto joined = AppendToPublishBatchFrame(out, 0, "t", "ns", "s", more);
  ASSERT_TRUE(joined);
  EXPECT_TRUE(*joined);
}

TEST(Flx1RoundTrip, BinaryPublishAcks) {
  Gen gen(72);
  for (int i = 0; i < kIterations * 3; ++i) {
    BinaryPublishAck a;
    a.status = gen.Coin() ? BinaryPublishAck::Status::kOk : BinaryPublishAck::Status::kError;
    a.request_id = gen.U64();
    a.message = gen.KeepText();
    if (gen.Coin()) {
      a.code = BinaryPublishAck::Code{static_cast<uint16_t>(gen.Below(20)),
                                      static_cast<uint8_t>(gen.Below(8))};
      if (gen.Coin()) a.detail = BinaryPublishAck::Detail{gen.KeepText(), gen.U64()};
    }
    if (gen.Coin()) {
      BinaryPublishAck::Owner o;
      o.node_id = gen.KeepText();
      if (gen.Coin()) o.addr = gen.Keep("h" + gen.Text() + ":5000");
      o.generation = gen.U64();
      a.owner = o;
    }
    if (a.status == BinaryPublishAck::Status::kOk && gen.Coin()) a.offset = gen.U64();
    ExpectFrameRoundTrip(a);
  }
}

TEST(Flx1RoundTrip, BinaryEventBatches) {
  Gen gen(73);
  for (int i = 0; i < kIterations * 3; ++i) {
    BinaryEventBatch b;
    if (gen.Coin()) b.subscription_id = gen.U64();
    if (gen.Coin()) {
      b.base_offset = gen.U64();
      if (gen.Coin()) b.skipped_before = gen.U64();
    }
    if (gen.Coin()) b.publisher = gen.KeepText();
    b.has_timestamps = gen.Coin();
    const auto n = gen.Below(5);
    for (uint64_t k = 0; k < n; ++k) {
      b.events.push_back({b.has_timestamps ? gen.U64() : 0, gen.Keep(gen.RawBytes(30))});
    }
    ExpectFrameRoundTrip(b);
  }
}

TEST(Flx1RoundTrip, FlagsAreDerivedFromContent) {
  BinaryEventBatch b;
  b.base_offset = 1;
  b.skipped_before = 0;  // present-but-zero still sets the bit: encoding mirrors the value
  b.publisher = "p";
  b.has_timestamps = true;
  EXPECT_EQ(FrameFlags(b), kFlagBinaryEventBatchShared | kFlagEventBatchOffsets |
                               kFlagEventBatchSkipped | kFlagEventBatchPublisher |
                               kFlagEventBatchTimestamps);
  BinaryPublishAck a;
  a.status = BinaryPublishAck::Status::kError;
  a.code = BinaryPublishAck::Code{3, 2};
  a.detail = BinaryPublishAck::Detail{"", 0};
  a.owner = BinaryPublishAck::Owner{"n", std::nullopt, 1};
  EXPECT_EQ(FrameFlags(a), kFlagBinaryPublishAck | kFlagBinaryPublishAckCode |
                               kFlagBinaryPublishAckDetail | kFlagBinaryPublishAckOwner);
}

}  // namespace
}  // namespace felix::wire::flx1
