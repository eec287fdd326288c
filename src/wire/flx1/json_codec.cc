#include "wire/flx1/json_codec.h"

#include <array>
#include <charconv>
#include <concepts>
#include <limits>
#include <type_traits>
#include <utility>

#include "wire/byte_reader.h"
#include "wire/flx1/base64.h"
#include "wire/flx1/json_flat_object.h"

namespace felix::wire::flx1 {

std::string_view MessageType(const Message& message) {
  return std::visit(
      [](const auto& m) -> std::string_view {
        using T = std::decay_t<decltype(m)>;
        if constexpr (std::is_same_v<T, UnknownMessage>) {
          return m.type;
        } else {
          return T::kType;
        }
      },
      message);
}

size_t JsonNestingDepth(std::string_view text) {
  size_t depth = 0;
  size_t max_depth = 0;
  bool in_string = false;
  bool escaped = false;
  for (char c : text) {
    if (in_string) {
      if (escaped) {
        escaped = false;
      } else if (c == '\\') {
        escaped = true;
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    if (c == '"') {
      in_string = true;
    } else if (c == '{' || c == '[') {
      if (++depth > max_depth) max_depth = depth;
    } else if ((c == '}' || c == ']') && depth > 0) {
      --depth;
    }
  }
  return max_depth;
}

namespace {

// A struct that lists its fields with Fields(self, visitor).
struct AnyVisitor {
  template <class... A>
  void operator()(A&&...) {}
};
template <class T>
concept Record = requires(T& t, AnyVisitor& v) {
  T::Fields(t, v);
};

template <class T>
struct IsOptional : std::false_type {};
template <class T>
struct IsOptional<std::optional<T>> : std::true_type {};

template <class T>
struct IsVector : std::false_type {};
template <class T>
struct IsVector<std::vector<T>> : std::true_type {};

template <class T>
concept UnsignedInt =
    std::same_as<T, uint16_t> || std::same_as<T, uint32_t> || std::same_as<T, uint64_t>;

// ---------------------------------------------------------------------------------------------
// Writing

class JsonWriter {
 public:
  JsonWriter(std::string& out, bool canonical) : out_(out), canonical_(canonical) {}

  template <class T>
  void operator()(const char* name, const T& value, unsigned options = kPlain) {
    if (error) return;
    if constexpr (IsOptional<T>::value) {
      if (!value) {
        if (canonical_ || (options & kEmitNull)) {
          Key(name);
          out_ += "null";
        }
        return;
      }
      Key(name);
      Value(*value);
    } else {
      if constexpr (std::is_same_v<T, bool>) {
        if ((options & kOmitFalse) && !value && !canonical_) return;
      }
      Key(name);
      Value(value);
    }
  }

  template <class T>
  void Object(const T& record, std::string_view type) {
    out_ += '{';
    if (!type.empty()) {
      Key("type");
      String(type);
    }
    T::Fields(record, *this);
    out_ += '}';
  }

  std::optional<std::string> error;

 private:
  void Key(const char* name) {
    if (!first_) out_ += ',';
    first_ = false;
    out_ += '"';
    out_ += name;
    out_ += "\":";
  }

  void String(std::string_view s) {
    if (!IsValidUtf8(s)) {
      if (!error) error = "string is not valid UTF-8";
      return;
    }
    static constexpr char kHex[] = "0123456789abcdef";
    out_ += '"';
    // Characters that need no escape (nearly all: base64 payloads, names, tokens) are appended
    // a run at a time rather than one by one.
    size_t run = 0;
    for (size_t i = 0; i < s.size(); ++i) {
      const auto c = static_cast<unsigned char>(s[i]);
      if (c >= 0x20 && c != '"' && c != '\\') continue;
      out_.append(s.data() + run, i - run);
      run = i + 1;
      switch (c) {
        case '"':
          out_ += "\\\"";
          break;
        case '\\':
          out_ += "\\\\";
          break;
        case '\b':
          out_ += "\\b";
          break;
        case '\f':
          out_ += "\\f";
          break;
        case '\n':
          out_ += "\\n";
          break;
        case '\r':
          out_ += "\\r";
          break;
        case '\t':
          out_ += "\\t";
          break;
        default:  // the other control characters
          out_ += "\\u00";
          out_ += kHex[c >> 4];
          out_ += kHex[c & 0xF];
      }
    }
    out_.append(s.data() + run, s.size() - run);
    out_ += '"';
  }

  template <class I>
  void Integer(I v) {
    char buf[24];
    auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v);
    (void)ec;
    out_.append(buf, end);
  }

  void Value(const std::string& s) { String(s); }
  void Value(std::string_view s) { String(s); }
  void Value(const Bytes& b) { Value(std::span<const uint8_t>(b)); }
  void Value(std::span<const uint8_t> b) {
    out_ += '"';
    AppendBase64(b, out_);
    out_ += '"';
  }
  void Value(bool b) { out_ += b ? "true" : "false"; }
  void Value(uint16_t v) { Integer(v); }
  void Value(uint32_t v) { Integer(v); }
  void Value(uint64_t v) { Integer(v); }
  void Value(int64_t v) { Integer(v); }
  void Value(AckMode m) {
    switch (m) {
      case AckMode::kNone:
        String("none");
        return;
      case AckMode::kPerMessage:
        String("per_message");
        return;
      case AckMode::kPerBatch:
        String("per_batch");
        return;
    }
    if (!error) error = "ack mode out of range";
  }
  void Value(ShardKind k) { String(k == ShardKind::kCache ? "cache" : "stream"); }
  void Value(ShardRouting r) { String(r == ShardRouting::kJumpHash ? "jump_hash" : "modulo"); }
  void Value(CursorErrorReason r) {
    String(r == CursorErrorReason::kInFuture ? "in_future" : "too_old");
  }
  void Value(const StartPosition& p) {
    switch (p.kind) {
      case StartPosition::Kind::kLatest:
        String("latest");
        return;
      case StartPosition::Kind::kEarliest:
        String("earliest");
        return;
      case StartPosition::Kind::kOffset:
        out_ += "{\"offset\":";
        Integer(p.offset);
        out_ += '}';
        return;
    }
  }
  void Value(const CacheCondition& c) {
    if (c.kind == CacheCondition::Kind::kAbsent) {
      String("absent");
    } else {
      out_ += "{\"version\":";
      Integer(c.version);
      out_ += '}';
    }
  }
  void Value(const StateChange& c) {
    out_ += "{\"op\":";
    if (c.op == StateChange::Op::kPut) {
      out_ += "\"put\",\"key\":";
      String(c.key);
      out_ += ",\"value\":";
      Value(c.value);
    } else {
      out_ += "\"delete\",\"key\":";
      String(c.key);
    }
    out_ += '}';
  }
  void Value(const PublishRefusalReason& r) {
    using K = PublishRefusalReason::Kind;
    switch (r.kind) {
      case K::kSequenceGap:
        out_ += "{\"sequence_gap\":{\"expected\":";
        Integer(r.expected);
        out_ += "}}";
        return;
      case K::kUnknownProducer:
        String("unknown_producer");
        return;
      case K::kSequenceExpired:
        String("sequence_expired");
        return;
      case K::kSequenceReused:
        String("sequence_reused");
        return;
      case K::kOffsetMismatch:
        out_ += "{\"offset_mismatch\":{\"tail\":";
        Integer(r.tail);
        out_ += "}}";
        return;
      case K::kNotLeader: {
        out_ += "{\"not_leader\":{";
        JsonWriter inner(out_, canonical_);
        inner("node_id", r.node_id);
        inner("addr", r.addr);
        if (inner.error && !error) error = inner.error;
        out_ += "}}";
        return;
      }
    }
  }
  void Value(const JsonValue& j) {
    try {
      out_ += j.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::strict);
    } catch (const nlohmann::json::exception& e) {
      if (!error) error = std::string("opaque JSON: ") + e.what();
    }
  }
  template <class T>
  void Value(const std::vector<T>& items) {
    Value(std::span<const T>(items));
  }
  template <class T>
  void Value(std::span<const T> items) {
    out_ += '[';
    bool first = true;
    for (const auto& item : items) {
      if (!first) out_ += ',';
      first = false;
      Value(item);
    }
    out_ += ']';
  }
  template <Record T>
  void Value(const T& record) {
    JsonWriter inner(out_, canonical_);
    inner.Object(record, {});
    if (inner.error && !error) error = inner.error;
  }

  std::string& out_;
  bool canonical_;
  bool first_ = true;
};

// ---------------------------------------------------------------------------------------------
// Reading

tl::unexpected<DecodeError> Bad(DecodeErrorCode code, const std::string& path,
                                const std::string& what) {
  return DecodeFail(code, path + ": " + what);
}

DecodeResult<void> ReadValue(const JsonValue& j, std::string& out, const std::string& path);
DecodeResult<void> ReadValue(const JsonValue& j, Bytes& out, const std::string& path);
DecodeResult<void> ReadValue(const JsonValue& j, bool& out, const std::string& path);
DecodeResult<void> ReadValue(const JsonValue& j, int64_t& out, const std::string& path);
DecodeResult<void> ReadValue(const JsonValue& j, AckMode& out, const std::string& path);
DecodeResult<void> ReadValue(const JsonValue& j, ShardKind& out, const std::string& path);
DecodeResult<void> ReadValue(const JsonValue& j, ShardRouting& out, const std::string& path);
DecodeResult<void> ReadValue(const JsonValue& j, CursorErrorReason& out, const std::string& path);
DecodeResult<void> ReadValue(const JsonValue& j, StartPosition& out, const std::string& path);
DecodeResult<void> ReadValue(const JsonValue& j, CacheCondition& out, const std::string& path);
DecodeResult<void> ReadValue(const JsonValue& j, StateChange& out, const std::string& path);
DecodeResult<void> ReadValue(const JsonValue& j, PublishRefusalReason& out,
                             const std::string& path);
DecodeResult<void> ReadValue(const JsonValue& j, JsonValue& out, const std::string& path);
template <UnsignedInt U>
DecodeResult<void> ReadValue(const JsonValue& j, U& out, const std::string& path);
template <class T>
DecodeResult<void> ReadValue(const JsonValue& j, std::vector<T>& out, const std::string& path);
template <Record T>
DecodeResult<void> ReadValue(const JsonValue& j, T& out, const std::string& path);

class JsonReader {
 public:
  JsonReader(const JsonValue& object, std::string path) : object_(object), path_(std::move(path)) {}

  template <class T>
  void operator()(const char* name, T& field, unsigned options = kPlain) {
    if (error) return;
    auto it = object_.find(name);
    const bool absent = it == object_.end() || it->is_null();
    if constexpr (IsOptional<T>::value) {
      if (absent) {
        field.reset();
        return;
      }
      field.emplace();
      Check(ReadValue(*it, *field, path_ + "." + name));
    } else {
      if (absent) {
        if (options & (kDefaultIfAbsent | kOmitFalse)) {
          field = T{};
          return;
        }
        error = DecodeError{DecodeErrorCode::kInvalidJson,
                            path_ + "." + name + ": missing required field"};
        return;
      }
      Check(ReadValue(*it, field, path_ + "." + name));
    }
  }

  std::optional<DecodeError> error;

 private:
  void Check(DecodeResult<void> r) {
    if (!r) error = std::move(r.error());
  }
  const JsonValue& object_;
  std::string path_;  // owned: callers pass temporaries
};

DecodeResult<void> ReadValue(const JsonValue& j, std::string& out, const std::string& path) {
  if (!j.is_string()) return Bad(DecodeErrorCode::kInvalidJson, path, "expected a string");
  out = j.get_ref<const std::string&>();
  return {};
}

DecodeResult<void> ReadValue(const JsonValue& j, Bytes& out, const std::string& path) {
  if (!j.is_string()) {
    return Bad(DecodeErrorCode::kInvalidJson, path, "expected a base64 string");
  }
  auto bytes = Base64Decode(j.get_ref<const std::string&>());
  if (!bytes) return Bad(DecodeErrorCode::kInvalidValue, path, "invalid base64");
  out = std::move(*bytes);
  return {};
}

DecodeResult<void> ReadValue(const JsonValue& j, bool& out, const std::string& path) {
  if (!j.is_boolean()) return Bad(DecodeErrorCode::kInvalidJson, path, "expected a boolean");
  out = j.get<bool>();
  return {};
}

template <UnsignedInt U>
DecodeResult<void> ReadValue(const JsonValue& j, U& out, const std::string& path) {
  if (j.is_number_unsigned()) {
    const uint64_t v = j.get<uint64_t>();
    if (v > std::numeric_limits<U>::max()) {
      return Bad(DecodeErrorCode::kInvalidValue, path,
                 std::to_string(v) + " above " + std::to_string(std::numeric_limits<U>::max()));
    }
    out = static_cast<U>(v);
    return {};
  }
  if (j.is_number_integer()) {
    const int64_t v = j.get<int64_t>();
    if (v == 0) {  // "-0"
      out = 0;
      return {};
    }
    return Bad(DecodeErrorCode::kInvalidValue, path, "negative value for an unsigned field");
  }
  if (j.is_number_float()) {
    return Bad(DecodeErrorCode::kInvalidValue, path, "not an integer (or out of u64 range)");
  }
  return Bad(DecodeErrorCode::kInvalidJson, path, "expected an unsigned integer");
}

DecodeResult<void> ReadValue(const JsonValue& j, int64_t& out, const std::string& path) {
  if (j.is_number_unsigned()) {
    const uint64_t v = j.get<uint64_t>();
    if (v > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      return Bad(DecodeErrorCode::kInvalidValue, path, "above i64 range");
    }
    out = static_cast<int64_t>(v);
    return {};
  }
  if (j.is_number_integer()) {
    out = j.get<int64_t>();
    return {};
  }
  if (j.is_number_float()) {
    return Bad(DecodeErrorCode::kInvalidValue, path, "not an integer (or out of i64 range)");
  }
  return Bad(DecodeErrorCode::kInvalidJson, path, "expected an integer");
}

// A unit enum variant: a JSON string from `names` (index = enum value).
template <class E, size_t N>
DecodeResult<void> ReadWord(const JsonValue& j, E& out, const std::string& path,
                            const std::array<std::string_view, N>& names) {
  if (!j.is_string()) return Bad(DecodeErrorCode::kInvalidJson, path, "expected a string");
  const auto& s = j.get_ref<const std::string&>();
  for (size_t i = 0; i < N; ++i) {
    if (names[i] == s) {
      out = static_cast<E>(i);
      return {};
    }
  }
  return Bad(DecodeErrorCode::kInvalidValue, path, "unknown value \"" + s + "\"");
}

// The words of unit enum variants (index = enum value).
constexpr std::array<std::string_view, 3> kAckModeNames = {"none", "per_message", "per_batch"};
constexpr std::array<std::string_view, 2> kShardKindNames = {"stream", "cache"};
constexpr std::array<std::string_view, 2> kShardRoutingNames = {"modulo", "jump_hash"};
constexpr std::array<std::string_view, 2> kCursorErrorNames = {"too_old", "in_future"};

DecodeResult<void> ReadValue(const JsonValue& j, AckMode& out, const std::string& path) {
  return ReadWord(j, out, path, kAckModeNames);
}
DecodeResult<void> ReadValue(const JsonValue& j, ShardKind& out, const std::string& path) {
  return ReadWord(j, out, path, kShardKindNames);
}
DecodeResult<void> ReadValue(const JsonValue& j, ShardRouting& out, const std::string& path) {
  return ReadWord(j, out, path, kShardRoutingNames);
}
DecodeResult<void> ReadValue(const JsonValue& j, CursorErrorReason& out, const std::string& path) {
  return ReadWord(j, out, path, kCursorErrorNames);
}

// An externally tagged enum variant with data: an object with exactly one key.
DecodeResult<const JsonValue*> SingleKey(const JsonValue& j, std::string_view key,
                                         const std::string& path) {
  auto it = j.find(std::string(key));
  if (j.size() != 1 || it == j.end()) {
    return Bad(DecodeErrorCode::kInvalidValue, path,
               "expected an object with the single key \"" + std::string(key) + "\"");
  }
  return &*it;
}

DecodeResult<void> ReadValue(const JsonValue& j, StartPosition& out, const std::string& path) {
  if (j.is_string()) {
    const auto& s = j.get_ref<const std::string&>();
    out.offset = 0;
    if (s == "latest") {
      out.kind = StartPosition::Kind::kLatest;
    } else if (s == "earliest") {
      out.kind = StartPosition::Kind::kEarliest;
    } else {
      return Bad(DecodeErrorCode::kInvalidValue, path, "unknown start \"" + s + "\"");
    }
    return {};
  }
  if (!j.is_object()) {
    return Bad(DecodeErrorCode::kInvalidJson, path, "expected a string or an object");
  }
  auto inner = SingleKey(j, "offset", path);
  if (!inner) return tl::unexpected(inner.error());
  out.kind = StartPosition::Kind::kOffset;
  return ReadValue(**inner, out.offset, path + ".offset");
}

DecodeResult<void> ReadValue(const JsonValue& j, CacheCondition& out, const std::string& path) {
  if (j.is_string()) {
    if (j.get_ref<const std::string&>() != "absent") {
      return Bad(DecodeErrorCode::kInvalidValue, path, "unknown condition");
    }
    out = CacheCondition{};
    return {};
  }
  if (!j.is_object()) {
    return Bad(DecodeErrorCode::kInvalidJson, path, "expected a string or an object");
  }
  auto inner = SingleKey(j, "version", path);
  if (!inner) return tl::unexpected(inner.error());
  out.kind = CacheCondition::Kind::kVersion;
  return ReadValue(**inner, out.version, path + ".version");
}

DecodeResult<void> ReadValue(const JsonValue& j, StateChange& out, const std::string& path) {
  if (!j.is_object()) return Bad(DecodeErrorCode::kInvalidJson, path, "expected an object");
  auto op = j.find("op");
  if (op == j.end() || !op->is_string()) {
    return Bad(DecodeErrorCode::kInvalidJson, path, "missing string \"op\"");
  }
  const auto& name = op->get_ref<const std::string&>();
  auto key = j.find("key");
  if (key == j.end() || key->is_null()) {
    return Bad(DecodeErrorCode::kInvalidJson, path + ".key", "missing required field");
  }
  if (auto r = ReadValue(*key, out.key, path + ".key"); !r) return r;
  if (name == "put") {
    out.op = StateChange::Op::kPut;
    auto value = j.find("value");
    if (value == j.end() || value->is_null()) {
      return Bad(DecodeErrorCode::kInvalidJson, path + ".value", "missing required field");
    }
    return ReadValue(*value, out.value, path + ".value");
  }
  if (name == "delete") {
    out.op = StateChange::Op::kDelete;
    out.value.clear();
    return {};
  }
  return Bad(DecodeErrorCode::kInvalidValue, path + ".op", "unknown op \"" + name + "\"");
}

DecodeResult<void> ReadValue(const JsonValue& j, PublishRefusalReason& out,
                             const std::string& path) {
  using K = PublishRefusalReason::Kind;
  out = PublishRefusalReason{};
  if (j.is_string()) {
    const auto& s = j.get_ref<const std::string&>();
    if (s == "unknown_producer") {
      out.kind = K::kUnknownProducer;
    } else if (s == "sequence_expired") {
      out.kind = K::kSequenceExpired;
    } else if (s == "sequence_reused") {
      out.kind = K::kSequenceReused;
    } else {
      return Bad(DecodeErrorCode::kInvalidValue, path, "unknown reason \"" + s + "\"");
    }
    return {};
  }
  if (!j.is_object() || j.size() != 1) {
    return Bad(DecodeErrorCode::kInvalidJson, path, "expected a string or a one-key object");
  }
  const auto first = j.begin();
  const std::string& name = first.key();
  const JsonValue& body = first.value();
  if (!body.is_object()) {
    return Bad(DecodeErrorCode::kInvalidJson, path + "." + name, "expected an object");
  }
  const std::string inner_path = path + "." + name;
  if (name == "sequence_gap") {
    out.kind = K::kSequenceGap;
    JsonReader r(body, inner_path);
    r("expected", out.expected);
    if (r.error) return tl::unexpected(*r.error);
    return {};
  }
  if (name == "offset_mismatch") {
    out.kind = K::kOffsetMismatch;
    JsonReader r(body, inner_path);
    r("tail", out.tail);
    if (r.error) return tl::unexpected(*r.error);
    return {};
  }
  if (name == "not_leader") {
    out.kind = K::kNotLeader;
    JsonReader r(body, inner_path);
    r("node_id", out.node_id);
    r("addr", out.addr);
    if (r.error) return tl::unexpected(*r.error);
    return {};
  }
  return Bad(DecodeErrorCode::kInvalidValue, path, "unknown reason \"" + name + "\"");
}

DecodeResult<void> ReadValue(const JsonValue& j, JsonValue& out, const std::string&) {
  out = j;
  return {};
}

template <class T>
DecodeResult<void> ReadValue(const JsonValue& j, std::vector<T>& out, const std::string& path) {
  if (!j.is_array()) return Bad(DecodeErrorCode::kInvalidJson, path, "expected an array");
  out.clear();
  out.reserve(j.size());
  size_t i = 0;
  for (const auto& item : j) {
    T value{};
    if (auto r = ReadValue(item, value, path + "[" + std::to_string(i) + "]"); !r) return r;
    out.push_back(std::move(value));
    ++i;
  }
  return {};
}

template <Record T>
DecodeResult<void> ReadValue(const JsonValue& j, T& out, const std::string& path) {
  if (!j.is_object()) return Bad(DecodeErrorCode::kInvalidJson, path, "expected an object");
  JsonReader reader(j, path);
  T::Fields(out, reader);
  if (reader.error) return tl::unexpected(*reader.error);
  return {};
}

// Opaque objects where the spec says "object".
DecodeResult<void> CheckObjects(const Message& m) {
  if (const auto* info = std::get_if<ShardInspectInfo>(&m); info && !info->view.is_object()) {
    return DecodeFail(DecodeErrorCode::kInvalidJson, "shard_inspect_info.view: expected an object");
  }
  if (const auto* list = std::get_if<SubscriptionsListInfo>(&m)) {
    for (const auto& s : list->subscriptions) {
      if (!s.is_object()) {
        return DecodeFail(DecodeErrorCode::kInvalidJson,
                          "subscriptions_list_info.subscriptions: expected objects");
      }
    }
  }
  return {};
}

template <class T>
bool TryDecodeAs(std::string_view type, const JsonValue& object,
                 std::optional<DecodeResult<Message>>& result) {
  if constexpr (std::is_same_v<T, UnknownMessage>) {
    return false;
  } else {
    if (T::kType != type) return false;
    T message{};
    JsonReader reader(object, std::string(T::kType));
    T::Fields(message, reader);
    if (reader.error) {
      result = tl::unexpected(*reader.error);
    } else {
      result = Message(std::move(message));
    }
    return true;
  }
}

template <size_t... I>
std::optional<DecodeResult<Message>> DecodeByType(std::string_view type, const JsonValue& object,
                                                  std::index_sequence<I...>) {
  std::optional<DecodeResult<Message>> result;
  (TryDecodeAs<std::variant_alternative_t<I, Message>>(type, object, result) || ...);
  return result;
}

// ---------------------------------------------------------------------------------------------
// Reading a flat object (json_flat_object.h) without the full parser

// JsonReader's rules over a FlatJsonObject, for the field types a flat object can carry.
// Anything else — a field of another type present, a value of the wrong kind, a value out of
// range, a required field missing — sets `failed`: the caller then decodes with the full
// parser, whose answer (and error message) is the canonical one. So this reader only ever
// produces what JsonReader would.
class FlatReader {
 public:
  explicit FlatReader(const FlatJsonObject& object) : object_(object) {}

  // `name` a view: the length of each literal field name is then known where Fields passes
  // it, not measured (strlen) on every lookup.
  template <class T>
  void operator()(std::string_view name, T& field, unsigned options = kPlain) {
    if (failed) return;
    const FlatJsonValue* value = object_.Find(name);
    const bool absent = value == nullptr || value->kind == FlatJsonValue::Kind::kNull;
    if constexpr (IsOptional<T>::value) {
      if (absent) {
        field.reset();
        return;
      }
      field.emplace();
      failed = !Read(*value, *field);
    } else {
      if (absent) {
        if (options & (kDefaultIfAbsent | kOmitFalse)) {
          field = T{};
          return;
        }
        failed = true;
        return;
      }
      failed = !Read(*value, field);
    }
  }

  bool failed = false;

 private:
  using Kind = FlatJsonValue::Kind;

  static bool Read(const FlatJsonValue& v, std::string& out) {
    if (v.kind != Kind::kString) return false;
    out.assign(v.text);
    return true;
  }
  static bool Read(const FlatJsonValue& v, Bytes& out) {
    if (v.kind != Kind::kString) return false;
    auto bytes = Base64Decode(v.text);
    if (!bytes) return false;
    out = std::move(*bytes);
    return true;
  }
  static bool Read(const FlatJsonValue& v, bool& out) {
    if (v.kind != Kind::kTrue && v.kind != Kind::kFalse) return false;
    out = v.kind == Kind::kTrue;
    return true;
  }
  template <UnsignedInt U>
  static bool Read(const FlatJsonValue& v, U& out) {
    if (v.kind != Kind::kUnsigned || v.number > std::numeric_limits<U>::max()) return false;
    out = static_cast<U>(v.number);
    return true;
  }
  static bool Read(const FlatJsonValue& v, int64_t& out) {
    if (v.kind != Kind::kUnsigned ||
        v.number > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      return false;
    }
    out = static_cast<int64_t>(v.number);
    return true;
  }
  template <class E, size_t N>
  static bool Word(const FlatJsonValue& v, E& out, const std::array<std::string_view, N>& names) {
    if (v.kind != Kind::kString) return false;
    for (size_t i = 0; i < N; ++i) {
      if (names[i] == v.text) {
        out = static_cast<E>(i);
        return true;
      }
    }
    return false;
  }
  static bool Read(const FlatJsonValue& v, AckMode& out) { return Word(v, out, kAckModeNames); }
  static bool Read(const FlatJsonValue& v, ShardKind& out) { return Word(v, out, kShardKindNames); }
  static bool Read(const FlatJsonValue& v, ShardRouting& out) {
    return Word(v, out, kShardRoutingNames);
  }
  static bool Read(const FlatJsonValue& v, CursorErrorReason& out) {
    return Word(v, out, kCursorErrorNames);
  }
  static bool Read(const FlatJsonValue& v, StartPosition& out) {
    if (v.kind != Kind::kString) return false;  // the object form is nested: full parser
    out.offset = 0;
    if (v.text == "latest") {
      out.kind = StartPosition::Kind::kLatest;
    } else if (v.text == "earliest") {
      out.kind = StartPosition::Kind::kEarliest;
    } else {
      return false;
    }
    return true;
  }
  // An array of records (the records of `group_records`, `stream_records`): each element read
  // by the same rules; one that fails fails the whole message.
  template <Record T>
  static bool Read(const FlatJsonValue& v, std::vector<T>& out) {
    if (v.kind != Kind::kArray) return false;
    out.clear();
    out.reserve(v.number);  // counted by the scan of the text: no more than it holds
    FlatJsonArrayReader elements(v);
    FlatJsonObject element;
    while (elements.Next(element)) {
      T& value = out.emplace_back();
      FlatReader reader(element);
      T::Fields(value, reader);
      if (reader.failed) return false;
    }
    return out.size() == v.number;
  }
  // Other vectors, nested records, opaque JSON, conditions, state changes, refusal reasons.
  template <class T>
  static bool Read(const FlatJsonValue&, T&) {
    return false;
  }

  const FlatJsonObject& object_;
};

// `object` read as a T (its "type" names T): the message, or nothing when a member is not what
// the flat reader takes.
template <class T>
void DecodeFlatAs(const FlatJsonObject& object, std::optional<Message>& result) {
  T message{};
  FlatReader reader(object);
  T::Fields(message, reader);
  if (!reader.failed) result.emplace(std::in_place_type<T>, std::move(message));
}

// Which alternative of Message a flat object's "type" names: a table of every alternative's type
// name, hashed, built once. A request's decode compared its type with each name in the
// variant's order before (about sixty for a `group_ack`): a third of a `cache_get`'s decode.
using FlatDecoder = void (*)(const FlatJsonObject&, std::optional<Message>&);

class FlatDecoderTable {
 public:
  FlatDecoderTable() { Add(std::make_index_sequence<std::variant_size_v<Message>>{}); }

  // The decoder of the first alternative (in the variant's order) named `type`; nullptr for none.
  FlatDecoder Find(std::string_view type) const {
    for (size_t i = Hash(type) & kMask;; i = (i + 1) & kMask) {
      const Slot& slot = slots_[i];
      if (slot.decode == nullptr) return nullptr;
      if (slot.type == type) return slot.decode;
    }
  }

 private:
  struct Slot {
    std::string_view type;
    FlatDecoder decode = nullptr;
  };
  static constexpr size_t kSlots = 256;  // a power of two, well above the alternatives' count
  static constexpr size_t kMask = kSlots - 1;
  static_assert(std::variant_size_v<Message> < kSlots / 2);

  static size_t Hash(std::string_view text) {  // FNV-1a
    uint64_t h = 14695981039346656037ull;
    for (char c : text) h = (h ^ uint8_t(c)) * 1099511628211ull;
    return size_t(h ^ (h >> 29));
  }

  template <size_t... I>
  void Add(std::index_sequence<I...>) {
    (AddOne<std::variant_alternative_t<I, Message>>(), ...);
  }

  template <class T>
  void AddOne() {
    if constexpr (!std::is_same_v<T, UnknownMessage>) {
      for (size_t i = Hash(T::kType) & kMask;; i = (i + 1) & kMask) {
        if (slots_[i].decode == nullptr) {
          slots_[i] = Slot{T::kType, &DecodeFlatAs<T>};
          return;
        }
        if (slots_[i].type == T::kType) return;  // an earlier alternative keeps the name
      }
    }
  }

  std::array<Slot, kSlots> slots_{};
};

// The message a flat object holds, or nullopt when only the full parser can say (an unknown
// type included: its raw text is kept there).
std::optional<Message> DecodeFlat(const FlatJsonObject& object) {
  static const FlatDecoderTable table;
  const FlatJsonValue* type = object.Find("type");
  if (type == nullptr || type->kind != FlatJsonValue::Kind::kString) return std::nullopt;
  const FlatDecoder decode = table.Find(type->text);
  if (decode == nullptr) return std::nullopt;
  std::optional<Message> result;
  decode(object, result);
  if (result && !CheckObjects(*result)) return std::nullopt;
  return result;
}

// Appends the message's JSON to `out`; on failure `out` may hold part of it.
Result<void> RenderInto(const Message& message, bool canonical, std::string& out) {
  if (const auto* unknown = std::get_if<UnknownMessage>(&message)) {
    if (!canonical) {
      out += unknown->raw_json;
      return {};
    }
    // Canonical: the same object, re-dumped compactly.
    auto parsed = JsonValue::parse(unknown->raw_json, nullptr, false);
    if (parsed.is_discarded() || !parsed.is_object()) {
      return Fail(ErrorCode::kInvalidArgument, "unknown message: raw JSON is not an object");
    }
    try {
      out += parsed.dump();
      return {};
    } catch (const nlohmann::json::exception& e) {
      return Fail(ErrorCode::kInvalidArgument, std::string("unknown message: ") + e.what());
    }
  }
  if (auto bad = CheckObjects(message); !bad) {
    return Fail(ErrorCode::kInvalidArgument, bad.error().detail);
  }
  std::optional<std::string> error;
  std::visit(
      [&](const auto& m) {
        using T = std::decay_t<decltype(m)>;
        if constexpr (!std::is_same_v<T, UnknownMessage>) {
          JsonWriter writer(out, canonical);
          writer.Object(m, T::kType);
          error = writer.error;
        }
      },
      message);
  if (error) {
    return Fail(ErrorCode::kInvalidArgument, std::string(MessageType(message)) + ": " + *error);
  }
  return {};
}

Result<std::string> Render(const Message& message, bool canonical) {
  std::string out;
  // Most messages (answers, acks, group requests) are a few hundred bytes: grown from empty
  // the string reallocated four or five times on the way (31, 61, 121, 241 bytes).
  out.reserve(256);
  if (auto rendered = RenderInto(message, canonical, out); !rendered) {
    return tl::unexpected(rendered.error());
  }
  return out;
}

}  // namespace

Result<std::string> EncodeMessageJson(const Message& message) {
  return Render(message, false);
}

Result<void> AppendMessageJson(const Message& message, std::string& out) {
  const size_t start = out.size();
  auto rendered = RenderInto(message, false, out);
  if (!rendered) out.resize(start);
  return rendered;
}

Result<void> AppendGroupRecordsJson(const GroupRecordsView& answer, std::string& out) {
  const size_t start = out.size();
  JsonWriter writer(out, false);
  writer.Object(answer, GroupRecordsView::kType);
  if (writer.error) {
    out.resize(start);
    return Fail(ErrorCode::kInvalidArgument,
                std::string(GroupRecordsView::kType) + ": " + *writer.error);
  }
  return {};
}

Result<std::string> MessageToCanonicalJson(const Message& message) {
  return Render(message, true);
}

DecodeResult<Message> DecodeMessageObject(const JsonValue& object, std::string_view raw_json) {
  try {
    if (!object.is_object()) {
      return DecodeFail(DecodeErrorCode::kInvalidJson, "message: expected a JSON object");
    }
    auto type = object.find("type");
    if (type == object.end() || !type->is_string()) {
      return DecodeFail(DecodeErrorCode::kInvalidJson, "message: missing string \"type\"");
    }
    const auto& name = type->get_ref<const std::string&>();
    auto decoded =
        DecodeByType(name, object, std::make_index_sequence<std::variant_size_v<Message>>{});
    if (!decoded) {
      UnknownMessage unknown;
      unknown.type = name;
      if (auto id = object.find("request_id"); id != object.end() && id->is_number_unsigned()) {
        unknown.request_id = id->get<uint64_t>();
      } else if (id != object.end() && id->is_number_integer() && id->get<int64_t>() == 0) {
        unknown.request_id = 0;  // "-0", read as the typed messages read it (and as re-dumped)
      }
      unknown.raw_json = std::string(raw_json);
      return Message(std::move(unknown));
    }
    if (*decoded) {
      if (auto bad = CheckObjects(**decoded); !bad) return tl::unexpected(bad.error());
    }
    return std::move(*decoded);
  } catch (const nlohmann::json::exception& e) {
    return DecodeFail(DecodeErrorCode::kInvalidJson, e.what());
  }
}

namespace {

// What is refused before any parse, by either path. The nesting depth is measured only
// where the full parser runs: a flat object (json_flat_object.h) is at most three levels deep
// (an object, an array member, its objects).
DecodeResult<void> CheckJsonPayload(std::string_view payload) {
  if (!IsValidUtf8(payload)) {
    return DecodeFail(DecodeErrorCode::kInvalidUtf8, "JSON payload is not valid UTF-8");
  }
  if (payload.starts_with("\xEF\xBB\xBF")) {
    // The parser would skip a byte-order mark; the reference's does not, and neither do we.
    return DecodeFail(DecodeErrorCode::kInvalidJson, "JSON payload starts with a byte-order mark");
  }
  return {};
}

DecodeResult<Message> ParseAndDecode(std::string_view payload) {
  if (JsonNestingDepth(payload) > kMaxJsonDepth) {
    return DecodeFail(DecodeErrorCode::kInvalidJson, "JSON nested deeper than 128 levels");
  }
  JsonValue parsed;
  try {
    parsed = JsonValue::parse(payload.begin(), payload.end(), nullptr, false);
  } catch (const nlohmann::json::exception& e) {
    return DecodeFail(DecodeErrorCode::kInvalidJson, e.what());
  }
  if (parsed.is_discarded()) {
    return DecodeFail(DecodeErrorCode::kInvalidJson, "payload is not well-formed JSON");
  }
  return DecodeMessageObject(parsed, payload);
}

}  // namespace

DecodeResult<Message> DecodeMessageJson(std::string_view payload) {
  if (auto ok = CheckJsonPayload(payload); !ok) return tl::unexpected(ok.error());
  if (auto flat = FlatJsonObject::Scan(payload)) {
    if (auto message = DecodeFlat(*flat)) {
      return std::move(*message);
    }
  }
  return ParseAndDecode(payload);
}

DecodeResult<Message> DecodeMessageJsonFully(std::string_view payload) {
  if (auto ok = CheckJsonPayload(payload); !ok) return tl::unexpected(ok.error());
  return ParseAndDecode(payload);
}

}  // namespace felix::wire::flx1
