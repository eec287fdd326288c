// FLXI strict decode and checked encode of every kind 1–39.
#include <isa-l/crc.h>

#include <string>
#include <type_traits>
#include <utility>

#include "wire/byte_reader.h"
#include "wire/byte_writer.h"
#include "wire/flxi/flxi.h"

namespace felix::wire::flxi {
namespace {

bool HasMarksSection(Kind k) {
  return k == Kind::kReplicateMarkedRecords || k == Kind::kReplicateCommittedRecords ||
         k == Kind::kReplicateLabelledRecords || k == Kind::kReplicateTimedRecords;
}
bool HasLogByte(Kind k) {
  return k == Kind::kReplicateCommittedRecords || k == Kind::kReplicateLabelledRecords ||
         k == Kind::kReplicateTimedRecords;
}
bool IsLabelled(Kind k) {
  return k == Kind::kReplicateLabelledRecords || k == Kind::kReplicateTimedRecords;
}

bool ValidErrorCode(uint16_t v) {
  return v >= 1 && v <= 11;
}
bool ValidAck(uint8_t v) {
  return v <= 2;
}
bool ValidOp(uint8_t v) {
  return v >= 1 && v <= 5;
}
bool ValidLog(uint8_t v) {
  return v >= 1 && v <= 5;
}
bool ValidMark(uint8_t v) {
  return v <= 4;
}
bool ValidCondition(uint8_t v) {
  return v <= 2;
}

std::string_view AsView(std::span<const uint8_t> b) {
  return {reinterpret_cast<const char*>(b.data()), b.size()};
}

// A ByteReader whose first failure sticks: later reads return zero values and do nothing, and
// Finish() reports the first error. Counts are bounded before anything is reserved.
class BodyReader {
 public:
  explicit BodyReader(std::span<const uint8_t> body) : r_(body) {}

  bool ok() const { return !err_.has_value(); }

  void Fail(DecodeErrorCode code, std::string detail) {
    if (!err_) err_ = DecodeError{code, std::move(detail)};
  }

  uint8_t U8(const char* f) { return Take(r_.ReadU8(f), uint8_t{0}); }
  uint16_t U16(const char* f) { return Take(r_.ReadU16(f), uint16_t{0}); }
  uint32_t U32(const char* f) { return Take(r_.ReadU32(f), uint32_t{0}); }
  uint64_t U64(const char* f) { return Take(r_.ReadU64(f), uint64_t{0}); }

  std::string_view Str(const char* f) {
    if (!ok()) return {};
    return Take(r_.ReadString32(f, kMaxIdentBytes), std::string_view{});
  }

  // Cred (allow_empty = false) or OptCred (allow_empty = true).
  std::string_view Cred(const char* f, bool allow_empty) {
    uint32_t len = U32(f);
    if (!ok()) return {};
    if (len == 0 && !allow_empty) {
      Fail(DecodeErrorCode::kEmptyCredential, std::string(f) + ": empty credential");
      return {};
    }
    if (len > kMaxCredentialBytes) {
      Fail(DecodeErrorCode::kStringTooLong, std::string(f) + ": " + std::to_string(len) +
                                                " bytes, at most " +
                                                std::to_string(kMaxCredentialBytes));
      return {};
    }
    auto bytes = Take(r_.ReadBytes(len, f), std::span<const uint8_t>{});
    if (!ok()) return {};
    auto s = AsView(bytes);
    if (!IsValidUtf8(s)) Fail(DecodeErrorCode::kInvalidUtf8, std::string(f) + ": not valid UTF-8");
    return s;
  }

  Bytes Blob(const char* f) {
    if (!ok()) return {};
    return AsView(Take(r_.ReadBytes32(f), std::span<const uint8_t>{}));
  }

  bool Bool(const char* f) {
    uint8_t v = U8(f);
    if (ok() && v > 1) {
      Fail(DecodeErrorCode::kInvalidValue,
           std::string(f) + ": presence byte " + std::to_string(v) + " is not 0 or 1");
    }
    return v == 1;
  }

  std::vector<Bytes> Payloads(const char* f) {
    std::vector<Bytes> out;
    uint32_t count = U32(f);
    if (!ok()) return out;
    if (!Check(r_.CheckCount(count, 4, kMaxBatchPayloads, f))) return out;
    out.reserve(count);
    for (uint32_t i = 0; i < count && ok(); ++i) out.push_back(Blob(f));
    return out;
  }

  ShardRef Shard() {
    ShardRef s;
    s.tenant = Str("shard.tenant");
    s.ns = Str("shard.namespace");
    s.stream = Str("shard.stream");
    s.shard = U32("shard.shard");
    s.generation = U64("shard.generation");
    return s;
  }

  template <typename E, typename Raw>
  E Enum(Raw raw, bool valid, const char* f) {
    if (ok() && !valid) {
      Fail(DecodeErrorCode::kInvalidValue,
           std::string(f) + ": unknown value " + std::to_string(static_cast<unsigned>(raw)));
    }
    return static_cast<E>(raw);
  }
  ErrorCode Code(const char* f) {
    uint16_t v = U16(f);
    return Enum<ErrorCode>(v, ValidErrorCode(v), f);
  }
  ReplicaLog Log(const char* f) {
    uint8_t v = U8(f);
    return Enum<ReplicaLog>(v, ValidLog(v), f);
  }

  std::vector<RecordMark> Marks(size_t count) {
    std::vector<RecordMark> out;
    if (!ok()) return out;
    if (!Check(r_.CheckCount(count, 1, kMaxBatchPayloads, "marks"))) return out;
    out.reserve(count);
    for (size_t i = 0; i < count && ok(); ++i) {
      RecordMark m;
      uint8_t b = U8("mark");
      uint8_t low = b & 0x7F;
      if (ok() && !ValidMark(low)) {
        Fail(DecodeErrorCode::kInvalidValue, "mark: unknown producer mark " + std::to_string(b));
      }
      m.type = static_cast<MarkType>(low);
      if (m.type == MarkType::kOpens) {
        m.producer_id = U64("mark.producer_id");
        m.sequence = U64("mark.sequence");
        m.batch_len = U32("mark.batch_len");
      }
      if (b & kMarkPublisherBit) {
        uint8_t len = U8("mark.publisher");
        if (!ok()) break;
        auto bytes = Take(r_.ReadBytes(len, "mark.publisher"), std::span<const uint8_t>{});
        if (!ok()) break;
        auto s = AsView(bytes);
        if (!IsValidUtf8(s)) {
          Fail(DecodeErrorCode::kInvalidUtf8, "mark.publisher: not valid UTF-8");
        }
        m.publisher = s;
      }
      out.push_back(m);
    }
    return out;
  }

  std::vector<uint64_t> U64List(size_t count, uint64_t max, const char* f) {
    std::vector<uint64_t> out;
    if (!ok()) return out;
    if (!Check(r_.CheckCount(count, 8, max, f))) return out;
    out.reserve(count);
    for (size_t i = 0; i < count && ok(); ++i) out.push_back(U64(f));
    return out;
  }

  std::vector<GenerationStart> Generations() {
    std::vector<GenerationStart> out;
    uint32_t count = U32("gen_count");
    if (!ok()) return out;
    if (!Check(r_.CheckCount(count, 16, kMaxGenerations, "generations"))) return out;
    out.reserve(count);
    for (uint32_t i = 0; i < count && ok(); ++i) {
      GenerationStart g;
      g.generation = U64("generations.generation");
      g.start_offset = U64("generations.start_offset");
      out.push_back(g);
    }
    return out;
  }

  DecodeResult<Frame> Finish(Kind kind, Body body) {
    if (ok()) Check(r_.ExpectEnd(KindName(kind)));
    if (err_) return tl::unexpected(*err_);
    return Frame{kind, std::move(body)};
  }

 private:
  template <typename T>
  T Take(DecodeResult<T> r, T fallback) {
    if (!ok()) return fallback;
    if (!r) {
      err_ = r.error();
      return fallback;
    }
    return *r;
  }
  bool Check(DecodeResult<void> r) {
    if (!r && !err_) err_ = r.error();
    return r.has_value();
  }

  ByteReader r_;
  std::optional<DecodeError> err_;
};

Records DecodeRecords(Kind kind, BodyReader& r) {
  Records m;
  m.correlation_id = r.U64("correlation_id");
  m.shard = r.Shard();
  m.first_offset = r.U64("first_offset");
  m.checksum = r.U64("checksum");
  m.payloads = r.Payloads("payloads");
  if (HasMarksSection(kind)) m.marks = r.Marks(m.payloads.size());
  if (HasLogByte(kind)) m.log = r.Log("log");
  if (kind == Kind::kReplicateCommittedRecords) m.commit_offset = r.U64("commit_offset");
  if (IsLabelled(kind)) {
    bool has_commit = r.Bool("has_commit");
    uint64_t commit = r.U64("commit_offset");
    if (has_commit) {
      m.commit_offset = commit;
    } else if (r.ok() && commit != 0) {
      r.Fail(DecodeErrorCode::kInvalidValue, "commit_offset: nonzero with has_commit = 0");
    }
    m.generations = r.Generations();
  }
  if (kind == Kind::kReplicateTimedRecords) {
    m.times = r.U64List(m.payloads.size(), kMaxBatchPayloads, "times");
  }
  return m;
}

CacheOp DecodeCacheOp(Kind kind, BodyReader& r) {
  CacheOp m;
  m.correlation_id = r.U64("correlation_id");
  m.shard = r.Shard();
  uint8_t op = r.U8("op");
  m.op = r.Enum<CacheOpKind>(op, ValidOp(op), "op");
  m.key = r.Str("key");
  m.ttl_ms = r.U64("ttl_ms");
  m.value = r.Blob("value");
  if (kind == Kind::kAuthorizedForwardCacheOp) m.credential = r.Cred("credential", false);
  if (kind == Kind::kConditionalForwardCacheOp) {
    m.credential = r.Cred("credential", true);
    Condition c;
    uint8_t t = r.U8("condition");
    c.type = r.Enum<CacheCondition>(t, ValidCondition(t), "condition");
    if (c.type == CacheCondition::kVersion) c.version = r.U64("condition.version");
    m.condition = c;
  }
  return m;
}

// Sticky-error body writer: the first refusal is kept and reported by the caller.
class BodyWriter {
 public:
  explicit BodyWriter(std::vector<uint8_t>& out) : w_(out) {}

  bool ok() const { return !err_.has_value(); }
  const felix::Error& error() const { return *err_; }
  void Fail(std::string message) {
    if (!err_) err_ = felix::Error{felix::ErrorCode::kInvalidArgument, std::move(message)};
  }

  void U8(uint8_t v) { w_.WriteU8(v); }
  void U16(uint16_t v) { w_.WriteU16(v); }
  void U32(uint32_t v) { w_.WriteU32(v); }
  void U64(uint64_t v) { w_.WriteU64(v); }

  void Str(const char* f, std::string_view v) {
    if (v.size() > kMaxIdentBytes) {
      return Fail(std::string(f) + ": " + std::to_string(v.size()) + " bytes, at most " +
                  std::to_string(kMaxIdentBytes));
    }
    if (!IsValidUtf8(v)) return Fail(std::string(f) + ": not valid UTF-8");
    w_.WriteBytes32(v);
  }
  void Cred(const char* f, std::string_view v, bool allow_empty) {
    if (v.empty() && !allow_empty) return Fail(std::string(f) + ": empty credential");
    if (v.size() > kMaxCredentialBytes) {
      return Fail(std::string(f) + ": " + std::to_string(v.size()) + " bytes, at most " +
                  std::to_string(kMaxCredentialBytes));
    }
    if (!IsValidUtf8(v)) return Fail(std::string(f) + ": not valid UTF-8");
    w_.WriteBytes32(v);
  }
  void Blob(const char* f, Bytes v) {
    if (v.size() > kMaxBodyBytes) {
      return Fail(std::string(f) + ": " + std::to_string(v.size()) +
                  " bytes, above the body limit");
    }
    w_.WriteBytes32(v);
  }
  void Payloads(const std::vector<Bytes>& list) {
    if (list.size() > kMaxBatchPayloads) {
      return Fail("payloads: " + std::to_string(list.size()) + " payloads, at most " +
                  std::to_string(kMaxBatchPayloads));
    }
    U32(static_cast<uint32_t>(list.size()));
    for (auto p : list) Blob("payload", p);
  }
  void Shard(const ShardRef& s) {
    Str("shard.tenant", s.tenant);
    Str("shard.namespace", s.ns);
    Str("shard.stream", s.stream);
    U32(s.shard);
    U64(s.generation);
  }
  void Code(ErrorCode c) {
    auto v = static_cast<uint16_t>(c);
    if (!ValidErrorCode(v)) return Fail("code: unknown error code " + std::to_string(v));
    U16(v);
  }
  void Log(ReplicaLog l) {
    auto v = static_cast<uint8_t>(l);
    if (!ValidLog(v)) return Fail("log: unknown replica log " + std::to_string(v));
    U8(v);
  }
  void Mark(const RecordMark& m) {
    auto t = static_cast<uint8_t>(m.type);
    if (!ValidMark(t)) return Fail("mark: unknown producer mark " + std::to_string(t));
    if (m.type != MarkType::kOpens && (m.producer_id || m.sequence || m.batch_len)) {
      return Fail("mark: producer fields set on a mark that is not Opens");
    }
    U8(static_cast<uint8_t>(t | (m.publisher ? kMarkPublisherBit : 0)));
    if (m.type == MarkType::kOpens) {
      U64(m.producer_id);
      U64(m.sequence);
      U32(m.batch_len);
    }
    if (m.publisher) {
      if (m.publisher->size() > kMaxPublisherBytes) {
        return Fail("mark.publisher: " + std::to_string(m.publisher->size()) +
                    " bytes, at most 255");
      }
      if (!IsValidUtf8(*m.publisher)) return Fail("mark.publisher: not valid UTF-8");
      U8(static_cast<uint8_t>(m.publisher->size()));
      w_.WriteBytes(*m.publisher);
    }
  }

 private:
  ByteWriter w_;
  std::optional<felix::Error> err_;
};

void EncodeRecords(Kind kind, const Records& m, BodyWriter& w) {
  bool marks = HasMarksSection(kind);
  if (marks && m.marks.size() != m.payloads.size()) {
    return w.Fail(std::string(KindName(kind)) + ": needs one mark per payload");
  }
  if (!marks && !m.marks.empty()) {
    return w.Fail(std::string(KindName(kind)) + ": carries no marks section");
  }
  if (HasLogByte(kind) != m.log.has_value()) {
    return w.Fail(std::string(KindName(kind)) +
                  (m.log ? ": carries no log byte" : ": needs a log byte"));
  }
  if (kind == Kind::kReplicateCommittedRecords && !m.commit_offset) {
    return w.Fail("ReplicateCommittedRecords: needs a commit offset");
  }
  if (m.commit_offset && !HasLogByte(kind)) {
    return w.Fail(std::string(KindName(kind)) + ": carries no commit offset");
  }
  if (!IsLabelled(kind) && !m.generations.empty()) {
    return w.Fail(std::string(KindName(kind)) + ": carries no generations");
  }
  if (m.generations.size() > kMaxGenerations) {
    return w.Fail("generations: " + std::to_string(m.generations.size()) + " entries, at most " +
                  std::to_string(kMaxGenerations));
  }
  if (kind == Kind::kReplicateTimedRecords ? m.times.size() != m.payloads.size()
                                           : !m.times.empty()) {
    return w.Fail(std::string(KindName(kind)) + (kind == Kind::kReplicateTimedRecords
                                                     ? ": needs one time per payload"
                                                     : ": carries no times"));
  }
  w.U64(m.correlation_id);
  w.Shard(m.shard);
  w.U64(m.first_offset);
  w.U64(m.checksum);
  w.Payloads(m.payloads);
  if (marks) {
    for (const auto& mark : m.marks) w.Mark(mark);
  }
  if (m.log) w.Log(*m.log);
  if (kind == Kind::kReplicateCommittedRecords) w.U64(*m.commit_offset);
  if (IsLabelled(kind)) {
    w.U8(m.commit_offset ? 1 : 0);
    w.U64(m.commit_offset.value_or(0));
    w.U32(static_cast<uint32_t>(m.generations.size()));
    for (const auto& g : m.generations) {
      w.U64(g.generation);
      w.U64(g.start_offset);
    }
  }
  for (uint64_t t : m.times) w.U64(t);
}

void EncodeCacheOp(Kind kind, const CacheOp& m, BodyWriter& w) {
  bool wants_cred = kind != Kind::kForwardCacheOp;
  bool wants_cond = kind == Kind::kConditionalForwardCacheOp;
  if (wants_cred != m.credential.has_value()) {
    return w.Fail(std::string(KindName(kind)) +
                  (wants_cred ? ": needs a credential" : ": carries no credential"));
  }
  if (wants_cond != m.condition.has_value()) {
    return w.Fail(std::string(KindName(kind)) +
                  (wants_cond ? ": needs a condition" : ": carries no condition"));
  }
  auto op = static_cast<uint8_t>(m.op);
  if (!ValidOp(op)) return w.Fail("op: unknown cache op " + std::to_string(op));
  w.U64(m.correlation_id);
  w.Shard(m.shard);
  w.U8(op);
  w.Str("key", m.key);
  w.U64(m.ttl_ms);
  w.Blob("value", m.value);
  if (m.credential) w.Cred("credential", *m.credential, wants_cond);
  if (m.condition) {
    auto t = static_cast<uint8_t>(m.condition->type);
    if (!ValidCondition(t)) return w.Fail("condition: unknown value " + std::to_string(t));
    if (m.condition->type != CacheCondition::kVersion && m.condition->version != 0) {
      return w.Fail("condition: a version only rides the Version condition");
    }
    w.U8(t);
    if (m.condition->type == CacheCondition::kVersion) w.U64(m.condition->version);
  }
}

void EncodeBody(Kind kind, const Body& body, BodyWriter& w) {
  std::visit(
      [&](const auto& m) {
        using T = std::decay_t<decltype(m)>;
        if constexpr (std::is_same_v<T, ForwardPublish>) {
          bool authorized = kind == Kind::kAuthorizedForwardPublish;
          if (authorized != m.credential.has_value()) {
            return w.Fail(std::string(KindName(kind)) +
                          (authorized ? ": needs a credential" : ": carries no credential"));
          }
          auto ack = static_cast<uint8_t>(m.ack);
          if (!ValidAck(ack)) return w.Fail("ack: unknown ack mode " + std::to_string(ack));
          w.U64(m.correlation_id);
          w.Shard(m.shard);
          w.U8(ack);
          w.Payloads(m.payloads);
          if (m.credential) w.Cred("credential", *m.credential, false);
        } else if constexpr (std::is_same_v<T, ForwardPublishOk>) {
          w.U64(m.correlation_id);
          w.U64(m.first_offset);
          w.U64(m.last_offset);
        } else if constexpr (std::is_same_v<T, ErrorAnswer>) {
          w.U64(m.correlation_id);
          w.Code(m.code);
          w.Str("detail", m.detail);
        } else if constexpr (std::is_same_v<T, NotLeader>) {
          w.U64(m.correlation_id);
          w.Str("node_id", m.node_id);
          w.Str("advertise_addr", m.advertise_addr);
          w.U64(m.generation);
        } else if constexpr (std::is_same_v<T, Hello>) {
          bool capable = kind == Kind::kHelloCapable || kind == Kind::kHelloCapableOk;
          if (capable != m.capabilities.has_value()) {
            return w.Fail(std::string(KindName(kind)) +
                          (capable ? ": needs capabilities" : ": carries no capabilities"));
          }
          w.U64(m.correlation_id);
          w.Str("node_id", m.node_id);
          if (m.capabilities) w.U64(*m.capabilities);
        } else if constexpr (std::is_same_v<T, Records>) {
          EncodeRecords(kind, m, w);
        } else if constexpr (std::is_same_v<T, ReplicateOk>) {
          w.U64(m.correlation_id);
          w.U64(m.durable_offset);
        } else if constexpr (std::is_same_v<T, ReplicateError>) {
          w.U64(m.correlation_id);
          w.Code(m.code);
          w.U64(m.expected_offset);
          w.Str("detail", m.detail);
        } else if constexpr (std::is_same_v<T, Bootstrap>) {
          w.U64(m.correlation_id);
          w.Shard(m.shard);
          w.U64(m.base_offset);
        } else if constexpr (std::is_same_v<T, CacheOp>) {
          EncodeCacheOp(kind, m, w);
        } else if constexpr (std::is_same_v<T, ForwardCacheOk>) {
          w.U64(m.correlation_id);
          w.U8(m.value ? 1 : 0);
          if (m.value) w.Blob("value", *m.value);
        } else if constexpr (std::is_same_v<T, Rebuild>) {
          w.U64(m.correlation_id);
          w.Shard(m.shard);
          w.Log(m.log);
          w.U64(m.base_offset);
        } else if constexpr (std::is_same_v<T, Fence>) {
          w.U64(m.correlation_id);
          w.Shard(m.shard);
          w.Log(m.log);
        } else if constexpr (std::is_same_v<T, FenceOk>) {
          w.U64(m.correlation_id);
          w.U64(m.log_end);
          w.U64(m.commit_offset);
          w.U64(m.last_generation);
        } else if constexpr (std::is_same_v<T, Fetch>) {
          w.U64(m.correlation_id);
          w.Shard(m.shard);
          w.Log(m.log);
          w.U64(m.from_offset);
          w.U32(m.max_bytes);
        } else if constexpr (std::is_same_v<T, ConditionalCacheOk>) {
          w.U64(m.correlation_id);
          w.U8(m.applied ? 1 : 0);
          w.U8(m.version ? 1 : 0);
          if (m.version) w.U64(*m.version);
          w.U8(m.value ? 1 : 0);
          if (m.value) w.Blob("value", *m.value);
        } else {
          static_assert(std::is_same_v<T, PingPong>);
          w.U64(m.correlation_id);
        }
      },
      body);
}

}  // namespace

DecodeResult<Envelope> DecodeEnvelope(std::span<const uint8_t> bytes) {
  ByteReader r(bytes);
  auto magic = r.ReadU32("header.magic");
  if (!magic) return tl::unexpected(magic.error());
  if (*magic != kMagic) {
    return DecodeFail(DecodeErrorCode::kBadMagic, "header.magic: not FLXI");
  }
  auto version = r.ReadU16("header.version");
  if (!version) return tl::unexpected(version.error());
  if (*version != kVersion) {
    return DecodeFail(DecodeErrorCode::kBadVersion,
                      "header.version: " + std::to_string(*version) + ", this build speaks 1");
  }
  auto kind = r.ReadU16("header.kind");
  if (!kind) return tl::unexpected(kind.error());
  auto length = r.ReadU32("header.length");
  if (!length) return tl::unexpected(length.error());
  return Envelope{*kind, *length};
}

DecodeResult<Envelope> DecodeTypedHeader(std::span<const uint8_t> bytes) {
  auto env = DecodeEnvelope(bytes);
  if (!env) return env;
  if (!IsKnownKind(env->kind)) {
    return DecodeFail(DecodeErrorCode::kUnknownKind,
                      "header.kind: unknown internal kind " + std::to_string(env->kind));
  }
  if (env->length > kMaxBodyBytes) {
    return DecodeFail(DecodeErrorCode::kFrameTooLarge,
                      "header.length: " + std::to_string(env->length) + " above " +
                          std::to_string(kMaxBodyBytes));
  }
  return env;
}

DecodeResult<Frame> DecodeBody(Kind kind, std::span<const uint8_t> body) {
  if (!IsKnownKind(static_cast<uint16_t>(kind))) {
    return DecodeFail(DecodeErrorCode::kUnknownKind,
                      "unknown internal kind " + std::to_string(static_cast<uint16_t>(kind)));
  }
  if (body.size() > kMaxBodyBytes) {
    return DecodeFail(DecodeErrorCode::kFrameTooLarge, "body above the limit");
  }
  BodyReader r(body);
  switch (kind) {
    case Kind::kForwardPublish:
    case Kind::kAuthorizedForwardPublish: {
      ForwardPublish m;
      m.correlation_id = r.U64("correlation_id");
      m.shard = r.Shard();
      uint8_t ack = r.U8("ack");
      m.ack = r.Enum<AckMode>(ack, ValidAck(ack), "ack");
      m.payloads = r.Payloads("payloads");
      if (kind == Kind::kAuthorizedForwardPublish) m.credential = r.Cred("credential", false);
      return r.Finish(kind, std::move(m));
    }
    case Kind::kForwardPublishOk: {
      ForwardPublishOk m;
      m.correlation_id = r.U64("correlation_id");
      m.first_offset = r.U64("first_offset");
      m.last_offset = r.U64("last_offset");
      return r.Finish(kind, m);
    }
    case Kind::kForwardPublishError:
    case Kind::kForwardCacheError: {
      ErrorAnswer m;
      m.correlation_id = r.U64("correlation_id");
      m.code = r.Code("code");
      m.detail = r.Str("detail");
      return r.Finish(kind, m);
    }
    case Kind::kNotLeader: {
      NotLeader m;
      m.correlation_id = r.U64("correlation_id");
      m.node_id = r.Str("node_id");
      m.advertise_addr = r.Str("advertise_addr");
      m.generation = r.U64("generation");
      return r.Finish(kind, m);
    }
    case Kind::kHello:
    case Kind::kHelloOk:
    case Kind::kHelloCapable:
    case Kind::kHelloCapableOk: {
      Hello m;
      m.correlation_id = r.U64("correlation_id");
      m.node_id = r.Str("node_id");
      if (kind == Kind::kHelloCapable || kind == Kind::kHelloCapableOk) {
        m.capabilities = r.U64("capabilities");
      }
      return r.Finish(kind, m);
    }
    case Kind::kReplicateRecords:
    case Kind::kReplicateCacheRecords:
    case Kind::kReplicateGroupRecords:
    case Kind::kReplicateDeadLetterRecords:
    case Kind::kReplicateCounterRecords:
    case Kind::kReplicateMarkedRecords:
    case Kind::kReplicateCommittedRecords:
    case Kind::kReplicateLabelledRecords:
    case Kind::kReplicateTimedRecords:
      return r.Finish(kind, DecodeRecords(kind, r));
    case Kind::kReplicateOk: {
      ReplicateOk m;
      m.correlation_id = r.U64("correlation_id");
      m.durable_offset = r.U64("durable_offset");
      return r.Finish(kind, m);
    }
    case Kind::kReplicateError: {
      ReplicateError m;
      m.correlation_id = r.U64("correlation_id");
      m.code = r.Code("code");
      m.expected_offset = r.U64("expected_offset");
      m.detail = r.Str("detail");
      return r.Finish(kind, m);
    }
    case Kind::kReplicateBootstrap:
    case Kind::kReplicateCacheBootstrap:
    case Kind::kReplicateGroupBootstrap:
    case Kind::kReplicateDeadLetterBootstrap:
    case Kind::kReplicateCounterBootstrap: {
      Bootstrap m;
      m.correlation_id = r.U64("correlation_id");
      m.shard = r.Shard();
      m.base_offset = r.U64("base_offset");
      return r.Finish(kind, m);
    }
    case Kind::kForwardCacheOp:
    case Kind::kAuthorizedForwardCacheOp:
    case Kind::kConditionalForwardCacheOp:
      return r.Finish(kind, DecodeCacheOp(kind, r));
    case Kind::kForwardCacheOk: {
      ForwardCacheOk m;
      m.correlation_id = r.U64("correlation_id");
      if (r.Bool("present")) m.value = r.Blob("value");
      return r.Finish(kind, m);
    }
    case Kind::kReplicateRebuild: {
      Rebuild m;
      m.correlation_id = r.U64("correlation_id");
      m.shard = r.Shard();
      m.log = r.Log("log");
      m.base_offset = r.U64("base_offset");
      return r.Finish(kind, m);
    }
    case Kind::kFence: {
      Fence m;
      m.correlation_id = r.U64("correlation_id");
      m.shard = r.Shard();
      m.log = r.Log("log");
      return r.Finish(kind, m);
    }
    case Kind::kFenceOk: {
      FenceOk m;
      m.correlation_id = r.U64("correlation_id");
      m.log_end = r.U64("log_end");
      m.commit_offset = r.U64("commit_offset");
      m.last_generation = r.U64("last_generation");
      return r.Finish(kind, m);
    }
    case Kind::kReplicateFetch:
    case Kind::kReplicateLabelledFetch:
    case Kind::kReplicateTimedFetch: {
      Fetch m;
      m.correlation_id = r.U64("correlation_id");
      m.shard = r.Shard();
      m.log = r.Log("log");
      m.from_offset = r.U64("from_offset");
      m.max_bytes = r.U32("max_bytes");
      return r.Finish(kind, m);
    }
    case Kind::kConditionalForwardCacheOk: {
      ConditionalCacheOk m;
      m.correlation_id = r.U64("correlation_id");
      m.applied = r.Bool("applied");
      if (r.Bool("version_present")) m.version = r.U64("version");
      if (r.Bool("value_present")) m.value = r.Blob("value");
      return r.Finish(kind, m);
    }
    case Kind::kPing:
    case Kind::kPong: {
      PingPong m;
      m.correlation_id = r.U64("correlation_id");
      return r.Finish(kind, m);
    }
  }
  return DecodeFail(DecodeErrorCode::kUnknownKind, "unknown internal kind");
}

DecodeResult<Frame> DecodeFrame(std::span<const uint8_t> bytes) {
  auto header = DecodeTypedHeader(bytes);
  if (!header) return tl::unexpected(header.error());
  size_t have = bytes.size() - kHeaderBytes;
  if (have < header->length) {
    return DecodeFail(DecodeErrorCode::kIncomplete,
                      "body: header says " + std::to_string(header->length) + " bytes, " +
                          std::to_string(have) + " present");
  }
  if (have > header->length) {
    return DecodeFail(DecodeErrorCode::kTrailingBytes,
                      "frame: " + std::to_string(have - header->length) +
                          " bytes after the body the header declares");
  }
  return DecodeBody(static_cast<Kind>(header->kind), bytes.subspan(kHeaderBytes, header->length));
}

Result<std::vector<uint8_t>> EncodeFrame(const Frame& frame) {
  auto raw_kind = static_cast<uint16_t>(frame.kind);
  if (!IsKnownKind(raw_kind)) {
    return felix::Fail(felix::ErrorCode::kInvalidArgument,
                       "kind: unknown internal kind " + std::to_string(raw_kind));
  }
  if (frame.body.index() != BodyIndexForKind(frame.kind)) {
    return felix::Fail(
        felix::ErrorCode::kInvalidArgument,
        std::string(KindName(frame.kind)) + ": body does not match the kind's layout");
  }
  std::vector<uint8_t> out;
  out.reserve(64);
  ByteWriter header(out);
  header.WriteU32(kMagic);
  header.WriteU16(kVersion);
  header.WriteU16(raw_kind);
  header.WriteU32(0);  // patched below
  BodyWriter w(out);
  EncodeBody(frame.kind, frame.body, w);
  if (!w.ok()) return tl::unexpected(w.error());
  size_t body = out.size() - kHeaderBytes;
  if (body > kMaxBodyBytes) {
    return felix::Fail(
        felix::ErrorCode::kInvalidArgument,
        "body: " + std::to_string(body) + " bytes above " + std::to_string(kMaxBodyBytes));
  }
  header.PatchU32(8, static_cast<uint32_t>(body));
  return out;
}

uint64_t CorrelationId(const Frame& frame) {
  return std::visit([](const auto& m) { return m.correlation_id; }, frame.body);
}

uint64_t CorrelationIdOfBody(std::span<const uint8_t> body) {
  if (body.size() < 8) return 0;
  uint64_t v = 0;
  for (size_t i = 0; i < 8; ++i) v = (v << 8) | body[i];
  return v;
}

std::string UnsupportedKindDetail(uint16_t kind) {
  return "this broker does not know frame kind " + std::to_string(kind);
}

std::vector<uint8_t> EncodeUnsupportedKindAnswer(uint16_t kind, std::span<const uint8_t> body) {
  std::string detail = UnsupportedKindDetail(kind);  // ≤ 45 bytes: always encodable
  Frame f{Kind::kForwardPublishError,
          ErrorAnswer{CorrelationIdOfBody(body), ErrorCode::kUnsupportedKind, detail}};
  return *EncodeFrame(f);
}

bool HasAnyMark(std::span<const RecordMark> marks) {
  for (const auto& m : marks) {
    if (m.type != MarkType::kNone || m.publisher) return true;
  }
  return false;
}

uint64_t BatchChecksum(std::span<const Bytes> payloads, std::span<const RecordMark> marks) {
  // ISA-L's reflected CRC-32 is zlib's crc32 (same polynomial, init and chaining) computed with
  // carry-less multiplication; on the replication path this checksum is run twice per batch
  // (leader encode, follower verify) over every payload byte, so the speed matters.
  uint32_t crc = 0;
  auto feed = [&crc](const void* p, size_t n) {
    crc = crc32_gzip_refl(crc, static_cast<const unsigned char*>(p), n);
  };
  for (auto p : payloads) {
    const auto n = static_cast<uint32_t>(p.size());
    const unsigned char len_be[4] = {
        static_cast<unsigned char>(n >> 24), static_cast<unsigned char>(n >> 16),
        static_cast<unsigned char>(n >> 8), static_cast<unsigned char>(n)};
    feed(len_be, sizeof len_be);
    feed(p.data(), p.size());
  }
  if (HasAnyMark(marks)) {
    std::vector<uint8_t> buf;
    ByteWriter w(buf);
    for (const auto& m : marks) {
      w.WriteU8(static_cast<uint8_t>(static_cast<uint8_t>(m.type) |
                                     (m.publisher ? kMarkPublisherBit : 0)));
      if (m.type == MarkType::kOpens) {
        w.WriteU64(m.producer_id);
        w.WriteU64(m.sequence);
        w.WriteU32(m.batch_len);
      }
      if (m.publisher) {
        auto pub = m.publisher->substr(0, kMaxPublisherBytes);
        w.WriteU8(static_cast<uint8_t>(pub.size()));
        w.WriteBytes(pub);
      }
    }
    feed(buf.data(), buf.size());
  }
  return static_cast<uint64_t>(crc);
}

std::string EncodeCounterValue(int64_t v) {
  std::string out(8, '\0');
  auto u = static_cast<uint64_t>(v);
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>(u >> (56 - 8 * i));
  return out;
}

DecodeResult<int64_t> DecodeCounterValue(Bytes value) {
  if (value.size() != 8) {
    return DecodeFail(DecodeErrorCode::kInvalidValue,
                      "counter value: " + std::to_string(value.size()) + " bytes, needs 8");
  }
  uint64_t u = 0;
  for (char c : value) u = (u << 8) | static_cast<uint8_t>(c);
  return static_cast<int64_t>(u);
}

}  // namespace felix::wire::flxi
