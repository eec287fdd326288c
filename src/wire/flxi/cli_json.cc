#include "wire/flxi/cli_json.h"

#include <deque>
#include <initializer_list>
#include <set>
#include <stdexcept>
#include <utility>

#include <nlohmann/json.hpp>

namespace felix::wire::flxi {
namespace {

using Json = nlohmann::ordered_json;

constexpr char kHexDigits[] = "0123456789abcdef";

std::string ToHex(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size() * 2);
  for (char c : bytes) {
    auto b = static_cast<uint8_t>(c);
    out.push_back(kHexDigits[b >> 4]);
    out.push_back(kHexDigits[b & 0xF]);
  }
  return out;
}

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// Hex → bytes; `lenient` skips ASCII whitespace between digits.
std::optional<std::string> FromHex(std::string_view hex, bool lenient) {
  std::string out;
  out.reserve(hex.size() / 2);
  int high = -1;
  for (char c : hex) {
    if (lenient && (c == ' ' || c == '\n' || c == '\r' || c == '\t')) continue;
    int v = HexValue(c);
    if (v < 0) return std::nullopt;
    if (high < 0) {
      high = v;
    } else {
      out.push_back(static_cast<char>((high << 4) | v));
      high = -1;
    }
  }
  if (high >= 0) return std::nullopt;
  return out;
}

// ---- rendering ----

Json ShardJson(const ShardRef& s) {
  Json j;
  j["tenant"] = s.tenant;
  j["namespace"] = s.ns;
  j["stream"] = s.stream;
  j["shard"] = s.shard;
  j["generation"] = s.generation;
  return j;
}

Json PayloadsJson(const std::vector<Bytes>& payloads) {
  Json a = Json::array();
  for (auto p : payloads) a.push_back(ToHex(p));
  return a;
}

Json OptBytes(const std::optional<Bytes>& v) {
  return v ? Json(ToHex(*v)) : Json(nullptr);
}

Json Render(const Frame& frame) {
  Json j;
  j["kind"] = KindName(frame.kind);
  std::visit(
      [&](const auto& m) {
        using T = std::decay_t<decltype(m)>;
        j["correlation_id"] = m.correlation_id;
        if constexpr (std::is_same_v<T, ForwardPublish>) {
          j["shard"] = ShardJson(m.shard);
          j["ack"] = AckModeName(m.ack);
          j["payloads"] = PayloadsJson(m.payloads);
          if (m.credential) j["credential"] = *m.credential;
        } else if constexpr (std::is_same_v<T, ForwardPublishOk>) {
          j["first_offset"] = m.first_offset;
          j["last_offset"] = m.last_offset;
        } else if constexpr (std::is_same_v<T, ErrorAnswer>) {
          j["code"] = ErrorCodeName(m.code);
          j["detail"] = m.detail;
        } else if constexpr (std::is_same_v<T, NotLeader>) {
          j["node_id"] = m.node_id;
          j["advertise_addr"] = m.advertise_addr;
          j["generation"] = m.generation;
        } else if constexpr (std::is_same_v<T, Hello>) {
          j["node_id"] = m.node_id;
          if (m.capabilities) j["capabilities"] = *m.capabilities;
        } else if constexpr (std::is_same_v<T, Records>) {
          j["shard"] = ShardJson(m.shard);
          j["first_offset"] = m.first_offset;
          j["checksum"] = m.checksum;
          j["payloads"] = PayloadsJson(m.payloads);
          bool marks = frame.kind == Kind::kReplicateMarkedRecords ||
                       frame.kind == Kind::kReplicateCommittedRecords ||
                       frame.kind == Kind::kReplicateLabelledRecords ||
                       frame.kind == Kind::kReplicateTimedRecords;
          bool labelled = frame.kind == Kind::kReplicateLabelledRecords ||
                          frame.kind == Kind::kReplicateTimedRecords;
          if (marks) {
            Json a = Json::array();
            for (const auto& mark : m.marks) {
              Json e;
              e["type"] = MarkTypeName(mark.type);
              if (mark.type == MarkType::kOpens) {
                e["producer_id"] = mark.producer_id;
                e["sequence"] = mark.sequence;
                e["batch_len"] = mark.batch_len;
              }
              e["publisher"] = mark.publisher ? Json(*mark.publisher) : Json(nullptr);
              a.push_back(std::move(e));
            }
            j["marks"] = std::move(a);
          }
          if (m.log) j["log"] = ReplicaLogName(*m.log);
          if (frame.kind == Kind::kReplicateCommittedRecords || labelled) {
            j["commit_offset"] = m.commit_offset ? Json(*m.commit_offset) : Json(nullptr);
          }
          if (labelled) {
            Json a = Json::array();
            for (const auto& g : m.generations) {
              Json e;
              e["generation"] = g.generation;
              e["start_offset"] = g.start_offset;
              a.push_back(std::move(e));
            }
            j["generations"] = std::move(a);
          }
          if (frame.kind == Kind::kReplicateTimedRecords) j["times"] = m.times;
        } else if constexpr (std::is_same_v<T, ReplicateOk>) {
          j["durable_offset"] = m.durable_offset;
        } else if constexpr (std::is_same_v<T, ReplicateError>) {
          j["code"] = ErrorCodeName(m.code);
          j["expected_offset"] = m.expected_offset;
          j["detail"] = m.detail;
        } else if constexpr (std::is_same_v<T, Bootstrap>) {
          j["shard"] = ShardJson(m.shard);
          j["base_offset"] = m.base_offset;
        } else if constexpr (std::is_same_v<T, CacheOp>) {
          j["shard"] = ShardJson(m.shard);
          j["op"] = CacheOpKindName(m.op);
          j["key"] = m.key;
          j["ttl_ms"] = m.ttl_ms;
          j["value"] = ToHex(m.value);
          if (m.credential) j["credential"] = *m.credential;
          if (m.condition) {
            Json c;
            c["type"] = CacheConditionName(m.condition->type);
            if (m.condition->type == CacheCondition::kVersion) c["version"] = m.condition->version;
            j["condition"] = std::move(c);
          }
        } else if constexpr (std::is_same_v<T, ForwardCacheOk>) {
          j["value"] = OptBytes(m.value);
        } else if constexpr (std::is_same_v<T, Rebuild>) {
          j["shard"] = ShardJson(m.shard);
          j["log"] = ReplicaLogName(m.log);
          j["base_offset"] = m.base_offset;
        } else if constexpr (std::is_same_v<T, Fence>) {
          j["shard"] = ShardJson(m.shard);
          j["log"] = ReplicaLogName(m.log);
        } else if constexpr (std::is_same_v<T, FenceOk>) {
          j["log_end"] = m.log_end;
          j["commit_offset"] = m.commit_offset;
          j["last_generation"] = m.last_generation;
        } else if constexpr (std::is_same_v<T, Fetch>) {
          j["shard"] = ShardJson(m.shard);
          j["log"] = ReplicaLogName(m.log);
          j["from_offset"] = m.from_offset;
          j["max_bytes"] = m.max_bytes;
        } else if constexpr (std::is_same_v<T, ConditionalCacheOk>) {
          j["applied"] = m.applied;
          j["version"] = m.version ? Json(*m.version) : Json(nullptr);
          j["value"] = OptBytes(m.value);
        }
      },
      frame.body);
  return j;
}

// ---- parsing ----

// Thrown only inside this file and caught by the entry point.
struct ShapeError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Storage for what parsed frames view (decoded hex bytes).
using Arena = std::deque<std::string>;

// Accessor over one JSON object that refuses missing, mistyped and unknown keys.
class Obj {
 public:
  Obj(const Json& j, std::string path) : j_(j), path_(std::move(path)) {
    if (!j_.is_object()) throw ShapeError(path_ + ": expected an object");
  }

  const Json& Get(const std::string& key) {
    seen_.insert(key);
    auto it = j_.find(key);
    if (it == j_.end()) throw ShapeError(path_ + key + ": missing");
    return *it;
  }
  bool IsNull(const std::string& key) { return Get(key).is_null(); }

  uint64_t U64(const std::string& key, uint64_t max = UINT64_MAX) {
    const Json& v = Get(key);
    if (!v.is_number_unsigned()) throw ShapeError(path_ + key + ": expected an unsigned integer");
    auto n = v.get<uint64_t>();
    if (n > max) throw ShapeError(path_ + key + ": above " + std::to_string(max));
    return n;
  }
  bool Bool(const std::string& key) {
    const Json& v = Get(key);
    if (!v.is_boolean()) throw ShapeError(path_ + key + ": expected a boolean");
    return v.get<bool>();
  }
  std::string_view Str(const std::string& key) {
    const Json& v = Get(key);
    if (!v.is_string()) throw ShapeError(path_ + key + ": expected a string");
    return v.get_ref<const std::string&>();
  }
  std::optional<std::string_view> OptStr(const std::string& key) {
    if (IsNull(key)) return std::nullopt;
    return Str(key);
  }
  Bytes Hex(const std::string& key, Arena& arena) { return HexOf(Get(key), key, arena); }
  std::optional<Bytes> OptHex(const std::string& key, Arena& arena) {
    if (IsNull(key)) return std::nullopt;
    return Hex(key, arena);
  }
  Bytes HexOf(const Json& v, const std::string& key, Arena& arena) {
    if (!v.is_string()) throw ShapeError(path_ + key + ": expected a hex string");
    auto bytes = FromHex(v.get_ref<const std::string&>(), false);
    if (!bytes) throw ShapeError(path_ + key + ": not hex");
    arena.push_back(std::move(*bytes));
    return arena.back();
  }
  template <typename E>
  E Enum(const std::string& key, std::optional<E> (*from)(std::string_view)) {
    auto name = Str(key);
    auto v = from(name);
    if (!v) throw ShapeError(path_ + key + ": unknown value \"" + std::string(name) + "\"");
    return *v;
  }
  const Json& Array(const std::string& key) {
    const Json& v = Get(key);
    if (!v.is_array()) throw ShapeError(path_ + key + ": expected an array");
    return v;
  }

  // Refuses keys nobody asked for.
  void Done() {
    for (const auto& item : j_.items()) {
      if (!seen_.count(item.key())) throw ShapeError(path_ + item.key() + ": unknown field");
    }
  }

  const std::string& path() const { return path_; }

 private:
  const Json& j_;
  std::string path_;
  std::set<std::string> seen_;
};

ShardRef ParseShard(const Json& j) {
  Obj o(j, "shard.");
  ShardRef s;
  s.tenant = o.Str("tenant");
  s.ns = o.Str("namespace");
  s.stream = o.Str("stream");
  s.shard = static_cast<uint32_t>(o.U64("shard", UINT32_MAX));
  s.generation = o.U64("generation");
  o.Done();
  return s;
}

std::vector<Bytes> ParsePayloads(Obj& o, Arena& arena) {
  std::vector<Bytes> out;
  for (const auto& p : o.Array("payloads")) out.push_back(o.HexOf(p, "payloads[]", arena));
  return out;
}

Frame Parse(const Json& root, Arena& arena) {
  Obj o(root, "");
  auto kind = o.Enum<Kind>("kind", &KindFromName);
  uint64_t corr = o.U64("correlation_id");
  Frame f;
  f.kind = kind;
  switch (BodyIndexForKind(kind)) {
    case 0: {
      ForwardPublish m;
      m.correlation_id = corr;
      m.shard = ParseShard(o.Get("shard"));
      m.ack = o.Enum<AckMode>("ack", &AckModeFromName);
      m.payloads = ParsePayloads(o, arena);
      if (kind == Kind::kAuthorizedForwardPublish) m.credential = o.Str("credential");
      f.body = std::move(m);
      break;
    }
    case 1:
      f.body = ForwardPublishOk{corr, o.U64("first_offset"), o.U64("last_offset")};
      break;
    case 2: {
      ErrorAnswer m{corr, o.Enum<ErrorCode>("code", &ErrorCodeFromName), o.Str("detail")};
      f.body = m;
      break;
    }
    case 3: {
      NotLeader m;
      m.correlation_id = corr;
      m.node_id = o.Str("node_id");
      m.advertise_addr = o.Str("advertise_addr");
      m.generation = o.U64("generation");
      f.body = m;
      break;
    }
    case 4: {
      Hello m;
      m.correlation_id = corr;
      m.node_id = o.Str("node_id");
      if (kind == Kind::kHelloCapable || kind == Kind::kHelloCapableOk) {
        m.capabilities = o.U64("capabilities");
      }
      f.body = m;
      break;
    }
    case 5: {
      Records m;
      m.correlation_id = corr;
      m.shard = ParseShard(o.Get("shard"));
      m.first_offset = o.U64("first_offset");
      m.checksum = o.U64("checksum");
      m.payloads = ParsePayloads(o, arena);
      bool labelled =
          kind == Kind::kReplicateLabelledRecords || kind == Kind::kReplicateTimedRecords;
      bool committed = kind == Kind::kReplicateCommittedRecords;
      if (kind == Kind::kReplicateMarkedRecords || committed || labelled) {
        for (const auto& e : o.Array("marks")) {
          Obj mo(e, "marks[].");
          RecordMark mark;
          mark.type = mo.Enum<MarkType>("type", &MarkTypeFromName);
          if (mark.type == MarkType::kOpens) {
            mark.producer_id = mo.U64("producer_id");
            mark.sequence = mo.U64("sequence");
            mark.batch_len = static_cast<uint32_t>(mo.U64("batch_len", UINT32_MAX));
          }
          mark.publisher = mo.OptStr("publisher");
          mo.Done();
          m.marks.push_back(mark);
        }
      }
      if (committed || labelled) {
        m.log = o.Enum<ReplicaLog>("log", &ReplicaLogFromName);
        if (committed || !o.IsNull("commit_offset")) m.commit_offset = o.U64("commit_offset");
      }
      if (labelled) {
        for (const auto& e : o.Array("generations")) {
          Obj go(e, "generations[].");
          m.generations.push_back({go.U64("generation"), go.U64("start_offset")});
          go.Done();
        }
      }
      if (kind == Kind::kReplicateTimedRecords) {
        for (const auto& t : o.Array("times")) {
          if (!t.is_number_unsigned()) throw ShapeError("times[]: expected an unsigned integer");
          m.times.push_back(t.get<uint64_t>());
        }
      }
      f.body = std::move(m);
      break;
    }
    case 6:
      f.body = ReplicateOk{corr, o.U64("durable_offset")};
      break;
    case 7: {
      ReplicateError m;
      m.correlation_id = corr;
      m.code = o.Enum<ErrorCode>("code", &ErrorCodeFromName);
      m.expected_offset = o.U64("expected_offset");
      m.detail = o.Str("detail");
      f.body = m;
      break;
    }
    case 8: {
      Bootstrap m;
      m.correlation_id = corr;
      m.shard = ParseShard(o.Get("shard"));
      m.base_offset = o.U64("base_offset");
      f.body = m;
      break;
    }
    case 9: {
      CacheOp m;
      m.correlation_id = corr;
      m.shard = ParseShard(o.Get("shard"));
      m.op = o.Enum<CacheOpKind>("op", &CacheOpKindFromName);
      m.key = o.Str("key");
      m.ttl_ms = o.U64("ttl_ms");
      m.value = o.Hex("value", arena);
      if (kind != Kind::kForwardCacheOp) m.credential = o.Str("credential");
      if (kind == Kind::kConditionalForwardCacheOp) {
        Obj co(o.Get("condition"), "condition.");
        Condition c;
        c.type = co.Enum<CacheCondition>("type", &CacheConditionFromName);
        if (c.type == CacheCondition::kVersion) c.version = co.U64("version");
        co.Done();
        m.condition = c;
      }
      f.body = m;
      break;
    }
    case 10:
      f.body = ForwardCacheOk{corr, o.OptHex("value", arena)};
      break;
    case 11: {
      Rebuild m;
      m.correlation_id = corr;
      m.shard = ParseShard(o.Get("shard"));
      m.log = o.Enum<ReplicaLog>("log", &ReplicaLogFromName);
      m.base_offset = o.U64("base_offset");
      f.body = m;
      break;
    }
    case 12: {
      Fence m;
      m.correlation_id = corr;
      m.shard = ParseShard(o.Get("shard"));
      m.log = o.Enum<ReplicaLog>("log", &ReplicaLogFromName);
      f.body = m;
      break;
    }
    case 13:
      f.body = FenceOk{corr, o.U64("log_end"), o.U64("commit_offset"), o.U64("last_generation")};
      break;
    case 14: {
      Fetch m;
      m.correlation_id = corr;
      m.shard = ParseShard(o.Get("shard"));
      m.log = o.Enum<ReplicaLog>("log", &ReplicaLogFromName);
      m.from_offset = o.U64("from_offset");
      m.max_bytes = static_cast<uint32_t>(o.U64("max_bytes", UINT32_MAX));
      f.body = m;
      break;
    }
    case 15: {
      ConditionalCacheOk m;
      m.correlation_id = corr;
      m.applied = o.Bool("applied");
      if (!o.IsNull("version")) m.version = o.U64("version");
      m.value = o.OptHex("value", arena);
      f.body = m;
      break;
    }
    default:
      f.body = PingPong{corr};
      break;
  }
  o.Done();
  return f;
}

}  // namespace

Result<std::string> FrameToCanonicalJson(const Frame& frame) {
  if (!IsKnownKind(static_cast<uint16_t>(frame.kind)) ||
      frame.body.index() != BodyIndexForKind(frame.kind)) {
    return felix::Fail(felix::ErrorCode::kInvalidArgument, "body does not match the kind");
  }
  try {
    return Render(frame).dump();
  } catch (const nlohmann::json::exception& e) {
    return felix::Fail(felix::ErrorCode::kInvalidArgument, std::string("json: ") + e.what());
  }
}

DecodeResult<std::string> FlxiHexToCanonicalJson(std::string_view hex) {
  auto bytes = FromHex(hex, true);
  if (!bytes) return DecodeFail(DecodeErrorCode::kInvalidValue, "input is not hex");
  std::span<const uint8_t> span(reinterpret_cast<const uint8_t*>(bytes->data()), bytes->size());
  auto frame = DecodeFrame(span);
  if (!frame) return tl::unexpected(frame.error());
  auto json = FrameToCanonicalJson(*frame);
  if (!json) return DecodeFail(DecodeErrorCode::kInvalidValue, json.error().message);
  return *json;
}

Result<std::string> FlxiCanonicalJsonToHex(std::string_view json) {
  Arena arena;
  Frame frame;
  try {
    Json root = Json::parse(json.begin(), json.end());
    frame = Parse(root, arena);
    auto bytes = EncodeFrame(frame);
    if (!bytes) return tl::unexpected(bytes.error());
    return ToHex(std::string_view(reinterpret_cast<const char*>(bytes->data()), bytes->size()));
  } catch (const nlohmann::json::exception& e) {
    return felix::Fail(felix::ErrorCode::kInvalidArgument, std::string("json: ") + e.what());
  } catch (const ShapeError& e) {
    return felix::Fail(felix::ErrorCode::kInvalidArgument, e.what());
  }
}

}  // namespace felix::wire::flxi
