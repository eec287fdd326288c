// FlatJsonObject accepts exactly the flat subset its header names, and DecodeMessageJson —
// which reads such objects without the full parser — answers every text exactly as the full
// parser alone does (DecodeMessageJsonFully): the same message, or the same error.
#include <gtest/gtest.h>

#include "wire/flx1/json_codec.h"
#include "wire/flx1/json_flat_object.h"

namespace felix::wire::flx1 {
namespace {

TEST(FlatJsonObject, ScansAFlatObjectInPlace) {
  auto object = FlatJsonObject::Scan(
      " {\"type\" : \"group_ack\",\"offset\":0, \"big\":18446744073709551615,\r\n"
      "\"yes\":true,\"no\":false,\"gone\":null,\"text\":\"caf\xc3\xa9\"} ");
  ASSERT_TRUE(object);
  EXPECT_EQ(object->size(), 7u);
  EXPECT_EQ(object->Find("type")->text, "group_ack");
  EXPECT_EQ(object->Find("offset")->number, 0u);
  EXPECT_EQ(object->Find("big")->number, UINT64_MAX);
  EXPECT_EQ(object->Find("yes")->kind, FlatJsonValue::Kind::kTrue);
  EXPECT_EQ(object->Find("no")->kind, FlatJsonValue::Kind::kFalse);
  EXPECT_EQ(object->Find("gone")->kind, FlatJsonValue::Kind::kNull);
  EXPECT_EQ(object->Find("text")->text, "caf\xc3\xa9");
  EXPECT_EQ(object->Find("missing"), nullptr);
  EXPECT_TRUE(FlatJsonObject::Scan("{}"));
}

TEST(FlatJsonObject, ScansAnArrayOfFlatObjectsAndWalksItsElements) {
  auto object = FlatJsonObject::Scan(
      R"({"type":"group_records","records":[ {"offset":3,"payload":"YQ==","attempts":1} ,)"
      R"({"offset":4,"payload":"","attempts":2,"publisher":null}],"empty":[ ],"request_id":9})");
  ASSERT_TRUE(object);
  const FlatJsonValue* records = object->Find("records");
  ASSERT_NE(records, nullptr);
  EXPECT_EQ(records->kind, FlatJsonValue::Kind::kArray);
  EXPECT_EQ(records->number, 2u);
  EXPECT_EQ(object->Find("request_id")->number, 9u);

  FlatJsonArrayReader elements(*records);
  FlatJsonObject element;
  ASSERT_TRUE(elements.Next(element));
  EXPECT_EQ(element.Find("offset")->number, 3u);
  EXPECT_EQ(element.Find("payload")->text, "YQ==");
  ASSERT_TRUE(elements.Next(element));
  EXPECT_EQ(element.Find("offset")->number, 4u);
  EXPECT_EQ(element.Find("publisher")->kind, FlatJsonValue::Kind::kNull);
  EXPECT_FALSE(elements.Next(element));

  const FlatJsonValue* empty = object->Find("empty");
  EXPECT_EQ(empty->number, 0u);
  FlatJsonArrayReader none(*empty);
  EXPECT_FALSE(none.Next(element));
}

TEST(FlatJsonObject, RefusesWhatOnlyTheFullParserReads) {
  const char* refused[] = {
      R"({"a":{"b":1}})",               // nested object
      R"({"a":[1]})",                   // array of scalars
      R"({"a":[{"b":1},2]})",           // an element that is not an object
      R"({"a":[{"b":[1]}]})",           // an array inside an element
      R"({"a":[{"b":{"c":1}}]})",       // an object inside an element
      R"({"a":[[]]})",                  // an array of arrays
      R"({"a":[{"b":1},]})",            // trailing comma in the array
      R"({"a":[{"b":1,"b":2}]})",       // a key twice in an element
      R"({"a":[{"b":1})",               // unterminated array
      R"({"a":[],"a":[]})",             // an array member twice
      R"({"a":"x\"y"})",                // escape
      "{\"a\":\"x\ty\"}",               // control character
      R"({"a":-1})",                    // negative
      R"({"a":1.5})",                   // fraction
      R"({"a":1e3})",                   // exponent
      R"({"a":01})",                    // leading zero
      R"({"a":18446744073709551616})",  // beyond u64
      R"({"a":1,"a":2})",               // a key twice
      R"({"a":1,})",                    // trailing comma
      R"({"a":tru})",                   // bad literal
      R"({"a":1} x)",                   // trailing text
      R"([1])",                         // not an object
      R"({"a" 1})",                     // missing colon
      "",
  };
  for (const char* text : refused) EXPECT_FALSE(FlatJsonObject::Scan(text)) << text;
  std::string many = "{";
  for (size_t i = 0; i <= FlatJsonObject::kMaxMembers; ++i) {
    many += (i ? ",\"k" : "\"k") + std::to_string(i) + "\":1";
  }
  EXPECT_FALSE(FlatJsonObject::Scan(many + "}"));
}

// A string body is checked eight bytes at a time and its tail byte by byte: a control
// character or a backslash is refused wherever it stands, and every byte beside them — the
// neighbours of 0x20 and 0x5c, DEL, bytes of UTF-8 sequences — is accepted wherever it stands.
TEST(FlatJsonObject, RefusesAControlByteOrBackslashAnywhereInALongString) {
  for (size_t length : {1u, 7u, 8u, 9u, 16u, 23u, 41u}) {
    for (size_t at = 0; at < length; ++at) {
      for (char refused : {'\x00', '\x01', '\t', '\x1f', '\\'}) {
        std::string body(length, 'A');
        body[at] = refused;
        EXPECT_FALSE(FlatJsonObject::Scan("{\"k\":\"" + body + "\"}"))
            << "length " << length << " at " << at << " byte " << int{refused};
        // Inside an array's element, key or value, first or a later element: the array's
        // reader does not check its elements' strings again, so the scan must refuse them.
        EXPECT_FALSE(FlatJsonObject::Scan("{\"a\":[{\"k\":\"" + body + "\"}]}"));
        EXPECT_FALSE(FlatJsonObject::Scan("{\"a\":[{\"k\":1},{\"" + body + "\":2}]}"));
      }
      for (char accepted : {' ', '!', '[', ']', '\x7f', '\x80', '\xc3', '\xff'}) {
        std::string body(length, 'A');
        body[at] = accepted;
        const std::string text = "{\"k\":\"" + body + "\"}";  // the views point into it
        auto object = FlatJsonObject::Scan(text);
        ASSERT_TRUE(object) << "length " << length << " at " << at << " byte " << int{accepted};
        EXPECT_EQ(object->Find("k")->text, body);
      }
    }
  }
}

TEST(FlatJsonDecode, AnswersEveryTextAsTheFullParserDoes) {
  const char* texts[] = {
      R"({"type":"group_ack","tenant_id":"t","namespace":"n","stream":"s","shard":0,"group":"g","offset":5,"request_id":7})",
      R"({ "request_id" : 7 , "type" : "group_ack" , "offset" : 5 , "group" : "g" , "shard" : 0 , "stream" : "s" , "namespace" : "n" , "tenant_id" : "t" , "extra" : null })",
      R"({"type":"group_ack","tenant_id":"t","namespace":"n","stream":"s","shard":0,"group":"g","offset":5})",
      R"({"type":"group_ack","tenant_id":"t","namespace":"n","stream":"s","shard":4294967296,"group":"g","offset":5,"request_id":7})",
      R"({"type":"group_ack","tenant_id":"t","namespace":"n","stream":"s","shard":"0","group":"g","offset":5,"request_id":7})",
      R"({"type":"group_ack","tenant_id":"t","namespace":"n","stream":"s","shard":-0,"group":"g","offset":5,"request_id":7})",
      R"({"type":"group_ack","tenant_id":"t","namespace":"n","stream":"s","shard":0,"group":"g","offset":5,"request_id":7,"request_id":8})",
      R"({"type":"auth","tenant_id":"t1","token":"abc.def","client_flags":25,"client_features":3})",
      R"({"type":"auth","tenant_id":"t1","token":"abc.def","client_flags":65536})",
      R"({"type":"auth","tenant_id":"t\u0031","token":"abc.def"})",
      R"({"type":"auth","tenant_id":null,"token":"abc.def"})",
      R"({"type":"cache_put","tenant_id":"t","namespace":"n","cache":"c","key":"k","value":"Y2FjaGVk","request_id":5,"ttl_ms":1000})",
      R"({"type":"cache_put","tenant_id":"t","namespace":"n","cache":"c","key":"k","value":"not base64!","request_id":5})",
      R"({"type":"cache_value","tenant_id":"t","namespace":"n","cache":"c","key":"k","value":null,"request_id":5})",
      R"({"type":"publish","tenant_id":"t1","namespace":"default","stream":"demo","payload":"aGVsbG8=","request_id":7,"ack":"per_message"})",
      R"({"type":"publish","tenant_id":"t1","namespace":"default","stream":"demo","payload":"aGVsbG8=","request_id":7,"ack":"sometimes"})",
      R"({"type":"subscribe","tenant_id":"t1","namespace":"default","stream":"demo","start":"earliest"})",
      R"({"type":"subscribe","tenant_id":"t1","namespace":"default","stream":"demo","start":{"offset":3}})",
      R"({"type":"subscribe","tenant_id":"t1","namespace":"default","stream":"demo","start":"middle"})",
      R"({"type":"no_such_type","request_id":3})",
      R"({"type":7})",
      R"({"request_id":3})",
      R"({"type":"ok"})",
      R"({"type":"error","message":"m","code":"forbidden","retry":"fatal"})",
      R"({"type":"group_records","records":[{"offset":3,"payload":"YQ==","attempts":1},{"offset":4,"payload":"","attempts":2,"publisher":"p","timestamp_micros":5,"skipped_before":2}],"request_id":9})",
      R"({"type":"group_records","records":[],"request_id":9})",
      R"({"type":"group_records","records":[{"offset":3,"payload":"YQ=="}],"request_id":9})",
      R"({"type":"group_records","records":[{"offset":3,"payload":"YQ==","attempts":1,"extra":[]}],"request_id":9})",
      R"({"type":"group_records","records":[{"offset":3,"payload":"YQ==","attempts":1,"extra":true}],"request_id":9})",
      R"({"type":"group_records","records":[{"payload":"YQ==","attempts":1}],"request_id":9})",
      R"({"type":"group_records","records":[{"offset":3,"payload":"not base64!","attempts":1}],"request_id":9})",
      R"({"type":"group_records","records":[{"offset":3,"payload":"YQ==","attempts":4294967296}],"request_id":9})",
      R"({"type":"group_records","records":[{"offset":3,"payload":"YQ==","attempts":1},{"offset":"4","payload":"","attempts":1}],"request_id":9})",
      R"({"type":"group_records","records":[{"offset":3,"payload":"YQ==","attempts":1},7],"request_id":9})",
      R"({"type":"group_records","records":null,"request_id":9})",
      R"({"type":"group_records","records":"none","request_id":9})",
      R"({"type":"group_records","records":[{}],"request_id":9})",
      R"({"type":"group_records","request_id":9})",
      R"({"type":"stream_records","records":[{"offset":1,"payload":"YQ==","timestamp_micros":7}],"next_offset":2,"request_id":3})",
      R"({"type":"stream_records","records":[{"offset":1,"payload":"YQ=="}],"next_offset":2,"request_id":3})",
      R"({"type":"group_dead_letter_list","offsets":[1,2],"request_id":3})",
      R"({"type":"group_dead_letter_list","offsets":[],"request_id":3})",
      R"({"type":"group_ack","tenant_id":"t","namespace":"n","stream":"s","shard":0,"group":"g","offset":5,"request_id":7,"x":[{"a":1}]})",
  };
  for (const char* text : texts) {
    auto read = DecodeMessageJson(text);
    auto fully = DecodeMessageJsonFully(text);
    ASSERT_EQ(read.has_value(), fully.has_value()) << text;
    if (read) {
      EXPECT_EQ(*read, *fully) << text;
    } else {
      EXPECT_EQ(read.error().ToString(), fully.error().ToString()) << text;
    }
  }
}

}  // namespace
}  // namespace felix::wire::flx1
