// What the FLX1 codec refuses, and with which typed error: unknown and impossible flags, frame
// size limits, truncation at every byte, counts beyond the bytes, trailing bytes, invalid
// UTF-8, bad base64, wrong JSON types and ranges. Also what it tolerates (§4).
#include <gtest/gtest.h>

#include "wire/byte_writer.h"
#include "wire/flx1/frame.h"
#include "wire/flx1/json_codec.h"
#include "wire/flx1/test_util.h"

namespace felix::wire::flx1 {
namespace {

using test::FromHex;

// A few vectors from §11 covering every layout.
const std::vector<std::string> kVectors = {
    "464c5831000100000000001f7b2274797065223a226572726f72222c226d657373616765223a226f6f7073227d",
    "464c5831000100090000002900000000000000070200027431000764656661756c74000464656d6f000000010000"
    "000568656c6c6f",
    "464c583100010109000000390000000000000007021122334455667788000000000000000000027431000764656"
    "661756c74000464656d6f000000010000000568656c6c6f",
    "464c5831000100490000002d00000000000000070200026b3700027431000764656661756c74000464656d6f0000"
    "00010000000568656c6c6f",
    "464c5831000106100000002401000000000000000900066d6f76696e6700050100066d6f76696e670000000000"
    "0000fa",
    "464c583100011090000000340000000000000000070000000862726f6b65722d62000d31302e302e302e353a3530"
    "30300000000000000007000000000000002a",
    "464c58310001282400000022000000000000002a000000000000000106703a64656d6f00000001000000036f6e65",
    "464c583100014004000000130000000100060a24181e4000000000036f6e65",
    "464c5831000100020000001a000000000000000700000002000000036f6e650000000374776f",
};

std::vector<uint8_t> Header(uint16_t flags, uint32_t length) {
  std::vector<uint8_t> out;
  ByteWriter w(out);
  w.WriteU32(kMagic);
  w.WriteU16(kVersion);
  w.WriteU16(flags);
  w.WriteU32(length);
  return out;
}

std::vector<uint8_t> Frame(uint16_t flags, const std::vector<uint8_t>& payload) {
  auto out = Header(flags, static_cast<uint32_t>(payload.size()));
  out.insert(out.end(), payload.begin(), payload.end());
  return out;
}

std::vector<uint8_t> JsonFrame(std::string_view json) {
  return Frame(0, std::vector<uint8_t>(json.begin(), json.end()));
}

DecodeErrorCode CodeOf(const std::vector<uint8_t>& frame) {
  auto r = DecodeFrame(frame, kDefaultMaxFrameBytes);
  EXPECT_FALSE(r) << "decoded unexpectedly";
  return r ? DecodeErrorCode::kEmptyCredential : r.error().code;
}

DecodeErrorCode JsonCode(std::string_view json) {
  auto r = DecodeMessageJson(json);
  EXPECT_FALSE(r) << json << " decoded unexpectedly";
  return r ? DecodeErrorCode::kEmptyCredential : r.error().code;
}

TEST(Flx1Refusal, VectorsInThisFileAreValid) {
  for (const auto& hex : kVectors) {
    // (the first entry has a deliberately wrong length, see TrailingAndShortPayload)
    if (&hex == &kVectors[0]) continue;
    EXPECT_TRUE(DecodeFrame(FromHex(hex), kDefaultMaxFrameBytes)) << hex;
  }
}

TEST(Flx1Refusal, UnknownFlagBitRefusedNotMasked) {
  EXPECT_EQ(kKnownFlags, 0x7FFF);
  auto r = CheckFlags(0x8000);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, DecodeErrorCode::kUnknownFlags);
  // Even alongside a valid layout, the whole frame is refused.
  auto v16 = FromHex("464c5831000180100000000b0000000000000000070000");
  EXPECT_EQ(CodeOf(v16), DecodeErrorCode::kUnknownFlags);
  // The envelope alone still yields the length so a reader can skip the payload.
  auto env = DecodeEnvelope(v16, kDefaultMaxFrameBytes);
  ASSERT_TRUE(env);
  EXPECT_EQ(env->length, 11u);
  EXPECT_EQ(env->flags, 0x8010);
  EXPECT_EQ(DecodeHeader(v16, kDefaultMaxFrameBytes).error().code, DecodeErrorCode::kUnknownFlags);
}

TEST(Flx1Refusal, ImpossibleFlagCombinations) {
  for (uint16_t flags :
       {0x0008, 0x0040, 0x0100, 0x0101, 0x0020,           0x0800,          0x2000,
        0x4000, 0x0080, 0x0200, 0x1000, 0x0400,           0x0410,          0x0006,
        0x0011, 0x0003, 0x0012, 0x0821, 0x0824 & ~0x0020, 0x0041 | 0x0020, 0x0010 | 0x0020}) {
    auto r = CheckFlags(flags);
    ASSERT_FALSE(r) << std::hex << flags;
    EXPECT_EQ(r.error().code, DecodeErrorCode::kInvalidValue) << std::hex << flags;
  }
  for (uint16_t flags : {0x0000, 0x0001, 0x0041, 0x0009, 0x0049,           0x0109,          0x0149,
                         0x0010, 0x0210, 0x0610, 0x1010, 0x1090,           0x1690,          0x0002,
                         0x0004, 0x0024, 0x2824, 0x4004, 0x6826 & ~0x0004, 0x6826 & ~0x0002}) {
    EXPECT_TRUE(CheckFlags(flags)) << std::hex << flags;
  }
}

TEST(Flx1Refusal, BadMagicAndVersion) {
  auto frame = FromHex("464c5831000100000000000d7b2274797065223a226f6b227d");
  auto bad_magic = frame;
  bad_magic[3] = 'I';  // "FLXI"
  EXPECT_EQ(CodeOf(bad_magic), DecodeErrorCode::kBadMagic);
  auto bad_version = frame;
  bad_version[5] = 2;
  EXPECT_EQ(CodeOf(bad_version), DecodeErrorCode::kBadVersion);
}

TEST(Flx1Refusal, OversizedFrameRefusedOnTheHeaderAlone) {
  // Only the header: a huge declared length is refused before any payload arrives.
  auto header = Header(0, kDefaultMaxFrameBytes + 1);
  auto r = DecodeEnvelope(header, kDefaultMaxFrameBytes);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, DecodeErrorCode::kFrameTooLarge);
  EXPECT_EQ(DecodeFrame(header, kDefaultMaxFrameBytes).error().code,
            DecodeErrorCode::kFrameTooLarge);
  // The caller's limit applies (pre-auth 64 KiB).
  auto at_limit = Header(0, kPreauthMaxFrameBytes);
  EXPECT_TRUE(DecodeEnvelope(at_limit, kPreauthMaxFrameBytes));
  auto over = Header(0, kPreauthMaxFrameBytes + 1);
  EXPECT_EQ(DecodeEnvelope(over, kPreauthMaxFrameBytes).error().code,
            DecodeErrorCode::kFrameTooLarge);
  // A real frame with a small limit.
  auto ok = FromHex("464c5831000100000000000d7b2274797065223a226f6b227d");
  EXPECT_TRUE(DecodeFrame(ok, 13));
  EXPECT_EQ(DecodeFrame(ok, 12).error().code, DecodeErrorCode::kFrameTooLarge);
}

TEST(Flx1Refusal, TruncatedAtEveryByteBoundary) {
  for (size_t v = 1; v < kVectors.size(); ++v) {
    const auto frame = FromHex(kVectors[v]);
    for (size_t cut = 0; cut < frame.size(); ++cut) {
      std::span<const uint8_t> prefix(frame.data(), cut);
      auto r = DecodeFrame(prefix, kDefaultMaxFrameBytes);
      ASSERT_FALSE(r) << kVectors[v] << " cut at " << cut;
      EXPECT_EQ(r.error().code, DecodeErrorCode::kIncomplete) << cut;
    }
    // The payload decoder on its own, with a truncated payload and the original flags.
    auto header = DecodeHeader(frame, kDefaultMaxFrameBytes);
    ASSERT_TRUE(header);
    std::span<const uint8_t> payload(frame.data() + kHeaderSize, header->length);
    for (size_t cut = 0; cut < payload.size(); ++cut) {
      auto r = DecodePayload(header->flags, payload.first(cut));
      ASSERT_FALSE(r) << kVectors[v] << " payload cut at " << cut;
      EXPECT_TRUE(r.error().code == DecodeErrorCode::kIncomplete ||
                  r.error().code == DecodeErrorCode::kCountTooLarge)
          << cut << " " << r.error().ToString();
    }
  }
  // A JSON payload cut short is not JSON.
  const std::string json = R"({"type":"error","message":"oops"})";
  for (size_t cut = 0; cut < json.size(); ++cut) {
    EXPECT_EQ(JsonCode(json.substr(0, cut)), DecodeErrorCode::kInvalidJson) << cut;
  }
}

TEST(Flx1Refusal, TrailingAndShortPayload) {
  // Header length 31 but the JSON payload has 33 bytes: the frame has trailing bytes.
  EXPECT_EQ(CodeOf(FromHex(kVectors[0])), DecodeErrorCode::kTrailingBytes);
  // A byte after a complete frame.
  auto v = FromHex(kVectors[1]);
  v.push_back(0);
  EXPECT_EQ(CodeOf(v), DecodeErrorCode::kTrailingBytes);
  // Inside the payload: an extra byte after the last field of every binary layout.
  for (size_t i = 1; i < kVectors.size(); ++i) {
    auto frame = FromHex(kVectors[i]);
    auto header = DecodeHeader(frame, kDefaultMaxFrameBytes);
    std::vector<uint8_t> payload(frame.begin() + kHeaderSize, frame.end());
    payload.push_back(0x00);
    auto r = DecodePayload(header->flags, payload);
    ASSERT_FALSE(r) << kVectors[i];
    EXPECT_EQ(r.error().code, DecodeErrorCode::kTrailingBytes) << kVectors[i];
  }
  // JSON text after the object.
  EXPECT_EQ(JsonCode(R"({"type":"ok"} {})"), DecodeErrorCode::kInvalidJson);
}

TEST(Flx1Refusal, CountLargerThanRemainingBytes) {
  // Publish batch t1/default/demo with count 0xFFFFFFFF and nothing after it.
  auto payload = FromHex("00027431000764656661756c74000464656d6fffffffff");
  auto r = DecodePayload(0x0001, payload);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, DecodeErrorCode::kCountTooLarge);
  // count = 2 with room for exactly one 4-byte length.
  payload = FromHex("00027431000764656661756c74000464656d6f0000000200000000");
  EXPECT_EQ(DecodePayload(0x0001, payload).error().code, DecodeErrorCode::kCountTooLarge);
  // Event batch: count 3 with 8 bytes left, timestamps make each event ≥ 12 bytes.
  payload = FromHex("000000030000000000000000");
  EXPECT_EQ(DecodePayload(0x4004, payload).error().code, DecodeErrorCode::kCountTooLarge);
  // A payload length beyond what remains.
  payload = FromHex("00027431000764656661756c74000464656d6f00000001000000ff6869");
  EXPECT_EQ(DecodePayload(0x0001, payload).error().code, DecodeErrorCode::kIncomplete);
}

TEST(Flx1Refusal, InvalidUtf8) {
  // tenant_id = ff in a binary publish.
  auto payload = FromHex("0001ff000764656661756c74000464656d6f00000000");
  EXPECT_EQ(DecodePayload(0x0001, payload).error().code, DecodeErrorCode::kInvalidUtf8);
  // The routing key is raw bytes, not text: ff is fine there.
  payload = FromHex("0001ff00027431000764656661756c74000464656d6f00000000");
  EXPECT_TRUE(DecodePayload(0x0041, payload));
  // Ack message with an overlong encoding.
  payload = FromHex("0100000000000000090002c0af");
  EXPECT_EQ(DecodePayload(0x0010, payload).error().code, DecodeErrorCode::kInvalidUtf8);
  // Event publisher.
  payload = FromHex("01fe00000000");
  EXPECT_EQ(DecodePayload(0x2004, payload).error().code, DecodeErrorCode::kInvalidUtf8);
  // JSON payload.
  EXPECT_EQ(JsonCode("{\"type\":\"error\",\"message\":\"\xff\"}"), DecodeErrorCode::kInvalidUtf8);
  // A lone surrogate escape is not a character either.
  EXPECT_EQ(JsonCode(R"({"type":"error","message":"\ud800"})"), DecodeErrorCode::kInvalidJson);
  // Encoders refuse it too.
  EXPECT_FALSE(EncodeMessageJson(Error{.message = "\xff"}));
  EXPECT_FALSE(EncodeMessageFrame(Error{.message = "\xff"}));
  std::string buffer = "kept";  // a refused frame leaves what the buffer held
  EXPECT_FALSE(AppendMessageFrame(Error{.message = "ok \xff"}, buffer));
  EXPECT_EQ(buffer, "kept");
  BinaryPublishBatch b;
  b.tenant_id = "\xc3";
  EXPECT_FALSE(EncodeFrame(b));
}

TEST(Flx1Refusal, BadBase64) {
  auto publish = [](std::string_view b64) {
    return "{\"type\":\"publish\",\"tenant_id\":\"t\",\"namespace\":\"n\",\"stream\":\"s\","
           "\"payload\":\"" +
           std::string(b64) + "\"}";
  };
  EXPECT_TRUE(DecodeMessageJson(publish("aGVsbG8=")));
  EXPECT_TRUE(DecodeMessageJson(publish("")));
  for (std::string_view bad : {"aGVsbG8", "aGVsbG9=", "aGVs bG8=", "-_-_", "aGVsbG8==", "a",
                               "aGVsbG8=aGVs", "aGVs\\nbG8="}) {
    EXPECT_EQ(JsonCode(publish(bad)), DecodeErrorCode::kInvalidValue) << bad;
  }
  EXPECT_EQ(
      JsonCode(R"({"type":"publish","tenant_id":"t","namespace":"n","stream":"s","payload":5})"),
      DecodeErrorCode::kInvalidJson);
}

TEST(Flx1Refusal, WrongJsonTypesAndRanges) {
  struct Case {
    std::string json;
    DecodeErrorCode code;
  };
  const std::vector<Case> cases = {
      {R"({"type":"publish_ok","request_id":"7"})", DecodeErrorCode::kInvalidJson},
      {R"({"type":"publish_ok","request_id":-1})", DecodeErrorCode::kInvalidValue},
      {R"({"type":"publish_ok","request_id":1.5})", DecodeErrorCode::kInvalidValue},
      {R"({"type":"publish_ok","request_id":18446744073709551616})",
       DecodeErrorCode::kInvalidValue},
      {R"({"type":"publish_ok"})", DecodeErrorCode::kInvalidJson},
      {R"({"type":"publish_ok","request_id":null})", DecodeErrorCode::kInvalidJson},
      {R"({"type":"auth","tenant_id":"t","token":"x","client_flags":65536})",
       DecodeErrorCode::kInvalidValue},
      {R"({"type":"auth","tenant_id":"t","token":"x","client_features":4294967296})",
       DecodeErrorCode::kInvalidValue},
      {R"({"type":"auth","tenant_id":7,"token":"x"})", DecodeErrorCode::kInvalidJson},
      {R"({"type":"auth_ok","server_flags":25,"listener_ports":[5000,70000]})",
       DecodeErrorCode::kInvalidValue},
      {R"({"type":"auth_ok","server_flags":25,"listener_ports":5000})",
       DecodeErrorCode::kInvalidJson},
      {R"({"type":"publish","tenant_id":"t","namespace":"n","stream":"s","payload":"","ack":"all"})",
       DecodeErrorCode::kInvalidValue},
      {R"({"type":"subscribe","tenant_id":"t","namespace":"n","stream":"s","start":"oldest"})",
       DecodeErrorCode::kInvalidValue},
      {R"({"type":"subscribe","tenant_id":"t","namespace":"n","stream":"s","start":{"offset":1,"x":2}})",
       DecodeErrorCode::kInvalidValue},
      {R"({"type":"subscribe","tenant_id":"t","namespace":"n","stream":"s","start":7})",
       DecodeErrorCode::kInvalidJson},
      {R"({"type":"cache_watch_started","subscription_id":1,"resume_offset":2,"resnapshot":1})",
       DecodeErrorCode::kInvalidJson},
      {R"({"type":"counter_add","tenant_id":"t","namespace":"n","cache":"c","key":"k","delta":9223372036854775808,"request_id":1})",
       DecodeErrorCode::kInvalidValue},
      {R"({"type":"error","message":"m","detail":[]})", DecodeErrorCode::kInvalidJson},
      {R"({"type":"publish_refused","request_id":1,"reason":"bogus","message":"m"})",
       DecodeErrorCode::kInvalidValue},
      {R"({"type":"commit","tenant_id":"t","namespace":"n","stream":"s","entity_key":"","event":"","changes":[{"op":"swap","key":"k"}],"request_id":1})",
       DecodeErrorCode::kInvalidValue},
      {R"({"type":"shard_inspect_info","request_id":1,"view":[]})", DecodeErrorCode::kInvalidJson},
      {R"({"type":7})", DecodeErrorCode::kInvalidJson},
      {R"({"message":"no type"})", DecodeErrorCode::kInvalidJson},
      {R"([{"type":"ok"}])", DecodeErrorCode::kInvalidJson},
      {R"("ok")", DecodeErrorCode::kInvalidJson},
      {"", DecodeErrorCode::kInvalidJson},
      {"\xEF\xBB\xBF{\"type\":\"ok\"}", DecodeErrorCode::kInvalidJson},
      {R"({"type":"ok"} // comment)", DecodeErrorCode::kInvalidJson},
      {R"({"type":"ok",})", DecodeErrorCode::kInvalidJson},
  };
  for (const auto& c : cases) {
    EXPECT_EQ(JsonCode(c.json), c.code) << c.json;
  }
  // Nesting deeper than 128 levels is refused before parsing.
  std::string deep = R"({"type":"extension","name":"x","body":)";
  for (int i = 0; i < 200; ++i) deep += "[";
  for (int i = 0; i < 200; ++i) deep += "]";
  deep += "}";
  EXPECT_EQ(JsonCode(deep), DecodeErrorCode::kInvalidJson);
}

TEST(Flx1Refusal, BinaryValueChecks) {
  // ack_mode 3 / 0.
  auto payload = FromHex("00000000000000070300027431000764656661756c74000464656d6f00000000");
  EXPECT_EQ(DecodePayload(0x0009, payload).error().code, DecodeErrorCode::kInvalidValue);
  payload[8] = 0;
  EXPECT_EQ(DecodePayload(0x0009, payload).error().code, DecodeErrorCode::kInvalidValue);
  // Idempotent batch with ack_mode per_message.
  payload = FromHex(
      "000000000000000701112233445566778800000000000000000002743100076465"
      "6661756c74000464656d6f00000000");
  EXPECT_EQ(DecodePayload(0x0109, payload).error().code, DecodeErrorCode::kInvalidValue);
  payload[8] = 2;
  EXPECT_TRUE(DecodePayload(0x0109, payload));
  // Ack status 2.
  payload = FromHex("0200000000000000070000");
  EXPECT_EQ(DecodePayload(0x0010, payload).error().code, DecodeErrorCode::kInvalidValue);
  // Offset on a failed ack.
  payload = FromHex("010000000000000007000000000000000000002a");
  EXPECT_EQ(DecodePayload(0x1010, payload).error().code, DecodeErrorCode::kInvalidValue);
  // Encoders refuse what the layout cannot carry.
  BinaryPublishAck failed_with_offset;
  failed_with_offset.status = BinaryPublishAck::Status::kError;
  failed_with_offset.offset = 1;
  EXPECT_FALSE(EncodeFrame(failed_with_offset));
  BinaryEventBatch long_publisher;
  const std::string p(256, 'p');
  long_publisher.publisher = p;
  EXPECT_FALSE(EncodeFrame(long_publisher));
  BinaryPublishBatch none_ack;
  none_ack.acked = BinaryPublishBatch::Acked{1, AckMode::kNone};
  EXPECT_FALSE(EncodeFrame(none_ack));
  BinaryPublishBatch long_key;
  const std::string k(65536, 'k');
  long_key.key = k;
  EXPECT_FALSE(EncodeFrame(long_key));
}

TEST(Flx1Tolerance, UnknownKeysNullAndOrderAreIgnored) {
  auto m = DecodeMessageJson(
      R"({"stream":"s","future_field":{"a":[1,2]},"type":"publish","payload":"aGk=","namespace":"n","tenant_id":"t","key":null,"request_id":null})");
  ASSERT_TRUE(m) << m.error().ToString();
  const auto& p = std::get<Publish>(*m);
  EXPECT_FALSE(p.key);
  EXPECT_FALSE(p.request_id);
  EXPECT_EQ(*EncodeMessageJson(*m),
            R"({"type":"publish","tenant_id":"t","namespace":"n","stream":"s","payload":"aGk="})");
}

TEST(Flx1Tolerance, EmptyIsNotNull) {
  auto hit = DecodeMessageJson(
      R"({"type":"cache_value","tenant_id":"t","namespace":"n","cache":"c","key":"k","value":""})");
  auto miss = DecodeMessageJson(
      R"({"type":"cache_value","tenant_id":"t","namespace":"n","cache":"c","key":"k","value":null})");
  ASSERT_TRUE(hit && miss);
  ASSERT_TRUE(std::get<CacheValue>(*hit).value);
  EXPECT_TRUE(std::get<CacheValue>(*hit).value->empty());
  EXPECT_FALSE(std::get<CacheValue>(*miss).value);
  // An empty routing key is a key.
  Publish p{.tenant_id = "t", .namespace_ = "n", .stream = "s", .key = flx1::Bytes{}};
  EXPECT_EQ(
      *EncodeMessageJson(p),
      R"({"type":"publish","tenant_id":"t","namespace":"n","stream":"s","payload":"","key":""})");
  // Always-emitted fields default when missing.
  auto started =
      DecodeMessageJson(R"({"type":"cache_watch_started","subscription_id":1,"resume_offset":2})");
  ASSERT_TRUE(started);
  EXPECT_FALSE(std::get<CacheWatchStarted>(*started).resnapshot);
  EXPECT_EQ(
      *EncodeMessageJson(*started),
      R"({"type":"cache_watch_started","subscription_id":1,"resume_offset":2,"resnapshot":false})");
}

TEST(Flx1Tolerance, U64ExtremesNeverGoThroughADouble) {
  const std::string text =
      R"({"type":"producer_init_ok","request_id":18446744073709551615,"producer_id":9007199254740993})";
  auto m = DecodeMessageJson(text);
  ASSERT_TRUE(m);
  EXPECT_EQ(std::get<ProducerInitOk>(*m).request_id, UINT64_MAX);
  EXPECT_EQ(std::get<ProducerInitOk>(*m).producer_id, 9007199254740993u);  // 2^53 + 1
  EXPECT_EQ(*EncodeMessageJson(*m), text);
  auto neg =
      DecodeMessageJson(R"({"type":"counter_value","value":-9223372036854775808,"request_id":1})");
  ASSERT_TRUE(neg);
  EXPECT_EQ(std::get<CounterValue>(*neg).value, INT64_MIN);
}

TEST(Flx1Tolerance, UnknownTypeIsKeptVerbatim) {
  const std::string text = R"({"type":"future_request","request_id":42,"z":1,"a":[true]})";
  auto frame = JsonFrame(text);
  auto decoded = DecodeFrame(frame, kDefaultMaxFrameBytes);
  ASSERT_TRUE(decoded);
  const auto& unknown = std::get<UnknownMessage>(std::get<Message>(*decoded));
  EXPECT_EQ(unknown.type, "future_request");
  EXPECT_EQ(unknown.request_id, 42u);
  EXPECT_EQ(MessageType(std::get<Message>(*decoded)), "future_request");
  EXPECT_EQ(*EncodeFrame(*decoded), frame);
}

TEST(Flx1Tolerance, StringEscapingMatchesSerde) {
  Error e{.message = std::string("q\"b\\s/\n\t\r\b\f\x01\x1f\x7f\xc3\xa9")};
  EXPECT_EQ(
      *EncodeMessageJson(e),
      "{\"type\":\"error\",\"message\":\"q\\\"b\\\\s/\\n\\t\\r\\b\\f\\u0001\\u001f\x7f\xc3\xa9\"}");
}

TEST(Flx1Constants, ErrorCodesAndRetryClasses) {
  EXPECT_EQ(ErrorCodeNumber("stale_claim"), 15);
  EXPECT_EQ(ErrorCodeName(6), "not_leader");
  EXPECT_FALSE(ErrorCodeName(0));
  EXPECT_FALSE(ErrorCodeName(99));
  EXPECT_EQ(DefaultRetryClass(7), RetryClass::kOutcomeUnknown);
  EXPECT_EQ(DefaultRetryClass(99), RetryClass::kFatal);
  EXPECT_EQ(RetryClassFromName("retry_after"), RetryClass::kRetryAfter);
  EXPECT_EQ(RetryClassFromName("whatever"), RetryClass::kFatal);
  EXPECT_EQ(RetryClassFromByte(3), RetryClass::kRedirect);
  EXPECT_EQ(RetryClassFromByte(0), RetryClass::kFatal);
  EXPECT_EQ(RetryClassFromByte(9), RetryClass::kFatal);
  EXPECT_EQ(RetryClassName(RetryClass::kOutcomeUnknown), "outcome_unknown");
}

}  // namespace
}  // namespace felix::wire::flx1
