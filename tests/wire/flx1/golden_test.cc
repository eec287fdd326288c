// Golden vectors of client-protocol §11: the upstream vectors (§11.1) must decode to the
// fields the spec states and re-encode to identical bytes; the derived examples (§11.2) too.
#include <gtest/gtest.h>

#include "wire/flx1/frame.h"
#include "wire/flx1/json_codec.h"
#include "wire/flx1/test_util.h"

namespace felix::wire::flx1 {
namespace {

using test::FromHex;
using test::ToBytes;
using test::ToHex;

std::string Str(const flx1::Bytes& b) {
  return {b.begin(), b.end()};
}

// The decoded frame with the buffer its views point into (moving the vector keeps its bytes).
struct Decoded {
  std::vector<uint8_t> bytes;
  Flx1Frame frame;
  operator const Flx1Frame&() const { return frame; }
};

// Decodes `hex`, checks re-encoding reproduces it, returns the frame.
Decoded DecodeAndReencode(const std::string& hex) {
  Decoded out{FromHex(hex), Message(Ok{})};
  const auto& bytes = out.bytes;
  auto frame = DecodeFrame(bytes, kDefaultMaxFrameBytes);
  EXPECT_TRUE(frame) << (frame ? "" : frame.error().ToString());
  if (!frame) return out;
  auto again = EncodeFrame(*frame);
  EXPECT_TRUE(again) << (again ? "" : again.error().ToString());
  if (again) {
    EXPECT_EQ(ToHex(*again), hex);
  }
  // The canonical rendering reads back to the same frame, which encodes to the same bytes.
  auto canonical = FrameToCanonicalJson(*frame);
  EXPECT_TRUE(canonical);
  if (canonical) {
    auto back = FrameFromCanonicalJson(*canonical);
    EXPECT_TRUE(back) << *canonical;
    if (back) {
      EXPECT_EQ(back->frame, *frame) << *canonical;
      auto bytes2 = EncodeFrame(back->frame);
      EXPECT_TRUE(bytes2 && ToHex(*bytes2) == hex) << *canonical;
    }
  }
  out.frame = *frame;
  return out;
}

template <class T>
T AsMessage(const Flx1Frame& f) {
  const auto* m = std::get_if<Message>(&f);
  EXPECT_NE(m, nullptr);
  if (!m) return T{};
  const auto* t = std::get_if<T>(m);
  EXPECT_NE(t, nullptr) << "got type " << MessageType(*m);
  return t ? *t : T{};
}

// Re-encoding from a freshly built struct (not from a decode) must give the vector too.
void ExpectEncodes(const Message& m, const std::string& hex) {
  auto bytes = EncodeMessageFrame(m);
  ASSERT_TRUE(bytes) << bytes.error().ToString();
  EXPECT_EQ(ToHex(*bytes), hex);
}

TEST(Flx1Golden, V1Publish) {
  const std::string hex =
      "464c5831000100000000005e7b2274797065223a227075626c697368222c2274656e616e745f6964223a22743122"
      "2c226e616d657370616365223a2264656661756c74222c2273747265616d223a2264656d6f222c227061796c6f61"
      "64223a22614756736247383d227d";
  auto f = DecodeAndReencode(hex);
  EXPECT_EQ(hex.size() / 2, 106u);
  auto p = AsMessage<Publish>(f);
  EXPECT_EQ(p.tenant_id, "t1");
  EXPECT_EQ(p.namespace_, "default");
  EXPECT_EQ(p.stream, "demo");
  EXPECT_EQ(Str(p.payload), "hello");
  EXPECT_FALSE(p.key);
  EXPECT_FALSE(p.request_id);
  EXPECT_FALSE(p.ack);
  Publish built;
  built.tenant_id = "t1";
  built.namespace_ = "default";
  built.stream = "demo";
  built.payload = ToBytes("hello");
  ExpectEncodes(built, hex);
}

TEST(Flx1Golden, V2Subscribe) {
  const std::string hex =
      "464c5831000100000000004b7b2274797065223a22737562736372696265222c2274656e616e745f6964223a2274"
      "31222c226e616d657370616365223a2264656661756c74222c2273747265616d223a2264656d6f227d";
  auto s = AsMessage<Subscribe>(DecodeAndReencode(hex));
  EXPECT_EQ(s.tenant_id, "t1");
  EXPECT_EQ(s.namespace_, "default");
  EXPECT_EQ(s.stream, "demo");
  EXPECT_FALSE(s.subscription_id);
  EXPECT_FALSE(s.start);
  EXPECT_FALSE(s.shard);
  EXPECT_FALSE(s.queue_capacity);
  ExpectEncodes(Subscribe{.tenant_id = "t1", .namespace_ = "default", .stream = "demo"}, hex);
}

TEST(Flx1Golden, V3Event) {
  const std::string hex =
      "464c5831000100000000005c7b2274797065223a226576656e74222c2274656e616e745f6964223a227431222c22"
      "6e616d657370616365223a2264656661756c74222c2273747265616d223a2264656d6f222c227061796c6f616422"
      "3a22643239796247513d227d";
  auto e = AsMessage<Event>(DecodeAndReencode(hex));
  EXPECT_EQ(e.tenant_id, "t1");
  EXPECT_EQ(e.stream, "demo");
  EXPECT_EQ(Str(e.payload), "world");
  EXPECT_FALSE(e.offset);
}

TEST(Flx1Golden, V4CachePut) {
  const std::string hex =
      "464c5831000100000000007f7b2274797065223a2263616368655f707574222c2274656e616e745f6964223a2274"
      "31222c226e616d657370616365223a2264656661756c74222c226361636865223a227072696d617279222c226b65"
      "79223a2264656d6f2d6b6579222c2276616c7565223a225932466a6147566b222c2274746c5f6d73223a31303030"
      "7d";
  auto c = AsMessage<CachePut>(DecodeAndReencode(hex));
  EXPECT_EQ(c.cache, "primary");
  EXPECT_EQ(c.key, "demo-key");
  EXPECT_EQ(Str(c.value), "cached");
  EXPECT_FALSE(c.request_id);
  EXPECT_EQ(c.ttl_ms, 1000u);
}

TEST(Flx1Golden, V5CacheGet) {
  const std::string hex =
      "464c5831000100000000005e7b2274797065223a2263616368655f676574222c2274656e616e745f6964223a2274"
      "31222c226e616d657370616365223a2264656661756c74222c226361636865223a227072696d617279222c226b65"
      "79223a2264656d6f2d6b6579227d";
  auto c = AsMessage<CacheGet>(DecodeAndReencode(hex));
  EXPECT_EQ(c.tenant_id, "t1");
  EXPECT_EQ(c.cache, "primary");
  EXPECT_EQ(c.key, "demo-key");
  EXPECT_FALSE(c.request_id);
}

TEST(Flx1Golden, V6CacheValue) {
  const std::string hex =
      "464c583100010000000000737b2274797065223a2263616368655f76616c7565222c2274656e616e745f6964223a"
      "227431222c226e616d657370616365223a2264656661756c74222c226361636865223a227072696d617279222c22"
      "6b6579223a2264656d6f2d6b6579222c2276616c7565223a225932466a6147566b227d";
  auto c = AsMessage<CacheValue>(DecodeAndReencode(hex));
  ASSERT_TRUE(c.value);
  EXPECT_EQ(Str(*c.value), "cached");
  EXPECT_FALSE(c.request_id);
  EXPECT_FALSE(c.version);
}

TEST(Flx1Golden, V7Ok) {
  const std::string hex = "464c5831000100000000000d7b2274797065223a226f6b227d";
  AsMessage<Ok>(DecodeAndReencode(hex));
  ExpectEncodes(Ok{}, hex);
}

TEST(Flx1Golden, V8Error) {
  const std::string hex =
      "464c583100010000000000217b2274797065223a226572726f72222c226d657373616765223a226f6f7073227d";
  auto e = AsMessage<Error>(DecodeAndReencode(hex));
  EXPECT_EQ(e.message, "oops");
  EXPECT_FALSE(e.code);
  EXPECT_FALSE(e.retry);
  EXPECT_FALSE(e.detail);
}

TEST(Flx1Golden, V9AuthWithCapabilities) {
  const std::string hex =
      "464c583100010000000000477b2274797065223a2261757468222c2274656e616e745f6964223a227431222c2274"
      "6f6b656e223a2264656d6f2d746f6b656e222c22636c69656e745f666c616773223a32357d";
  auto a = AsMessage<Auth>(DecodeAndReencode(hex));
  EXPECT_EQ(a.tenant_id, "t1");
  EXPECT_EQ(a.token, "demo-token");
  EXPECT_EQ(a.client_flags, 25);  // read from the field, not a constant
  EXPECT_NE(*a.client_flags, kKnownFlags);
  EXPECT_FALSE(a.client_features);
}

TEST(Flx1Golden, V10AuthOk) {
  const std::string hex =
      "464c583100010000000000247b2274797065223a22617574685f6f6b222c227365727665725f666c616773223a32"
      "357d";
  auto a = AsMessage<AuthOk>(DecodeAndReencode(hex));
  EXPECT_EQ(a.server_flags, 25);
  EXPECT_FALSE(a.server_features);
  ExpectEncodes(AuthOk{.server_flags = 25}, hex);
}

TEST(Flx1Golden, V11AuthExtendedFeatures) {
  const std::string hex =
      "464c5831000100000000007b7b2274797065223a2261757468222c2274656e616e745f6964223a227431222c2274"
      "6f6b656e223a2264656d6f2d746f6b656e222c22636c69656e745f666c616773223a32352c22636c69656e745f66"
      "65617475726573223a323134373438333634392c22636c69656e745f66656174757265735f6869223a317d";
  auto a = AsMessage<Auth>(DecodeAndReencode(hex));
  EXPECT_EQ(a.client_flags, 25);
  EXPECT_EQ(a.client_features, kFeatureExtended | kFeatureTopology);
  EXPECT_EQ(a.client_features_hi, kFeatureHiInspect);
}

TEST(Flx1Golden, V12AuthOkExtendedFeatures) {
  const std::string hex =
      "464c583100010000000000587b2274797065223a22617574685f6f6b222c227365727665725f666c616773223a32"
      "352c227365727665725f6665617475726573223a323134373438333634392c227365727665725f66656174757265"
      "735f6869223a317d";
  auto a = AsMessage<AuthOk>(DecodeAndReencode(hex));
  EXPECT_EQ(a.server_flags, 25);
  EXPECT_EQ(a.server_features, 2147483649u);
  EXPECT_EQ(a.server_features_hi, 1u);
  EXPECT_FALSE(a.listener_ports);
  EXPECT_FALSE(a.publish_window);
}

const BinaryPublishBatch& AsBatch(const Flx1Frame& f) {
  return std::get<BinaryPublishBatch>(f);
}

void ExpectT1DefaultDemoHello(const BinaryPublishBatch& b) {
  EXPECT_EQ(b.tenant_id, "t1");
  EXPECT_EQ(b.namespace_, "default");
  EXPECT_EQ(b.stream, "demo");
  ASSERT_EQ(b.payloads.size(), 1u);
  EXPECT_EQ(b.payloads[0], "hello");
}

TEST(Flx1Golden, V13BinaryPublishAcked) {
  const std::string hex =
      "464c5831000100090000002900000000000000070200027431000764656661756c74000464656d6f000000010000"
      "000568656c6c6f";
  auto f = DecodeAndReencode(hex);
  EXPECT_EQ(FrameFlags(f.frame), 0x0009);
  const auto& b = AsBatch(f);
  ASSERT_TRUE(b.acked);
  EXPECT_EQ(b.acked->request_id, 7u);
  EXPECT_EQ(b.acked->ack_mode, AckMode::kPerBatch);
  EXPECT_FALSE(b.idempotent);
  EXPECT_FALSE(b.key);
  ExpectT1DefaultDemoHello(b);
}

TEST(Flx1Golden, V14BinaryPublishAckedKeyed) {
  const std::string hex =
      "464c5831000100490000002d00000000000000070200026b3700027431000764656661756c74000464656d6f0000"
      "00010000000568656c6c6f";
  auto f = DecodeAndReencode(hex);
  const auto& b = AsBatch(f);
  ASSERT_TRUE(b.acked);
  EXPECT_EQ(b.acked->request_id, 7u);
  ASSERT_TRUE(b.key);
  EXPECT_EQ(*b.key, "k7");
  ExpectT1DefaultDemoHello(b);
}

TEST(Flx1Golden, V15BinaryPublishKeyed) {
  const std::string hex =
      "464c5831000100410000002400026b3700027431000764656661756c74000464656d6f00000001000000056865"
      "6c6c6f";
  auto f = DecodeAndReencode(hex);
  const auto& b = AsBatch(f);
  EXPECT_FALSE(b.acked);
  ASSERT_TRUE(b.key);
  EXPECT_EQ(*b.key, "k7");
  ExpectT1DefaultDemoHello(b);
  // Built from scratch.
  BinaryPublishBatch built;
  built.key = "k7";
  built.tenant_id = "t1";
  built.namespace_ = "default";
  built.stream = "demo";
  built.payloads = {"hello"};
  auto bytes = EncodeFrame(built);
  ASSERT_TRUE(bytes);
  EXPECT_EQ(ToHex(*bytes), hex);
}

TEST(Flx1Golden, V16BinaryPublishAckOk) {
  const std::string hex = "464c5831000100100000000b0000000000000000070000";
  auto f = DecodeAndReencode(hex);
  const auto& a = std::get<BinaryPublishAck>(f.frame);
  EXPECT_EQ(a.status, BinaryPublishAck::Status::kOk);
  EXPECT_EQ(a.request_id, 7u);
  EXPECT_EQ(a.message, "");
  EXPECT_FALSE(a.code);
  EXPECT_FALSE(a.offset);
}

TEST(Flx1Golden, V17BinaryPublishAckError) {
  const std::string hex =
      "464c5831000100100000001b010000000000000009001073747265616d206e6f7420666f756e64";
  auto f = DecodeAndReencode(hex);
  const auto& a = std::get<BinaryPublishAck>(f.frame);
  EXPECT_EQ(a.status, BinaryPublishAck::Status::kError);
  EXPECT_EQ(a.request_id, 9u);
  EXPECT_EQ(a.message, "stream not found");
}

// ---- §11.2 derived examples ----

TEST(Flx1Derived, D1PlainPublish) {
  auto f = DecodeAndReencode(
      "464c5831000100010000002000027431000764656661756c74000464656d6f000000010000000568656c6c6f");
  const auto& b = AsBatch(f);
  EXPECT_FALSE(b.acked);
  EXPECT_FALSE(b.key);
  ExpectT1DefaultDemoHello(b);
}

TEST(Flx1Derived, D2Idempotent) {
  auto f = DecodeAndReencode(
      "464c583100010109000000390000000000000007021122334455667788000000000000000000027431000764656"
      "661756c74000464656d6f000000010000000568656c6c6f");
  const auto& b = AsBatch(f);
  ASSERT_TRUE(b.acked && b.idempotent);
  EXPECT_EQ(b.acked->request_id, 7u);
  EXPECT_EQ(b.idempotent->producer_id, 0x1122334455667788u);
  EXPECT_EQ(b.idempotent->sequence, 0u);
  ExpectT1DefaultDemoHello(b);
}

TEST(Flx1Derived, D3AckWithCode) {
  auto f = DecodeAndReencode(
      "464c5831000102100000001e010000000000000009001073747265616d206e6f7420666f756e64000302");
  const auto& a = std::get<BinaryPublishAck>(f.frame);
  ASSERT_TRUE(a.code);
  EXPECT_EQ(a.code->code, static_cast<uint16_t>(ProtocolErrorCode::kNotFound));
  EXPECT_EQ(ErrorCodeName(a.code->code), "not_found");
  EXPECT_EQ(RetryClassFromByte(a.code->retry), RetryClass::kRetryAfter);
  EXPECT_FALSE(a.detail);
}

TEST(Flx1Derived, D4AckWithDetail) {
  auto f = DecodeAndReencode(
      "464c5831000106100000002401000000000000000900066d6f76696e6700050100066d6f76696e670000000000"
      "0000fa");
  const auto& a = std::get<BinaryPublishAck>(f.frame);
  EXPECT_EQ(a.message, "moving");
  ASSERT_TRUE(a.code && a.detail);
  EXPECT_EQ(a.code->code, 5);
  EXPECT_EQ(a.code->retry, 1);
  EXPECT_EQ(a.detail->reason, "moving");
  EXPECT_EQ(a.detail->retry_after_ms, 250u);
}

TEST(Flx1Derived, D5AckWithOffset) {
  auto f = DecodeAndReencode("464c583100011010000000130000000000000000070000000000000000002a");
  const auto& a = std::get<BinaryPublishAck>(f.frame);
  EXPECT_EQ(a.request_id, 7u);
  EXPECT_EQ(a.offset, 42u);
}

TEST(Flx1Derived, D6AckWithOwnerAndOffset) {
  auto f = DecodeAndReencode(
      "464c583100011090000000340000000000000000070000000862726f6b65722d62000d31302e302e302e353a3530"
      "30300000000000000007000000000000002a");
  const auto& a = std::get<BinaryPublishAck>(f.frame);
  ASSERT_TRUE(a.owner);
  EXPECT_EQ(a.owner->node_id, "broker-b");
  EXPECT_EQ(a.owner->addr, "10.0.0.5:5000");
  EXPECT_EQ(a.owner->generation, 7u);
  EXPECT_EQ(a.offset, 42u);
}

TEST(Flx1Derived, D7PerSubscriberEvents) {
  auto f = DecodeAndReencode(
      "464c5831000100020000001a000000000000000700000002000000036f6e650000000374776f");
  const auto& b = std::get<BinaryEventBatch>(f.frame);
  EXPECT_EQ(b.subscription_id, 7u);
  EXPECT_FALSE(b.base_offset);
  ASSERT_EQ(b.events.size(), 2u);
  EXPECT_EQ(b.events[0].payload, "one");
  EXPECT_EQ(b.events[1].payload, "two");
}

TEST(Flx1Derived, D8SharedWithOffsets) {
  auto f = DecodeAndReencode(
      "464c5831000100240000001a000000000000002a00000002000000036f6e650000000374776f");
  const auto& b = std::get<BinaryEventBatch>(f.frame);
  EXPECT_FALSE(b.subscription_id);
  EXPECT_EQ(b.base_offset, 42u);
  ASSERT_EQ(b.events.size(), 2u);
}

TEST(Flx1Derived, D9SkippedAndPublisher) {
  auto f = DecodeAndReencode(
      "464c58310001282400000022000000000000002a000000000000000106703a64656d6f00000001000000036f6e6"
      "5");
  const auto& b = std::get<BinaryEventBatch>(f.frame);
  EXPECT_EQ(b.base_offset, 42u);
  EXPECT_EQ(b.skipped_before, 1u);
  EXPECT_EQ(b.publisher, "p:demo");
  ASSERT_EQ(b.events.size(), 1u);
  EXPECT_EQ(b.events[0].payload, "one");
}

TEST(Flx1Derived, D10Timestamps) {
  auto f = DecodeAndReencode("464c583100014004000000130000000100060a24181e4000000000036f6e65");
  const auto& b = std::get<BinaryEventBatch>(f.frame);
  EXPECT_TRUE(b.has_timestamps);
  ASSERT_EQ(b.events.size(), 1u);
  EXPECT_EQ(b.events[0].timestamp_micros, 1700000000000000u);
  EXPECT_EQ(b.events[0].payload, "one");
}

TEST(Flx1Derived, D11EventStreamHello) {
  const std::string hex =
      "464c583100010000000000317b2274797065223a226576656e745f73747265616d5f68656c6c6f222c2273756273"
      "6372697074696f6e5f6964223a377d";
  auto h = AsMessage<EventStreamHello>(DecodeAndReencode(hex));
  EXPECT_EQ(h.subscription_id, 7u);
  ExpectEncodes(EventStreamHello{.subscription_id = 7}, hex);
}

// §6 examples printed in the spec: encoding them reproduces the text exactly.
TEST(Flx1Golden, SpecExamplesEncodeExactly) {
  const std::vector<std::string> examples = {
      R"({"type":"auth_ok","server_flags":32767,"server_features":196132,"server_features_hi":1,"listener_ports":[5000,5002],"publish_window":256})",
      R"({"type":"error","message":"forbidden","code":"forbidden","retry":"fatal","detail":{"reason":"not_ready","retry_after_ms":10}})",
      R"({"type":"not_leader","node_id":"broker-b","addr":"10.0.0.5:5000","generation":7})",
      R"({"type":"publish","tenant_id":"t1","namespace":"default","stream":"demo","payload":"aGVsbG8=","key":"azc=","request_id":7,"ack":"per_message"})",
      R"({"type":"publish_ok","request_id":7,"offset":42})",
      R"({"type":"subscribe","tenant_id":"t1","namespace":"default","stream":"demo","subscription_id":9,"start":{"offset":1200},"shard":2,"queue_capacity":4096})",
      R"({"type":"cache_put","tenant_id":"t1","namespace":"default","cache":"primary","key":"demo-key","value":"Y2FjaGVk","request_id":5,"ttl_ms":1000})",
      R"({"type":"cache_value","tenant_id":"t1","namespace":"default","cache":"primary","key":"demo-key","value":"Y2FjaGVk","request_id":5,"version":812})",
      R"({"type":"cache_watch","tenant_id":"t1","namespace":"default","cache":"sessions","prefix":"user:","shard":3,"from_offset":41,"subscription_id":12})",
      R"({"type":"shard_owners_view","owners":[{"shard":0,"generation":0}],"request_id":3})",
      R"({"type":"publish_refused","request_id":1,"reason":{"offset_mismatch":{"tail":9}},"message":"m"})",
      R"({"type":"cache_put","tenant_id":"t","namespace":"n","cache":"c","key":"k","value":"","ttl_ms":null})",
      R"({"type":"cache_value","tenant_id":"t","namespace":"n","cache":"c","key":"k","value":null})",
  };
  for (const auto& text : examples) {
    auto m = DecodeMessageJson(text);
    ASSERT_TRUE(m) << text << ": " << m.error().ToString();
    auto again = EncodeMessageJson(*m);
    ASSERT_TRUE(again);
    EXPECT_EQ(*again, text);
  }
}

// Event-stream endings a broker serves (§6.4): `shard_moved` (FEATURE_SHARD_MOVED, advertised
// by every broker; sent when a shard moves in a cluster) and `subscription_lagged`, built as
// the broker builds them, encode in the spec's field order with optional fields omitted.
TEST(Flx1Golden, ShardMovedAndSubscriptionLaggedEncodeInSpecOrder) {
  ShardMoved full;
  full.subscription_id = 7;
  full.resume_from = 42;
  full.node_id = "broker-b";
  full.addr = "10.0.0.5:5000";
  full.generation = 3;
  auto text = EncodeMessageJson(full);
  ASSERT_TRUE(text);
  EXPECT_EQ(*text,
            R"({"type":"shard_moved","subscription_id":7,"resume_from":42,"node_id":"broker-b",)"
            R"("addr":"10.0.0.5:5000","generation":3})");
  ShardMoved in_memory;  // no resume point, successor unknown
  in_memory.subscription_id = 7;
  in_memory.generation = 3;
  text = EncodeMessageJson(in_memory);
  ASSERT_TRUE(text);
  EXPECT_EQ(*text, R"({"type":"shard_moved","subscription_id":7,"generation":3})");
  auto back = DecodeMessageJson(*text);
  ASSERT_TRUE(back);
  EXPECT_EQ(std::get<ShardMoved>(*back), in_memory);

  SubscriptionLagged lagged;
  lagged.subscription_id = 9;
  lagged.resume_from = 1200;
  text = EncodeMessageJson(lagged);
  ASSERT_TRUE(text);
  EXPECT_EQ(*text, R"({"type":"subscription_lagged","subscription_id":9,"resume_from":1200})");
  // As a frame: the 12-byte envelope with flags 0, then exactly that JSON.
  auto frame = EncodeMessageFrame(lagged);
  ASSERT_TRUE(frame);
  ASSERT_EQ(frame->size(), 12 + text->size());
  EXPECT_EQ(std::string(frame->begin() + 12, frame->end()), *text);
}

// §6.8: `changes` is always emitted, `state_value.value` is null when absent.
TEST(Flx1Golden, CommitAndStateMessagesEncodeInSpecOrder) {
  const std::vector<std::string> examples = {
      R"({"type":"commit","tenant_id":"t","namespace":"n","stream":"s","entity_key":"ZQ==","event":"RQ==","changes":[{"op":"put","key":"k","value":"dg=="},{"op":"delete","key":"d"}],"request_id":1})",
      R"({"type":"commit","tenant_id":"t","namespace":"n","stream":"s","entity_key":"","event":"","changes":[],"request_id":2})",
      R"({"type":"commit_ok","request_id":1,"offset":11})",
      R"({"type":"state_get","tenant_id":"t","namespace":"n","stream":"s","entity_key":"ZQ==","key":"k","request_id":3})",
      R"({"type":"state_value","value":"dg==","version":11,"as_of":12,"request_id":3})",
      R"({"type":"state_value","value":null,"request_id":4})",
  };
  for (const auto& text : examples) {
    auto m = DecodeMessageJson(text);
    ASSERT_TRUE(m) << text << ": " << m.error().ToString();
    auto again = EncodeMessageJson(*m);
    ASSERT_TRUE(again);
    EXPECT_EQ(*again, text);
  }
}

}  // namespace
}  // namespace felix::wire::flx1
