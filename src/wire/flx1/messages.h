// FLX1 JSON messages (client-protocol §6): one struct per message `type`, and `Message`, the
// variant of all of them. Frames with flag word 0 carry exactly one of these.
//
// Each struct lists its fields once, in `Fields(self, visitor)`, in the canonical wire order of
// §6; the JSON encoder, decoder and canonical rendering (json_codec.h) are all driven by that
// list, so order, omission and types cannot drift apart. Field conventions:
//   std::string            JSON string (UTF-8)
//   Bytes                  byte string, standard base64 with padding on the wire
//   std::optional<T>       `?` field: omitted when absent; JSON null or missing decodes absent
//   kEmitNull              optional that is *always emitted*, `null` when absent
//   kOmitFalse             bool emitted only when true; missing decodes false
//   kDefaultIfAbsent       always emitted; a missing field decodes as the default value
//   JsonValue              opaque JSON kept as received (order preserved)
// Error codes and retry classes are kept as the strings received (unknown values must not
// fail decoding); see constants.h for their lookups.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>

namespace felix::wire::flx1 {

using Bytes = std::vector<uint8_t>;
using JsonValue = nlohmann::ordered_json;

// Field options passed by Fields() to the visitor.
enum FieldOption : unsigned {
  kPlain = 0,
  kEmitNull = 1,
  kOmitFalse = 2,
  kDefaultIfAbsent = 4,
};

// ---- Enumerated values (§4) ----

enum class AckMode : uint8_t { kNone = 0, kPerMessage = 1, kPerBatch = 2 };

struct StartPosition {
  enum class Kind : uint8_t { kLatest, kEarliest, kOffset };
  Kind kind = Kind::kLatest;
  uint64_t offset = 0;  // only for kOffset
  bool operator==(const StartPosition&) const = default;
};

enum class CursorErrorReason : uint8_t { kTooOld, kInFuture };
enum class ShardKind : uint8_t { kStream, kCache };
enum class ShardRouting : uint8_t { kModulo, kJumpHash };

struct CacheCondition {
  enum class Kind : uint8_t { kAbsent, kVersion };
  Kind kind = Kind::kAbsent;
  uint64_t version = 0;  // only for kVersion
  bool operator==(const CacheCondition&) const = default;
};

struct StateChange {
  enum class Op : uint8_t { kPut, kDelete };
  Op op = Op::kPut;
  std::string key;
  Bytes value;  // only for kPut
  bool operator==(const StateChange&) const = default;
};

struct PublishRefusalReason {
  enum class Kind : uint8_t {
    kSequenceGap,
    kUnknownProducer,
    kSequenceExpired,
    kSequenceReused,
    kOffsetMismatch,
    kNotLeader,
  };
  Kind kind = Kind::kUnknownProducer;
  uint64_t expected = 0;            // kSequenceGap
  uint64_t tail = 0;                // kOffsetMismatch
  std::string node_id;              // kNotLeader
  std::optional<std::string> addr;  // kNotLeader
  bool operator==(const PublishRefusalReason&) const = default;
};

// ---- Nested objects ----

struct ErrorDetail {
  std::optional<std::string> reason;
  std::optional<uint64_t> retry_after_ms;
  bool operator==(const ErrorDetail&) const = default;
  template <class S, class V>
  static void Fields(S& s, V& v) {
    v("reason", s.reason);
    v("retry_after_ms", s.retry_after_ms);
  }
};

struct BrokerAddr {
  std::string node_id;
  std::string addr;
  bool operator==(const BrokerAddr&) const = default;
  template <class S, class V>
  static void Fields(S& s, V& v) {
    v("node_id", s.node_id);
    v("addr", s.addr);
  }
};

struct ShardOwner {
  uint32_t shard = 0;
  std::optional<std::string> node_id;
  std::optional<std::string> addr;
  uint64_t generation = 0;
  std::optional<std::string> unavailable;
  bool operator==(const ShardOwner&) const = default;
  template <class S, class V>
  static void Fields(S& s, V& v) {
    v("shard", s.shard);
    v("node_id", s.node_id);
    v("addr", s.addr);
    v("generation", s.generation);
    v("unavailable", s.unavailable);
  }
};

struct StreamRecord {
  uint64_t offset = 0;
  Bytes payload;
  std::optional<std::string> publisher;
  uint64_t timestamp_micros = 0;
  bool operator==(const StreamRecord&) const = default;
  template <class S, class V>
  static void Fields(S& s, V& v) {
    v("offset", s.offset);
    v("payload", s.payload);
    v("publisher", s.publisher);
    v("timestamp_micros", s.timestamp_micros);
  }
};

struct GroupRecord {
  uint64_t offset = 0;
  Bytes payload;
  uint32_t attempts = 0;  // always emitted; 0 = broker did not report
  std::optional<uint64_t> skipped_before;
  std::optional<std::string> publisher;
  std::optional<uint64_t> timestamp_micros;
  bool operator==(const GroupRecord&) const = default;
  template <class S, class V>
  static void Fields(S& s, V& v) {
    v("offset", s.offset);
    v("payload", s.payload);
    v("attempts", s.attempts, kDefaultIfAbsent);
    v("skipped_before", s.skipped_before);
    v("publisher", s.publisher);
    v("timestamp_micros", s.timestamp_micros);
  }
};

struct SubscriptionsFilter {
  std::optional<std::string> tenant_id;
  std::optional<std::string> namespace_;
  std::optional<std::string> stream;
  std::optional<uint32_t> shard;
  std::optional<std::string> principal;
  std::optional<bool> dropping;
  bool operator==(const SubscriptionsFilter&) const = default;
  template <class S, class V>
  static void Fields(S& s, V& v) {
    v("tenant_id", s.tenant_id);
    v("namespace", s.namespace_);
    v("stream", s.stream);
    v("shard", s.shard);
    v("principal", s.principal);
    v("dropping", s.dropping);
  }
};

struct SubscriptionsCursor {
  std::string tenant_id;
  std::string namespace_;
  std::string stream;
  uint32_t shard = 0;
  uint64_t subscriber_id = 0;
  bool operator==(const SubscriptionsCursor&) const = default;
  template <class S, class V>
  static void Fields(S& s, V& v) {
    v("tenant_id", s.tenant_id);
    v("namespace", s.namespace_);
    v("stream", s.stream);
    v("shard", s.shard);
    v("subscriber_id", s.subscriber_id);
  }
};

// ---- Messages ----
// Helper macros keep the many group messages to one line of scope each.
#define FLX1_MESSAGE(Name, type_string)                  \
  static constexpr std::string_view kType = type_string; \
  bool operator==(const Name&) const = default

// §6.1 Session
struct Auth {
  FLX1_MESSAGE(Auth, "auth");
  std::string tenant_id;
  std::string token;
  std::optional<uint16_t> client_flags;
  std::optional<uint32_t> client_features;
  std::optional<uint32_t> client_features_hi;
  template <class S, class V>
  static void Fields(S& s, V& v) {
    v("tenant_id", s.tenant_id);
    v("token", s.token);
    v("client_flags", s.client_flags);
    v("client_features", s.client_features);
    v("client_features_hi", s.client_features_hi);
  }
};

struct AuthOk {
  FLX1_MESSAGE(AuthOk, "auth_ok");
  uint16_t server_flags = 0;
  std::optional<uint32_t> server_features;
  std::optional<uint32_t> server_features_hi;
  std::optional<std::vector<uint16_t>> listener_ports;
  std::optional<uint32_t> publish_window;
  template <class S, class V>
  static void Fields(S& s, V& v) {
    v("server_flags", s.server_flags);
    v("server_features", s.server_features);
    v("server_features_hi", s.server_features_hi);
    v("listener_ports", s.listener_ports);
    v("publish_window", s.publish_window);
  }
};

struct Ok {
  FLX1_MESSAGE(Ok, "ok");
  template <class S, class V>
  static void Fields(S&, V&) {}
};

struct Error {
  FLX1_MESSAGE(Error, "error");
  std::string message;
  std::optional<std::string> code;   // §8.2 name; unknown names kept
  std::optional<std::string> retry;  // §8.1 name; unknown names kept (read as fatal)
  std::optional<ErrorDetail> detail;
  template <class S, class V>
  static void Fields(S& s, V& v) {
    v("message", s.message);
    v("code", s.code);
    v("retry", s.retry);
    v("detail", s.detail);
  }
};

struct Unsupported {
  FLX1_MESSAGE(Unsupported, "unsupported");
  std::string request_type;
  std::optional<std::string> extension;
  std::optional<uint64_t> request_id;
  template <class S, class V>
  static void Fields(S& s, V& v) {
    v("request_type", s.request_type);
    v("extension", s.extension);
    v("request_id", s.request_id);
  }
};

struct Extension {
  FLX1_MESSAGE(Extension, "extension");
  std::string name;
  std::optional<uint64_t> request_id;
  std::optional<JsonValue> body;  // any JSON; omitted when null
  template <class S, class V>
  static void Fields(S& s, V& v) {
    v("name", s.name);
    v("request_id", s.request_id);
    v("body", s.body);
  }
};

// §6.2 Discovery and routing
struct Topology {
  FLX1_MESSAGE(Topology, "topology");
  template <class S, class V>
  static void Fields(S&, V&) {}
};

struct TopologyView {
  FLX1_MESSAGE(TopologyView, "topology_view");
  std::vector<BrokerAddr> brokers;
  template <class S, class V>
  static void Fields(S& s, V& v) {
    v("brokers", s.brokers);
  }
};

struct StreamShards {
  FLX1_MESSAGE(StreamShards, "stream_shards");
  std::string tenant_id;
  std::string namespace_;
  std::string stream;
  uint64_t request_id = 0;
  template <class S, class V>
  static void Fields(S& s, V& v) {
    v("tenant_id", s.tenant_id);
    v("namespace", s.namespace_);
    v("stream", s.stream);
    v("request_id", s.request_id);
  }
};

struct StreamShardsView {
  FLX1_MESSAGE(StreamShardsView, "stream_shards_view");
  uint32_t shards = 0;
  uint64_t request_id = 0;
  std::optional<ShardRouting> routing;  // the reference omits it for modulo
  template <class S, class V>
  static void Fields(S& s, V& v) {
    v("shards", s.shards);
    v("request_id", s.request_id);
    v("routing", s.routing);
  }
};

struct CacheShards {
  FLX1_MESSAGE(CacheShards, "cache_shards");
  std::string tenant_id;
  std::string namespace_;
  std::string cache;
  uint64_t request_id = 0;
  template <class S, class V>
  static void Fields(S& s, V& v) {
    v("tenant_id", s.tenant_id);
    v("namespace", s.namespace_);
    v("cache", s.cache);
    v("request_id", s.request_id);
  }
};

struct CacheShardsView {
  FLX1_MESSAGE(CacheShardsView, "cache_shards_view");
  uint32_t shards = 0;
  uint64_t request_id = 0;
  template <class S, class V>
  static void Fields(S& s, V& v) {
    v("shards", s.shards);
    v("request_id", s.request_id);
  }
};

struct ShardOwners {
  FLX1_MESSAGE(ShardOwners, "shard_owners");
  std::string tenant_id;
  std::string namespace_;
  std::string name;
  ShardKind kind = ShardKind::kStream;
  uint64_t request_id = 0;
  template <class S, class V>
  static void Fields(S& s, V& v) {
    v("tenant_id", s.tenant_id);
    v("namespace", s.namespace_);
    v("name", s.name);
    v("kind", s.kind);
    v("request_id", s.request_id);
  }
};

struct ShardOwnersView {
  FLX1_MESSAGE(ShardOwnersView, "shard_owners_view");
  std::vector<ShardOwner> owners;
  uint64_t request_id = 0;
  template <class S, class V>
  static void Fields(S& s, V& v) {
    v("owners", s.owners);
    v("request_id", s.request_id);
  }
};

struct NotLeader {
  FLX1_MESSAGE(NotLeader, "not_leader");
  std::string node_id;
  std::optional<std::string> addr;
  uint64_t generation = 0;
  template <class S, class V>
  static void Fields(S& s, V& v) {
    v("node_id", s.node_id);
    v("addr", s.addr);
    v("generation", s.generation);
  }
};

// §6.3 Publishing
struct Publish {
  FLX1_MESSAGE(Publish, "publish");
  std::string tenant_id;
  std::string namespace_;
  std::string stream;
  Bytes payload;
  std::optional<Bytes> key;  // present-but-empty is a real key
  std::optional<uint64_t> request_id;
  std::optional<AckMode> ack;  // absent = per_message (broker behaviour)
  template <class S, class V>
  static void Fields(S& s, V& v) {
    v("tenant_id", s.tenant_id);
    v("namespace", s.namespace_);
    v("stream", s.stream);
    v("payload", s.payload);
    v("key", s.key);
    v("request_id", s.request_id);
    v("ack", s.ack);
  }
};

struct PublishBatch {
  FLX1_MESSAGE(PublishBatch, "publish_batch");
  std::string tenant_id;
  std::string namespace_;
  std::string stream;
  std::vector<Bytes> payloads;
  std::optional<Bytes> key;
  std::optional<uint64_t> request_id;
  std::optional<AckMode> ack;  // absent = per_batch (broker behaviour)
  template <class S, class V>
  static void Fields(S& s, V& v) {
    v("tenant_id", s.tenant_id);
    v("namespace", s.namespace_);
    v("stream", s.stream);
    v("payloads", s.payloads);
    v("key", s.key);
    v("request_id", s.request_id);
    v("ack", s.ack);
  }
};

struct PublishOk {
  FLX1_MESSAGE(PublishOk, "publish_ok");
  uint64_t request_id = 0;
  std::optional<uint64_t> offset;
  template <class S, class V>
  static void Fields(S& s, V& v) {
    v("request_id", s.request_id);
    v("offset", s.offset);
  }
};

struct PublishError {
  FLX1_MESSAGE(PublishError, "publish_error");
  uint64_t request_id = 0;
  std::string message;
  std::optional<std::string> code;
  std::optional<std::string> retry;
  std::optional<ErrorDetail> detail;
  template <class S, class V>
  static void Fields(S& s, V& v) {
    v("request_id", s.request_id);
    v("message", s.message);
    v("code", s.code);
    v("retry", s.retry);
    v("detail", s.detail);
  }
};

struct ProducerInit {
  FLX1_MESSAGE(ProducerInit, "producer_init");
  uint64_t request_id = 0;
  template <class S, class V>
  static void Fields(S& s, V& v) {
    v("request_id", s.request_id);
  }
};

struct ProducerInitOk {
  FLX1_MESSAGE(ProducerInitOk, "producer_init_ok");
  uint64_t request_id = 0;
  uint64_t producer_id = 0;
  template <class S, class V>
  static void Fields(S& s, V& v) {
    v("request_id", s.request_id);
    v("producer_id", s.producer_id);
  }
};

struct PublishIdempotent {
  FLX1_MESSAGE(PublishIdempotent, "publish_idempotent");
  std::string tenant_id;
  std::string namespace_;
  std::string stream;
  std::vector<Bytes> payloads;
  std::optional<Bytes> key;
  uint64_t request_id = 0;
  uint64_t producer_id = 0;
  uint64_t sequence = 0;
  template <class S, class V>
  static void Fields(S& s, V& v) {
    v("tenant_id", s.tenant_id);
    v("namespace", s.namespace_);
    v("stream", s.stream);
    v("payloads", s.payloads);
    v("key", s.key);
    v("request_id", s.request_id);
    v("producer_id", s.producer_id);
    v("sequence", s.sequence);
  }
};

struct PublishIf {  // [doc-only order]
  FLX1_MESSAGE(PublishIf, "publish_if");
  std::string tenant_id;
  std::string namespace_;
  std::string stream;
  std::vector<Bytes> payloads;
  std::optional<Bytes> key;
  uint64_t expected_offset = 0;
  uint64_t request_id = 0;
  template <class S, class V>
  static void Fields(S& s, V& v) {
    v("tenant_id", s.tenant_id);
    v("namespace", s.namespace_);
    v("stream", s.stream);
    v("payloads", s.payloads);
    v("key", s.key);
    v("expected_offset", s.expected_offset);
    v("request_id", s.request_id);
  }
};

struct PublishRefused {
  FLX1_MESSAGE(PublishRefused, "publish_refused");
  uint64_t request_id = 0;
  PublishRefusalReason reason;
  std::string message;
  template <class S, class V>
  static void Fields(S& s, V& v) {
    v("request_id", s.request_id);
    v("reason", s.reason);
    v("message", s.message);
  }
};

// §6.4 Subscribing and event delivery
struct Subscribe {
  FLX1_MESSAGE(Subscribe, "subscribe");
  std::string tenant_id;
  std::string namespace_;
  std::string stream;
  std::optional<uint64_t> subscription_id;
  std::optional<StartPosition> start;  // absent = latest
  std::optional<uint32_t> shard;       // absent = 0
  std::optional<uint32_t> queue_capacity;
  template <class S, class V>
  static void Fields(S& s, V& v) {
    v("tenant_id", s.tenant_id);
    v("namespace", s.namespace_);
    v("stream", s.stream);
    v("subscription_id", s.subscription_id);
    v("start", s.start);
    v("shard", s.shard);
    v("queue_capacity", s.queue_capacity);
  }
};

struct Subscribed {
  FLX1_MESSAGE(Subscribed, "subscribed");
  uint64_t subscription_id = 0;
  std::optional<uint64_t> start_offset;
  std::optional<uint64_t> live_offset;
  std::optional<uint32_t> queue_capacity;
  template <class S, class V>
  static void Fields(S& s, V& v) {
    v("subscription_id", s.subscription_id);
    v("start_offset", s.start_offset);
    v("live_offset", s.live_offset);
    v("queue_capacity", s.queue_capacity);
  }
};

struct SubscribeCursorError {
  FLX1_MESSAGE(SubscribeCursorError, "subscribe_cursor_error");
  CursorErrorReason reason = CursorErrorReason::kTooOld;
  uint64_t requested = 0;
  uint64_t available = 0;
  template <class S, class V>
  static void Fields(S& s, V& v) {
    v("reason", s.reason);
    v("requested", s.requested);
    v("available", s.available);
  }
};

struct EventStreamHello {
  FLX1_MESSAGE(EventStreamHello, "event_stream_hello");
  uint64_t subscription_id = 0;
  template <class S, class V>
  static void Fields(S& s, V& v) {
    v("subscription_id", s.subscription_id);
  }
};

struct Event {
  FLX1_MESSAGE(Event, "event");
  std::string tenant_id;
  std::string namespace_;
  std::string stream;
  Bytes payload;
  std::optional<uint64_t> offset;
  template <class S, class V>
  static void Fields(S& s, V& v) {
    v("tenant_id", s.tenant_id);
    v("namespace", s.namespace_);
    v("stream", s.stream);
    v("payload", s.payload);
    v("offset", s.offset);
  }
};

struct EventBatch {
  FLX1_MESSAGE(EventBatch, "event_batch");
  std::string tenant_id;
  std::string namespace_;
  std::string stream;
  std::vector<Bytes> payloads;
  std::optional<uint64_t> base_offset;
  template <class S, class V>
  static void Fields(S& s, V& v) {
    v("tenant_id", s.tenant_id);
    v("namespace", s.namespace_);
    v("stream", s.stream);
    v("payloads", s.payloads);
    v("base_offset", s.base_offset);
  }
};

struct ShardMoved {
  FLX1_MESSAGE(ShardMoved, "shard_moved");
  uint64_t subscription_id = 0;
  std::optional<uint64_t> resume_from;
  std::optional<std::string> node_id;
  std::optional<std::string> addr;
  uint64_t generation = 0;
  template <class S, class V>
  static void Fields(S& s, V& v) {
    v("subscription_id", s.subscription_id);
    v("resume_from", s.resume_from);
    v("node_id", s.node_id);
    v("addr", s.addr);
    v("generation", s.generation);
  }
};

struct SubscriptionLagged {
  FLX1_MESSAGE(SubscriptionLagged, "subscription_lagged");
  uint64_t subscription_id = 0;
  uint64_t resume_from = 0;
  template <class S, class V>
  static void Fields(S& s, V& v) {
    v("subscription_id", s.subscription_id);
    v("resume_from", s.resume_from);
  }
};

struct OffsetForTime {  // [doc-only order]
  FLX1_MESSAGE(OffsetForTime, "offset_for_time");
  std::string tenant_id;
  std::string namespace_;
  std::string stream;
  uint32_t shard = 0;
  uint64_t at_micros = 0;
  uint64_t request_id = 0;
  template <class S, class V>
  static void Fields(S& s, V& v) {
    v("tenant_id", s.tenant_id);
    v("namespace", s.namespace_);
    v("stream", s.stream);
    v("shard", s.shard);
    v("at_micros", s.at_micros);
    v("request_id", s.request_id);
  }
};

struct OffsetValue {
  FLX1_MESSAGE(OffsetValue, "offset_value");
  std::optional<uint64_t> offset;
  uint64_t request_id = 0;
  template <class S, class V>
  static void Fields(S& s, V& v) {
    v("offset", s.offset);
    v("request_id", s.request_id);
  }
};

struct StreamRead {  // [doc-only order]
  FLX1_MESSAGE(StreamRead, "stream_read");
  std::string tenant_id;
  std::string namespace_;
  std::string stream;
  uint32_t shard = 0;
  uint64_t from = 0;
  std::optional<uint64_t> end;
  std::optional<uint32_t> max_records;
  std::optional<uint64_t> max_bytes;
  uint64_t request_id = 0;
  template <class S, class V>
  static void Fields(S& s, V& v) {
    v("tenant_id", s.tenant_id);
    v("namespace", s.namespace_);
    v("stream", s.stream);
    v("shard", s.shard);
    v("from", s.from);
    v("end", s.end);
    v("max_records", s.max_records);
    v("max_bytes", s.max_bytes);
    v("request_id", s.request_id);
  }
};

struct StreamRecords {
  FLX1_MESSAGE(StreamRecords, "stream_records");
  std::vector<StreamRecord> records;
  uint64_t next_offset = 0;
  uint64_t request_id = 0;
  template <class S, class V>
  static void Fields(S& s, V& v) {
    v("records", s.records);
    v("next_offset", s.next_offset);
    v("request_id", s.request_id);
  }
};

// §6.5 Cache
struct CachePut {
  FLX1_MESSAGE(CachePut, "cache_put");
  std::string tenant_id;
  std::string namespace_;
  std::string cache;
  std::string key;
  Bytes value;
  std::optional<uint64_t> request_id;
  std::optional<uint64_t> ttl_ms;  // always emitted (null when absent)
  template <class S, class V>
  static void Fields(S& s, V& v) {
    v("tenant_id", s.tenant_id);
    v("namespace", s.namespace_);
    v("cache", s.cache);
    v("key", s.key);
    v("value", s.value);
    v("request_id", s.request_id);
    v("ttl_ms", s.ttl_ms, kEmitNull);
  }
};

#define FLX1_CACHE_KEY_REQUEST(Name, type_string) \
  struct Name {                                   \
    FLX1_MESSAGE(Name, type_string);              \
    std::string tenant_id;                        \
    std::string namespace_;                       \
    std::string cache;                            \
    std::string key;                              \
    std::optional<uint64_t> request_id;           \
    template <class S, class V>                   \
    static void Fields(S& s, V& v) {              \
      v("tenant_id", s.tenant_id);                \
      v("namespace", s.namespace_);               \
      v("cache", s.cache);                        \
      v("key", s.key);                            \
      v("request_id", s.request_id);              \
    }                                             \
  }
FLX1_CACHE_KEY_REQUEST(CacheGet, "cache_get");
FLX1_CACHE_KEY_REQUEST(CacheDelete, "cache_delete");
#undef FLX1_CACHE_KEY_REQUEST

struct CacheValue {
  FLX1_MESSAGE(CacheValue, "cache_value");
  std::string tenant_id;
  std::string namespace_;
  std::string cache;
  std::string key;
  std::optional<Bytes> value;  // always emitted; null = miss, "" = stored empty value
  std::optional<uint64_t> request_id;
  std::optional<uint64_t> version;
  template <class S, class V>
  static void Fields(S& s, V& v) {
    v("tenant_id", s.tenant_id);
    v("namespace", s.namespace_);
    v("cache", s.cache);
    v("key", s.key);
    v("value", s.value, kEmitNull);
    v("request_id", s.request_id);
    v("version", s.version);
  }
};

struct CacheOk {
  FLX1_MESSAGE(CacheOk, "cache_ok");
  uint64_t request_id = 0;
  template <class S, class V>
  static void Fields(S& s, V& v) {
    v("request_id", s.request_id);
  }
};

struct CachePutIf {  // [doc-only order]
  FLX1_MESSAGE(CachePutIf, "cache_put_if");
  std::string tenant_id;
  std::string namespace_;
  std::string cache;
  std::string key;
  Bytes value;
  std::optional<uint64_t> ttl_ms;
  CacheCondition condition;
  uint64_t request_id = 0;
  template <class S, class V>
  static void Fields(S& s, V& v) {
    v("tenant_id", s.tenant_id);
    v("namespace", s.namespace_);
    v("cache", s.cache);
    v("key", s.key);
    v("value", s.value);
    v("ttl_ms", s.ttl_ms);
    v("condition", s.condition);
    v("request_id", s.request_id);
  }
};

struct CacheDeleteIf {  // [doc-only order]
  FLX1_MESSAGE(CacheDeleteIf, "cache_delete_if");
  std::string tenant_id;
  std::string namespace_;
  std::string cache;
  std::string key;
  uint64_t version = 0;
  uint64_t request_id = 0;
  template <class S, class V>
  static void Fields(S& s, V& v) {
    v("tenant_id", s.tenant_id);
    v("namespace", s.namespace_);
    v("cache", s.cache);
    v("key", s.key);
    v("version", s.version);
    v("request_id", s.request_id);
  }
};

struct CacheConditionResult {
  FLX1_MESSAGE(CacheConditionResult, "cache_condition_result");
  bool applied = false;
  std::optional<uint64_t> version;
  uint64_t request_id = 0;
  template <class S, class V>
  static void Fields(S& s, V& v) {
    v("applied", s.applied);
    v("version", s.version);
    v("request_id", s.request_id);
  }
};

struct CacheWatch {
  FLX1_MESSAGE(CacheWatch, "cache_watch");
  std::string tenant_id;
  std::string namespace_;
  std::string cache;
  std::optional<std::string> key;
  std::optional<std::string> prefix;
  std::optional<uint32_t> shard;
  std::optional<uint64_t> from_offset;
  bool retained = false;  // emitted only when true
  std::optional<uint64_t> subscription_id;
  template <class S, class V>
  static void Fields(S& s, V& v) {
    v("tenant_id", s.tenant_id);
    v("namespace", s.namespace_);
    v("cache", s.cache);
    v("key", s.key);
    v("prefix", s.prefix);
    v("shard", s.shard);
    v("from_offset", s.from_offset);
    v("retained", s.retained, kOmitFalse);
    v("subscription_id", s.subscription_id);
  }
};

struct CacheWatchStarted {
  FLX1_MESSAGE(CacheWatchStarted, "cache_watch_started");
  uint64_t subscription_id = 0;
  uint64_t resume_offset = 0;
  bool resnapshot = false;  // always emitted; missing decodes false
  std::optional<uint64_t> retained_count;
  template <class S, class V>
  static void Fields(S& s, V& v) {
    v("subscription_id", s.subscription_id);
    v("resume_offset", s.resume_offset);
    v("resnapshot", s.resnapshot, kDefaultIfAbsent);
    v("retained_count", s.retained_count);
  }
};

struct CacheEvent {
  FLX1_MESSAGE(CacheEvent, "cache_event");
  std::string key;
  std::optional<Bytes> value;  // absent = the key was deleted
  uint64_t offset = 0;
  uint64_t expires_at_millis = 0;  // always emitted; 0 = never
  template <class S, class V>
  static void Fields(S& s, V& v) {
    v("key", s.key);
    v("value", s.value);
    v("offset", s.offset);
    v("expires_at_millis", s.expires_at_millis, kDefaultIfAbsent);
  }
};

struct CacheWatchLagged {
  FLX1_MESSAGE(CacheWatchLagged, "cache_watch_lagged");
  uint64_t resume_from = 0;
  template <class S, class V>
  static void Fields(S& s, V& v) {
    v("resume_from", s.resume_from);
  }
};

// §6.6 Counters
struct CounterAdd {
  FLX1_MESSAGE(CounterAdd, "counter_add");
  std::string tenant_id;
  std::string namespace_;
  std::string cache;
  std::string key;
  int64_t delta = 0;
  uint64_t request_id = 0;
  template <class S, class V>
  static void Fields(S& s, V& v) {
    v("tenant_id", s.tenant_id);
    v("namespace", s.namespace_);
    v("cache", s.cache);
    v("key", s.key);
    v("delta", s.delta);
    v("request_id", s.request_id);
  }
};

struct CounterGet {
  FLX1_MESSAGE(CounterGet, "counter_get");
  std::string tenant_id;
  std::string namespace_;
  std::string cache;
  std::string key;
  uint64_t request_id = 0;
  template <class S, class V>
  static void Fields(S& s, V& v) {
    v("tenant_id", s.tenant_id);
    v("namespace", s.namespace_);
    v("cache", s.cache);
    v("key", s.key);
    v("request_id", s.request_id);
  }
};

struct CounterValue {
  FLX1_MESSAGE(CounterValue, "counter_value");
  std::optional<int64_t> value;  // absent = never written (distinct from 0)
  uint64_t request_id = 0;
  template <class S, class V>
  static void Fields(S& s, V& v) {
    v("value", s.value);
    v("request_id", s.request_id);
  }
};

// §6.7 Consumer groups. Every request starts with the same scope fields.
#define FLX1_GROUP_SCOPE  \
  std::string tenant_id;  \
  std::string namespace_; \
  std::string stream;     \
  uint32_t shard = 0;     \
  std::string group
#define FLX1_GROUP_SCOPE_FIELDS \
  v("tenant_id", s.tenant_id);  \
  v("namespace", s.namespace_); \
  v("stream", s.stream);        \
  v("shard", s.shard);          \
  v("group", s.group)

struct GroupPoll {
  FLX1_MESSAGE(GroupPoll, "group_poll");
  FLX1_GROUP_SCOPE;
  uint32_t max_records = 0;
  uint64_t wait_ms = 0;  // always emitted
  uint64_t request_id = 0;
  std::optional<std::string> consumer;
  std::optional<bool> reclaim;
  std::optional<uint64_t> visibility_ms;
  template <class S, class V>
  static void Fields(S& s, V& v) {
    FLX1_GROUP_SCOPE_FIELDS;
    v("max_records", s.max_records);
    v("wait_ms", s.wait_ms, kDefaultIfAbsent);
    v("request_id", s.request_id);
    v("consumer", s.consumer);
    v("reclaim", s.reclaim);
    v("visibility_ms", s.visibility_ms);
  }
};

#define FLX1_GROUP_OFFSET_REQUEST(Name, type_string) \
  struct Name {                                      \
    FLX1_MESSAGE(Name, type_string);                 \
    FLX1_GROUP_SCOPE;                                \
    uint64_t offset = 0;                             \
    uint64_t request_id = 0;                         \
    template <class S, class V>                      \
    static void Fields(S& s, V& v) {                 \
      FLX1_GROUP_SCOPE_FIELDS;                       \
      v("offset", s.offset);                         \
      v("request_id", s.request_id);                 \
    }                                                \
  }
FLX1_GROUP_OFFSET_REQUEST(GroupAck, "group_ack");
FLX1_GROUP_OFFSET_REQUEST(GroupDeadLetter, "group_dead_letter");
FLX1_GROUP_OFFSET_REQUEST(GroupDiscard, "group_discard");
FLX1_GROUP_OFFSET_REQUEST(GroupRedrive, "group_redrive");
#undef FLX1_GROUP_OFFSET_REQUEST

#define FLX1_GROUP_PLAIN_REQUEST(Name, type_string) \
  struct Name {                                     \
    FLX1_MESSAGE(Name, type_string);                \
    FLX1_GROUP_SCOPE;                               \
    uint64_t request_id = 0;                        \
    template <class S, class V>                     \
    static void Fields(S& s, V& v) {                \
      FLX1_GROUP_SCOPE_FIELDS;                      \
      v("request_id", s.request_id);                \
    }                                               \
  }
FLX1_GROUP_PLAIN_REQUEST(GroupDeadLetters, "group_dead_letters");
FLX1_GROUP_PLAIN_REQUEST(GroupDescribe, "group_describe");
FLX1_GROUP_PLAIN_REQUEST(GroupDelete, "group_delete");
#undef FLX1_GROUP_PLAIN_REQUEST

struct GroupNack {
  FLX1_MESSAGE(GroupNack, "group_nack");
  FLX1_GROUP_SCOPE;
  uint64_t offset = 0;
  uint64_t request_id = 0;
  std::optional<uint64_t> delay_ms;
  std::optional<uint32_t> attempts;
  template <class S, class V>
  static void Fields(S& s, V& v) {
    FLX1_GROUP_SCOPE_FIELDS;
    v("offset", s.offset);
    v("request_id", s.request_id);
    v("delay_ms", s.delay_ms);
    v("attempts", s.attempts);
  }
};

struct GroupExtend {
  FLX1_MESSAGE(GroupExtend, "group_extend");
  FLX1_GROUP_SCOPE;
  uint64_t offset = 0;
  uint32_t attempts = 0;
  uint64_t extend_ms = 0;
  uint64_t request_id = 0;
  template <class S, class V>
  static void Fields(S& s, V& v) {
    FLX1_GROUP_SCOPE_FIELDS;
    v("offset", s.offset);
    v("attempts", s.attempts);
    v("extend_ms", s.extend_ms);
    v("request_id", s.request_id);
  }
};

struct GroupSeek {
  FLX1_MESSAGE(GroupSeek, "group_seek");
  FLX1_GROUP_SCOPE;
  StartPosition start;
  bool if_new = false;  // emitted only when true
  uint64_t request_id = 0;
  template <class S, class V>
  static void Fields(S& s, V& v) {
    FLX1_GROUP_SCOPE_FIELDS;
    v("start", s.start);
    v("if_new", s.if_new, kOmitFalse);
    v("request_id", s.request_id);
  }
};
#undef FLX1_GROUP_SCOPE
#undef FLX1_GROUP_SCOPE_FIELDS

struct GroupRecords {
  FLX1_MESSAGE(GroupRecords, "group_records");
  std::vector<GroupRecord> records;
  uint64_t request_id = 0;
  template <class S, class V>
  static void Fields(S& s, V& v) {
    v("records", s.records);
    v("request_id", s.request_id);
  }
};

// A `group_records` answer to be sent from where its records already are (the broker's read
// buffers): the same fields as GroupRecords / GroupRecord, the byte and text fields viewed, not
// owned. Encode-only (AppendGroupRecordsFrame); the views must outlive the call.
struct GroupRecordView {
  uint64_t offset = 0;
  std::span<const uint8_t> payload;
  uint32_t attempts = 0;
  std::optional<uint64_t> skipped_before;
  std::optional<std::string_view> publisher;
  std::optional<uint64_t> timestamp_micros;
  template <class S, class V>
  static void Fields(S& s, V& v) {
    GroupRecord::Fields(s, v);
  }
};
struct GroupRecordsView {
  static constexpr std::string_view kType = GroupRecords::kType;
  std::span<const GroupRecordView> records;
  uint64_t request_id = 0;
  template <class S, class V>
  static void Fields(S& s, V& v) {
    GroupRecords::Fields(s, v);
  }
};

struct GroupExtended {
  FLX1_MESSAGE(GroupExtended, "group_extended");
  uint64_t visible_ms = 0;
  uint64_t request_id = 0;
  template <class S, class V>
  static void Fields(S& s, V& v) {
    v("visible_ms", s.visible_ms);
    v("request_id", s.request_id);
  }
};

struct GroupDeadLetterList {
  FLX1_MESSAGE(GroupDeadLetterList, "group_dead_letter_list");
  std::vector<uint64_t> offsets;
  uint64_t request_id = 0;
  template <class S, class V>
  static void Fields(S& s, V& v) {
    v("offsets", s.offsets);
    v("request_id", s.request_id);
  }
};

struct GroupPosition {
  FLX1_MESSAGE(GroupPosition, "group_position");
  uint64_t offset = 0;
  bool moved = false;
  uint64_t request_id = 0;
  template <class S, class V>
  static void Fields(S& s, V& v) {
    v("offset", s.offset);
    v("moved", s.moved);
    v("request_id", s.request_id);
  }
};

struct GroupInfo {
  FLX1_MESSAGE(GroupInfo, "group_info");
  std::optional<uint64_t> committed;
  uint64_t tail = 0;
  uint64_t in_flight = 0;
  uint64_t owed = 0;
  uint64_t dead_letters = 0;
  uint64_t request_id = 0;
  template <class S, class V>
  static void Fields(S& s, V& v) {
    v("committed", s.committed);
    v("tail", s.tail);
    v("in_flight", s.in_flight);
    v("owed", s.owed);
    v("dead_letters", s.dead_letters);
    v("request_id", s.request_id);
  }
};

struct GroupDeleted {
  FLX1_MESSAGE(GroupDeleted, "group_deleted");
  bool existed = false;
  uint64_t request_id = 0;
  template <class S, class V>
  static void Fields(S& s, V& v) {
    v("existed", s.existed);
    v("request_id", s.request_id);
  }
};

// §6.8 Atomic commits and shard state
struct Commit {
  FLX1_MESSAGE(Commit, "commit");
  std::string tenant_id;
  std::string namespace_;
  std::string stream;
  Bytes entity_key;
  Bytes event;
  std::vector<StateChange> changes;  // always emitted, missing decodes []
  uint64_t request_id = 0;
  std::optional<uint64_t> expected_offset;
  template <class S, class V>
  static void Fields(S& s, V& v) {
    v("tenant_id", s.tenant_id);
    v("namespace", s.namespace_);
    v("stream", s.stream);
    v("entity_key", s.entity_key);
    v("event", s.event);
    v("changes", s.changes, kDefaultIfAbsent);
    v("request_id", s.request_id);
    v("expected_offset", s.expected_offset);
  }
};

struct CommitOk {
  FLX1_MESSAGE(CommitOk, "commit_ok");
  uint64_t request_id = 0;
  uint64_t offset = 0;
  template <class S, class V>
  static void Fields(S& s, V& v) {
    v("request_id", s.request_id);
    v("offset", s.offset);
  }
};

struct StateGet {
  FLX1_MESSAGE(StateGet, "state_get");
  std::string tenant_id;
  std::string namespace_;
  std::string stream;
  Bytes entity_key;
  std::string key;
  uint64_t request_id = 0;
  template <class S, class V>
  static void Fields(S& s, V& v) {
    v("tenant_id", s.tenant_id);
    v("namespace", s.namespace_);
    v("stream", s.stream);
    v("entity_key", s.entity_key);
    v("key", s.key);
    v("request_id", s.request_id);
  }
};

struct StateValue {
  FLX1_MESSAGE(StateValue, "state_value");
  std::optional<Bytes> value;  // always emitted
  std::optional<uint64_t> version;
  std::optional<uint64_t> as_of;
  uint64_t request_id = 0;
  template <class S, class V>
  static void Fields(S& s, V& v) {
    v("value", s.value, kEmitNull);
    v("version", s.version);
    v("as_of", s.as_of);
    v("request_id", s.request_id);
  }
};

// §6.9 Operator inspection ([doc-only order]). The `view` of shard_inspect_info and the
// entries of subscriptions_list_info are open structures of open strings: they are kept as
// JSON objects (order preserved), not typed.
struct ShardInspect {
  FLX1_MESSAGE(ShardInspect, "shard_inspect");
  std::string tenant_id;
  std::string namespace_;
  std::string name;
  ShardKind kind = ShardKind::kStream;
  uint32_t shard = 0;
  uint64_t request_id = 0;
  template <class S, class V>
  static void Fields(S& s, V& v) {
    v("tenant_id", s.tenant_id);
    v("namespace", s.namespace_);
    v("name", s.name);
    v("kind", s.kind);
    v("shard", s.shard);
    v("request_id", s.request_id);
  }
};

struct ShardInspectInfo {
  FLX1_MESSAGE(ShardInspectInfo, "shard_inspect_info");
  uint64_t request_id = 0;
  JsonValue view = JsonValue::object();  // must be a JSON object
  template <class S, class V>
  static void Fields(S& s, V& v) {
    v("request_id", s.request_id);
    v("view", s.view);
  }
};

struct SubscriptionsList {
  FLX1_MESSAGE(SubscriptionsList, "subscriptions_list");
  uint64_t request_id = 0;
  std::optional<SubscriptionsFilter> filter;
  std::optional<uint32_t> limit;
  std::optional<SubscriptionsCursor> cursor;
  template <class S, class V>
  static void Fields(S& s, V& v) {
    v("request_id", s.request_id);
    v("filter", s.filter);
    v("limit", s.limit);
    v("cursor", s.cursor);
  }
};

struct SubscriptionsListInfo {
  FLX1_MESSAGE(SubscriptionsListInfo, "subscriptions_list_info");
  uint64_t request_id = 0;
  std::string node_id;
  std::vector<JsonValue> subscriptions;  // each a JSON object
  std::optional<SubscriptionsCursor> next_cursor;
  template <class S, class V>
  static void Fields(S& s, V& v) {
    v("request_id", s.request_id);
    v("node_id", s.node_id);
    v("subscriptions", s.subscriptions);
    v("next_cursor", s.next_cursor);
  }
};

#undef FLX1_MESSAGE

// A message whose `type` this build does not know (§4: decoded as Unknown, not refused).
// `raw_json` is the payload exactly as received, so re-encoding reproduces it.
struct UnknownMessage {
  std::string type;
  std::optional<uint64_t> request_id;  // when the message carried a readable u64 one
  std::string raw_json;
  bool operator==(const UnknownMessage&) const = default;
};

using Message = std::variant<
    Auth, AuthOk, Ok, Error, Unsupported, Extension, Topology, TopologyView, StreamShards,
    StreamShardsView, CacheShards, CacheShardsView, ShardOwners, ShardOwnersView, NotLeader,
    Publish, PublishBatch, PublishOk, PublishError, ProducerInit, ProducerInitOk, PublishIdempotent,
    PublishIf, PublishRefused, Subscribe, Subscribed, SubscribeCursorError, EventStreamHello, Event,
    EventBatch, ShardMoved, SubscriptionLagged, OffsetForTime, OffsetValue, StreamRead,
    StreamRecords, CachePut, CacheGet, CacheDelete, CacheValue, CacheOk, CachePutIf, CacheDeleteIf,
    CacheConditionResult, CacheWatch, CacheWatchStarted, CacheEvent, CacheWatchLagged, CounterAdd,
    CounterGet, CounterValue, GroupPoll, GroupAck, GroupNack, GroupExtend, GroupDeadLetter,
    GroupDeadLetters, GroupDiscard, GroupRedrive, GroupSeek, GroupDescribe, GroupDelete,
    GroupRecords, GroupExtended, GroupDeadLetterList, GroupPosition, GroupInfo, GroupDeleted,
    Commit, CommitOk, StateGet, StateValue, ShardInspect, ShardInspectInfo, SubscriptionsList,
    SubscriptionsListInfo, UnknownMessage>;

// The `type` string of a message (the received one for UnknownMessage).
std::string_view MessageType(const Message& message);

}  // namespace felix::wire::flx1
