#include "wire/flx1/frame.h"

#include <cstring>
#include <limits>
#include <optional>

#include "wire/byte_reader.h"
#include "wire/byte_writer.h"
#include "wire/flx1/base64.h"
#include "wire/flx1/json_codec.h"

namespace felix::wire::flx1 {

namespace {

constexpr uint16_t kPublishFamily = kFlagBinaryPublishBatch | kFlagBinaryPublishAcked |
                                    kFlagBinaryPublishKeyed | kFlagBinaryPublishIdempotent;
constexpr uint16_t kAckFamily = kFlagBinaryPublishAck | kFlagBinaryPublishAckOwner |
                                kFlagBinaryPublishAckCode | kFlagBinaryPublishAckDetail |
                                kFlagBinaryPublishAckOffset;
constexpr uint16_t kEventFamily = kFlagBinaryEventBatch | kFlagBinaryEventBatchShared |
                                  kFlagEventBatchOffsets | kFlagEventBatchSkipped |
                                  kFlagEventBatchPublisher | kFlagEventBatchTimestamps;

std::string Hex16(uint16_t v) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string s = "0x0000";
  for (int i = 0; i < 4; ++i) s[5 - i] = kHex[(v >> (4 * i)) & 0xF];
  return s;
}

tl::unexpected<DecodeError> BadCombination(uint16_t flags, const char* why) {
  return DecodeFail(DecodeErrorCode::kInvalidValue,
                    "frame flags " + Hex16(flags) + ": " + std::string(why));
}

}  // namespace

DecodeResult<FrameHeader> DecodeEnvelope(std::span<const uint8_t> bytes, uint32_t max_payload) {
  if (bytes.size() < kHeaderSize) {
    return DecodeFail(DecodeErrorCode::kIncomplete,
                      "frame header: needs 12 bytes, " + std::to_string(bytes.size()) + " remain");
  }
  ByteReader r(bytes.first(kHeaderSize));
  const uint32_t magic = *r.ReadU32("magic");
  const uint16_t version = *r.ReadU16("version");
  FrameHeader h;
  h.flags = *r.ReadU16("flags");
  h.length = *r.ReadU32("length");
  if (magic != kMagic) return DecodeFail(DecodeErrorCode::kBadMagic, "frame magic is not FLX1");
  if (version != kVersion) {
    return DecodeFail(DecodeErrorCode::kBadVersion,
                      "frame version " + std::to_string(version) + " (only 1)");
  }
  if (h.length > max_payload) {
    return DecodeFail(DecodeErrorCode::kFrameTooLarge, "frame length " + std::to_string(h.length) +
                                                           " above the limit " +
                                                           std::to_string(max_payload));
  }
  return h;
}

DecodeResult<void> CheckFlags(uint16_t flags) {
  if (flags & ~kKnownFlags) {
    return DecodeFail(
        DecodeErrorCode::kUnknownFlags,
        "unsupported frame flags " + Hex16(static_cast<uint16_t>(flags & ~kKnownFlags)));
  }
  if (flags == 0) return {};
  if (flags & kFlagBinaryPublishBatch) {
    if (flags & ~kPublishFamily) return BadCombination(flags, "publish batch with other layouts");
    if ((flags & kFlagBinaryPublishIdempotent) && !(flags & kFlagBinaryPublishAcked)) {
      return BadCombination(flags, "0x0100 requires 0x0008");
    }
    return {};
  }
  if (flags & kFlagBinaryPublishAck) {
    if (flags & ~kAckFamily) return BadCombination(flags, "publish ack with other layouts");
    if ((flags & kFlagBinaryPublishAckDetail) && !(flags & kFlagBinaryPublishAckCode)) {
      return BadCombination(flags, "0x0400 requires 0x0200");
    }
    return {};
  }
  const bool per_subscriber = flags & kFlagBinaryEventBatch;
  const bool shared = flags & kFlagBinaryEventBatchShared;
  if (per_subscriber || shared) {
    if (per_subscriber && shared) return BadCombination(flags, "both 0x0002 and 0x0004");
    if (flags & ~kEventFamily) return BadCombination(flags, "event batch with other layouts");
    if ((flags & kFlagEventBatchSkipped) && !(flags & kFlagEventBatchOffsets)) {
      return BadCombination(flags, "0x0800 requires 0x0020");
    }
    return {};
  }
  return BadCombination(flags, "modifier bits without a layout bit");
}

DecodeResult<FrameHeader> DecodeHeader(std::span<const uint8_t> bytes, uint32_t max_payload) {
  auto h = DecodeEnvelope(bytes, max_payload);
  if (!h) return h;
  if (auto ok = CheckFlags(h->flags); !ok) return tl::unexpected(ok.error());
  return h;
}

DecodeResult<Flx1Frame> DecodePayload(uint16_t flags, std::span<const uint8_t> payload) {
  if (auto ok = CheckFlags(flags); !ok) return tl::unexpected(ok.error());
  if (flags == 0) {
    auto m = DecodeMessageJson(
        std::string_view(reinterpret_cast<const char*>(payload.data()), payload.size()));
    if (!m) return tl::unexpected(m.error());
    return Flx1Frame(std::move(*m));
  }
  if (flags & kFlagBinaryPublishBatch) {
    auto b = DecodePublishBatch(flags, payload);
    if (!b) return tl::unexpected(b.error());
    return Flx1Frame(std::move(*b));
  }
  if (flags & kFlagBinaryPublishAck) {
    auto a = DecodePublishAck(flags, payload);
    if (!a) return tl::unexpected(a.error());
    return Flx1Frame(std::move(*a));
  }
  auto e = DecodeEventBatch(flags, payload);
  if (!e) return tl::unexpected(e.error());
  return Flx1Frame(std::move(*e));
}

DecodeResult<Flx1Frame> DecodeFrame(std::span<const uint8_t> bytes, uint32_t max_payload) {
  auto h = DecodeEnvelope(bytes, max_payload);
  if (!h) return tl::unexpected(h.error());
  const size_t have = bytes.size() - kHeaderSize;
  if (have < h->length) {
    return DecodeFail(DecodeErrorCode::kIncomplete, "frame payload: needs " +
                                                        std::to_string(h->length) + " bytes, " +
                                                        std::to_string(have) + " remain");
  }
  if (have > h->length) {
    return DecodeFail(DecodeErrorCode::kTrailingBytes,
                      "frame: " + std::to_string(have - h->length) + " bytes after the payload");
  }
  return DecodePayload(h->flags, bytes.subspan(kHeaderSize, h->length));
}

uint16_t FrameFlags(const Flx1Frame& frame) {
  struct {
    uint16_t operator()(const Message&) const { return 0; }
    uint16_t operator()(const BinaryPublishBatch& b) const { return PublishBatchFlags(b); }
    uint16_t operator()(const BinaryPublishAck& a) const { return PublishAckFlags(a); }
    uint16_t operator()(const BinaryEventBatch& e) const { return EventBatchFlags(e); }
  } flags;
  return std::visit(flags, frame);
}

Result<void> AppendFrame(const Flx1Frame& frame, std::vector<uint8_t>& out) {
  const size_t start = out.size();
  ByteWriter w(out);
  // Room first: the header's bytes pushed one by one into an empty buffer reallocated it five
  // times (1, 2, 4, 8, 16 bytes) before the body's own reserve. A JSON body is rendered before
  // the header so that the frame is one allocation.
  std::optional<Result<std::string>> text;
  if (const auto* m = std::get_if<Message>(&frame)) {
    text = EncodeMessageJson(*m);
    if (!*text) return tl::unexpected(text->error());
    w.Reserve(kHeaderSize + (*text)->size());
  } else {
    w.Reserve(kHeaderSize);
  }
  w.WriteU32(kMagic);
  w.WriteU16(kVersion);
  w.WriteU16(FrameFlags(frame));
  w.WriteU32(0);  // length, patched below
  Result<void> body = std::visit(
      [&](const auto& f) -> Result<void> {
        using T = std::decay_t<decltype(f)>;
        if constexpr (std::is_same_v<T, Message>) {
          w.WriteBytes(**text);
          return {};
        } else if constexpr (std::is_same_v<T, BinaryPublishBatch>) {
          return EncodePublishBatch(f, out);
        } else if constexpr (std::is_same_v<T, BinaryPublishAck>) {
          return EncodePublishAck(f, out);
        } else {
          return EncodeEventBatch(f, out);
        }
      },
      frame);
  if (!body) {
    out.resize(start);
    return body;
  }
  const size_t length = out.size() - start - kHeaderSize;
  if (length > std::numeric_limits<uint32_t>::max()) {
    out.resize(start);
    return Fail(ErrorCode::kInvalidArgument, "frame payload longer than u32 max");
  }
  w.PatchU32(start + 8, static_cast<uint32_t>(length));
  return {};
}

std::optional<OpenPublishBatch> OpenPublishBatchFrame(std::span<const uint8_t> out,
                                                      size_t frame_start,
                                                      std::string_view tenant_id,
                                                      std::string_view namespace_,
                                                      std::string_view stream) {
  if (frame_start > out.size() || out.size() - frame_start < kHeaderSize) return std::nullopt;
  const std::span<const uint8_t> frame = out.subspan(frame_start);
  ByteReader header(frame.first(kHeaderSize));
  auto magic = header.ReadU32("magic");
  auto version = header.ReadU16("version");
  auto flags = header.ReadU16("flags");
  auto length = header.ReadU32("length");
  if (!magic || *magic != kMagic || !version || *version != kVersion || !flags ||
      *flags != kFlagBinaryPublishBatch || !length || *length != frame.size() - kHeaderSize)
    return std::nullopt;
  ByteReader body(frame.subspan(kHeaderSize));
  for (std::string_view name : {tenant_id, namespace_, stream}) {
    auto field = body.ReadBytes16("publish_batch.name");
    if (!field ||
        std::string_view(reinterpret_cast<const char*>(field->data()), field->size()) != name)
      return std::nullopt;
  }
  const size_t count_at = frame_start + kHeaderSize + body.position();
  auto count = body.ReadU32("publish_batch.count");
  if (!count) return std::nullopt;
  return OpenPublishBatch{frame_start, count_at, *count, *length};
}

Result<void> AppendToOpenPublishBatch(std::vector<uint8_t>& out, OpenPublishBatch& open,
                                      std::span<const std::string> payloads) {
  uint64_t added = 0;
  for (const auto& p : payloads) {
    if (p.size() > std::numeric_limits<uint32_t>::max())
      return Fail(ErrorCode::kInvalidArgument, "publish_batch.payload: longer than u32 max");
    added += 4 + p.size();
  }
  if (uint64_t(open.count) + payloads.size() > std::numeric_limits<uint32_t>::max() ||
      uint64_t(open.length) + added > std::numeric_limits<uint32_t>::max())
    return Fail(ErrorCode::kInvalidArgument, "publish_batch: grown past u32 max");
  ByteWriter w(out);
  w.Reserve(size_t(added));
  for (const auto& p : payloads) w.WriteBytes32(p);
  open.count += static_cast<uint32_t>(payloads.size());
  open.length += static_cast<uint32_t>(added);
  w.PatchU32(open.count_at, open.count);
  w.PatchU32(open.frame_start + 8, open.length);
  return {};
}

Result<bool> AppendToPublishBatchFrame(std::vector<uint8_t>& out, size_t frame_start,
                                       std::string_view tenant_id, std::string_view namespace_,
                                       std::string_view stream,
                                       std::span<const std::string> payloads) {
  auto open = OpenPublishBatchFrame(out, frame_start, tenant_id, namespace_, stream);
  if (!open) return false;
  if (auto appended = AppendToOpenPublishBatch(out, *open, payloads); !appended)
    return tl::unexpected(appended.error());
  return true;
}

Result<std::vector<uint8_t>> EncodeFrame(const Flx1Frame& frame) {
  std::vector<uint8_t> out;
  if (auto ok = AppendFrame(frame, out); !ok) return tl::unexpected(ok.error());
  return out;
}

namespace {

// The 12-byte envelope of a JSON frame (flag word 0) at `out`, big-endian as every field.
void PutJsonHeader(uint32_t length, uint8_t* out) {
  auto put = [&out](uint64_t v, int bytes) {
    for (int i = bytes - 1; i >= 0; --i) *out++ = static_cast<uint8_t>(v >> (8 * i));
  };
  put(kMagic, 4);
  put(kVersion, 2);
  put(0, 2);
  put(length, 4);
}

// A JSON frame appended to `out`: the header, then what `render` appends (the JSON), then the
// header filled in with its length. `out` is untouched on failure.
template <class Render>
Result<void> AppendJsonFrame(std::string& out, const Render& render) {
  const size_t start = out.size();
  out.append(kHeaderSize, '\0');
  if (auto rendered = render(out); !rendered) {
    out.resize(start);
    return rendered;
  }
  const size_t length = out.size() - start - kHeaderSize;
  if (length > std::numeric_limits<uint32_t>::max()) {
    out.resize(start);
    return Fail(ErrorCode::kInvalidArgument, "frame payload longer than u32 max");
  }
  PutJsonHeader(static_cast<uint32_t>(length), reinterpret_cast<uint8_t*>(out.data() + start));
  return {};
}

}  // namespace

Result<void> AppendMessageFrame(const Message& message, std::string& out) {
  return AppendJsonFrame(out, [&](std::string& json) { return AppendMessageJson(message, json); });
}

Result<void> AppendGroupRecordsFrame(const GroupRecordsView& answer, std::string& out) {
  return AppendJsonFrame(out,
                         [&](std::string& json) { return AppendGroupRecordsJson(answer, json); });
}

namespace {
// Room for the header and JSON of a request or a small answer (an `auth`, a `group_ack`).
constexpr size_t kSmallFrameBytes = 512;
}  // namespace

Result<std::vector<uint8_t>> EncodeMessageFrame(const Message& message) {
  // The message is not copied into an Flx1Frame; the bytes are moved with memcpy (a std::copy
  // from char to uint8_t was an element-wise loop).
  std::string frame;
  frame.reserve(kSmallFrameBytes);  // a request's frame: one allocation, not one per doubling
  if (auto appended = AppendMessageFrame(message, frame); !appended) {
    return tl::unexpected(appended.error());
  }
  std::vector<uint8_t> out(frame.size());
  std::memcpy(out.data(), frame.data(), frame.size());
  return out;
}

// ---- Canonical JSON ----

namespace {

std::string B64(std::string_view bytes) {
  return Base64Encode(
      std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()));
}

template <class T>
JsonValue OrNull(const std::optional<T>& v) {
  return v ? JsonValue(*v) : JsonValue(nullptr);
}

JsonValue CanonicalBatch(const BinaryPublishBatch& b) {
  JsonValue j = JsonValue::object();
  j["frame"] = "publish_batch";
  j["flags"] = PublishBatchFlags(b);
  j["request_id"] = b.acked ? JsonValue(b.acked->request_id) : JsonValue(nullptr);
  j["ack_mode"] =
      b.acked ? JsonValue(b.acked->ack_mode == AckMode::kPerMessage ? "per_message" : "per_batch")
              : JsonValue(nullptr);
  j["producer_id"] = b.idempotent ? JsonValue(b.idempotent->producer_id) : JsonValue(nullptr);
  j["sequence"] = b.idempotent ? JsonValue(b.idempotent->sequence) : JsonValue(nullptr);
  j["key"] = b.key ? JsonValue(B64(*b.key)) : JsonValue(nullptr);
  j["tenant_id"] = std::string(b.tenant_id);
  j["namespace"] = std::string(b.namespace_);
  j["stream"] = std::string(b.stream);
  JsonValue payloads = JsonValue::array();
  for (auto p : b.payloads) payloads.push_back(B64(p));
  j["payloads"] = std::move(payloads);
  return j;
}

JsonValue CanonicalAck(const BinaryPublishAck& a) {
  JsonValue j = JsonValue::object();
  j["frame"] = "publish_ack";
  j["flags"] = PublishAckFlags(a);
  j["status"] = a.status == BinaryPublishAck::Status::kOk ? "ok" : "error";
  j["request_id"] = a.request_id;
  j["message"] = std::string(a.message);
  if (a.code) {
    JsonValue c = JsonValue::object();
    c["code"] = a.code->code;
    auto name = ErrorCodeName(a.code->code);
    c["code_name"] = name ? JsonValue(std::string(*name)) : JsonValue(nullptr);
    c["retry"] = a.code->retry;
    c["retry_class"] = std::string(RetryClassName(RetryClassFromByte(a.code->retry)));
    j["code"] = std::move(c);
  } else {
    j["code"] = nullptr;
  }
  if (a.detail) {
    j["detail"] = {{"reason", std::string(a.detail->reason)},
                   {"retry_after_ms", a.detail->retry_after_ms}};
  } else {
    j["detail"] = nullptr;
  }
  if (a.owner) {
    JsonValue o = JsonValue::object();
    o["node_id"] = std::string(a.owner->node_id);
    o["addr"] = a.owner->addr ? JsonValue(std::string(*a.owner->addr)) : JsonValue(nullptr);
    o["generation"] = a.owner->generation;
    j["owner"] = std::move(o);
  } else {
    j["owner"] = nullptr;
  }
  j["offset"] = OrNull(a.offset);
  return j;
}

JsonValue CanonicalEvents(const BinaryEventBatch& b) {
  JsonValue j = JsonValue::object();
  j["frame"] = "event_batch";
  j["flags"] = EventBatchFlags(b);
  j["subscription_id"] = OrNull(b.subscription_id);
  j["base_offset"] = OrNull(b.base_offset);
  j["skipped_before"] = OrNull(b.skipped_before);
  j["publisher"] = b.publisher ? JsonValue(std::string(*b.publisher)) : JsonValue(nullptr);
  j["timestamps"] = b.has_timestamps;
  JsonValue events = JsonValue::array();
  for (const auto& e : b.events) {
    JsonValue item = JsonValue::object();
    item["timestamp_micros"] =
        b.has_timestamps ? JsonValue(e.timestamp_micros) : JsonValue(nullptr);
    item["payload"] = B64(e.payload);
    events.push_back(std::move(item));
  }
  j["events"] = std::move(events);
  return j;
}

}  // namespace

Result<std::string> FrameToCanonicalJson(const Flx1Frame& frame) {
  if (const auto* m = std::get_if<Message>(&frame)) {
    auto body = MessageToCanonicalJson(*m);
    if (!body) return body;
    return "{\"frame\":\"json\",\"flags\":0,\"message\":" + *body + "}";
  }
  JsonValue j;
  if (const auto* b = std::get_if<BinaryPublishBatch>(&frame)) j = CanonicalBatch(*b);
  if (const auto* a = std::get_if<BinaryPublishAck>(&frame)) j = CanonicalAck(*a);
  if (const auto* e = std::get_if<BinaryEventBatch>(&frame)) j = CanonicalEvents(*e);
  try {
    return j.dump();
  } catch (const nlohmann::json::exception& e) {
    return Fail(ErrorCode::kInvalidArgument, std::string("canonical rendering: ") + e.what());
  }
}

namespace {

// Reads fields of a canonical binary rendering; keeps decoded bytes alive in `storage`.
class CanonicalReader {
 public:
  CanonicalReader(const JsonValue& j, OwnedFrame& owned) : j_(j), owned_(owned) {}

  std::optional<DecodeError> error;

  bool Has(const char* name) const {
    auto it = j_.find(name);
    return it != j_.end() && !it->is_null();
  }
  const JsonValue* Get(const char* name, bool required) {
    auto it = j_.find(name);
    if (it == j_.end() || it->is_null()) {
      if (required) Fail(DecodeErrorCode::kInvalidJson, name, "missing required field");
      return nullptr;
    }
    return &*it;
  }
  template <class U>
  std::optional<U> Unsigned(const char* name, bool required, const JsonValue* from = nullptr) {
    const JsonValue* v = from ? from : Get(name, required);
    if (!v) return std::nullopt;
    if (!v->is_number_unsigned()) {
      Fail(DecodeErrorCode::kInvalidJson, name, "expected an unsigned integer");
      return std::nullopt;
    }
    const uint64_t x = v->get<uint64_t>();
    if (x > std::numeric_limits<U>::max()) {
      Fail(DecodeErrorCode::kInvalidValue, name, "out of range");
      return std::nullopt;
    }
    return static_cast<U>(x);
  }
  std::optional<std::string_view> Text(const char* name, bool required,
                                       const JsonValue* from = nullptr) {
    const JsonValue* v = from ? from : Get(name, required);
    if (!v) return std::nullopt;
    if (!v->is_string()) {
      Fail(DecodeErrorCode::kInvalidJson, name, "expected a string");
      return std::nullopt;
    }
    return Keep(v->get<std::string>());
  }
  std::optional<std::string_view> Base64(const char* name, bool required,
                                         const JsonValue* from = nullptr) {
    auto text = Text(name, required, from);
    if (!text) return std::nullopt;
    auto bytes = Base64Decode(*text);
    if (!bytes) {
      Fail(DecodeErrorCode::kInvalidValue, name, "invalid base64");
      return std::nullopt;
    }
    return Keep(std::string(bytes->begin(), bytes->end()));
  }
  void Fail(DecodeErrorCode code, const char* name, const char* what) {
    if (!error) error = DecodeError{code, std::string(name) + ": " + what};
  }

 private:
  std::string_view Keep(std::string s) {
    owned_.storage.push_back(std::make_unique<std::string>(std::move(s)));
    return *owned_.storage.back();
  }
  const JsonValue& j_;
  OwnedFrame& owned_;
};

void ReadCanonicalBatch(CanonicalReader& r, BinaryPublishBatch& b) {
  if (r.Has("request_id") || r.Has("ack_mode")) {
    BinaryPublishBatch::Acked acked;
    acked.request_id = r.Unsigned<uint64_t>("request_id", true).value_or(0);
    auto mode = r.Text("ack_mode", true);
    if (mode && *mode == "per_message") {
      acked.ack_mode = AckMode::kPerMessage;
    } else if (mode && *mode == "per_batch") {
      acked.ack_mode = AckMode::kPerBatch;
    } else if (mode) {
      r.Fail(DecodeErrorCode::kInvalidValue, "ack_mode", "per_message or per_batch");
    }
    b.acked = acked;
  }
  if (r.Has("producer_id") || r.Has("sequence")) {
    b.idempotent =
        BinaryPublishBatch::Idempotent{r.Unsigned<uint64_t>("producer_id", true).value_or(0),
                                       r.Unsigned<uint64_t>("sequence", true).value_or(0)};
  }
  if (r.Has("key")) b.key = r.Base64("key", true);
  b.tenant_id = r.Text("tenant_id", true).value_or("");
  b.namespace_ = r.Text("namespace", true).value_or("");
  b.stream = r.Text("stream", true).value_or("");
  if (const JsonValue* payloads = r.Get("payloads", true)) {
    if (!payloads->is_array()) {
      r.Fail(DecodeErrorCode::kInvalidJson, "payloads", "expected an array");
      return;
    }
    for (const auto& p : *payloads) {
      auto bytes = r.Base64("payloads[]", true, &p);
      if (!bytes) return;
      b.payloads.push_back(*bytes);
    }
  }
}

void ReadCanonicalAck(CanonicalReader& r, BinaryPublishAck& a) {
  auto status = r.Text("status", true);
  if (status && *status == "ok") {
    a.status = BinaryPublishAck::Status::kOk;
  } else if (status && *status == "error") {
    a.status = BinaryPublishAck::Status::kError;
  } else if (status) {
    r.Fail(DecodeErrorCode::kInvalidValue, "status", "ok or error");
  }
  a.request_id = r.Unsigned<uint64_t>("request_id", true).value_or(0);
  a.message = r.Text("message", true).value_or("");
  if (const JsonValue* c = r.Get("code", false)) {
    if (!c->is_object()) {
      r.Fail(DecodeErrorCode::kInvalidJson, "code", "expected an object");
      return;
    }
    auto code_it = c->find("code");
    auto retry_it = c->find("retry");
    if (code_it == c->end() || retry_it == c->end()) {
      r.Fail(DecodeErrorCode::kInvalidJson, "code", "needs code and retry");
      return;
    }
    a.code =
        BinaryPublishAck::Code{r.Unsigned<uint16_t>("code.code", true, &*code_it).value_or(0),
                               r.Unsigned<uint8_t>("code.retry", true, &*retry_it).value_or(0)};
  }
  if (const JsonValue* d = r.Get("detail", false)) {
    if (!d->is_object() || !d->contains("reason") || !d->contains("retry_after_ms")) {
      r.Fail(DecodeErrorCode::kInvalidJson, "detail", "needs reason and retry_after_ms");
      return;
    }
    a.detail = BinaryPublishAck::Detail{
        r.Text("detail.reason", true, &d->at("reason")).value_or(""),
        r.Unsigned<uint64_t>("detail.retry_after_ms", true, &d->at("retry_after_ms")).value_or(0)};
  }
  if (const JsonValue* o = r.Get("owner", false)) {
    if (!o->is_object() || !o->contains("node_id") || !o->contains("generation")) {
      r.Fail(DecodeErrorCode::kInvalidJson, "owner", "needs node_id and generation");
      return;
    }
    BinaryPublishAck::Owner owner;
    owner.node_id = r.Text("owner.node_id", true, &o->at("node_id")).value_or("");
    if (auto addr = o->find("addr"); addr != o->end() && !addr->is_null()) {
      owner.addr = r.Text("owner.addr", true, &*addr);
    }
    owner.generation =
        r.Unsigned<uint64_t>("owner.generation", true, &o->at("generation")).value_or(0);
    a.owner = owner;
  }
  a.offset = r.Unsigned<uint64_t>("offset", false);
}

void ReadCanonicalEvents(CanonicalReader& r, const JsonValue& j, BinaryEventBatch& b) {
  b.subscription_id = r.Unsigned<uint64_t>("subscription_id", false);
  b.base_offset = r.Unsigned<uint64_t>("base_offset", false);
  b.skipped_before = r.Unsigned<uint64_t>("skipped_before", false);
  if (r.Has("publisher")) b.publisher = r.Text("publisher", true);
  if (auto ts = j.find("timestamps"); ts != j.end() && !ts->is_null()) {
    if (!ts->is_boolean()) {
      r.Fail(DecodeErrorCode::kInvalidJson, "timestamps", "expected a boolean");
      return;
    }
    b.has_timestamps = ts->get<bool>();
  }
  const JsonValue* events = r.Get("events", true);
  if (!events) return;
  if (!events->is_array()) {
    r.Fail(DecodeErrorCode::kInvalidJson, "events", "expected an array");
    return;
  }
  for (const auto& e : *events) {
    if (!e.is_object() || !e.contains("payload")) {
      r.Fail(DecodeErrorCode::kInvalidJson, "events[]", "expected {payload, timestamp_micros}");
      return;
    }
    BinaryEventBatch::Item item;
    auto payload = r.Base64("events[].payload", true, &e.at("payload"));
    if (!payload) return;
    item.payload = *payload;
    if (b.has_timestamps) {
      auto ts = e.find("timestamp_micros");
      if (ts == e.end()) {
        r.Fail(DecodeErrorCode::kInvalidJson, "events[].timestamp_micros", "missing");
        return;
      }
      item.timestamp_micros =
          r.Unsigned<uint64_t>("events[].timestamp_micros", true, &*ts).value_or(0);
    }
    b.events.push_back(item);
  }
}

}  // namespace

DecodeResult<OwnedFrame> FrameFromCanonicalJson(std::string_view text) {
  try {
    if (!IsValidUtf8(text)) return DecodeFail(DecodeErrorCode::kInvalidUtf8, "not valid UTF-8");
    if (JsonNestingDepth(text) > kMaxJsonDepth) {
      return DecodeFail(DecodeErrorCode::kInvalidJson, "JSON nested deeper than 128 levels");
    }
    auto j = JsonValue::parse(text.begin(), text.end(), nullptr, false);
    if (j.is_discarded() || !j.is_object()) {
      return DecodeFail(DecodeErrorCode::kInvalidJson, "canonical frame: expected a JSON object");
    }
    auto kind = j.find("frame");
    if (kind == j.end() || !kind->is_string()) {
      return DecodeFail(DecodeErrorCode::kInvalidJson, "canonical frame: missing string \"frame\"");
    }
    const std::string& name = kind->get_ref<const std::string&>();
    OwnedFrame owned;
    if (name == "json") {
      auto msg = j.find("message");
      if (msg == j.end()) {
        return DecodeFail(DecodeErrorCode::kInvalidJson, "canonical frame: missing \"message\"");
      }
      auto m = DecodeMessageObject(*msg, msg->dump());
      if (!m) return tl::unexpected(m.error());
      owned.frame = std::move(*m);
    } else {
      CanonicalReader r(j, owned);
      if (name == "publish_batch") {
        BinaryPublishBatch b;
        ReadCanonicalBatch(r, b);
        owned.frame = std::move(b);
      } else if (name == "publish_ack") {
        BinaryPublishAck a;
        ReadCanonicalAck(r, a);
        owned.frame = std::move(a);
      } else if (name == "event_batch") {
        BinaryEventBatch b;
        ReadCanonicalEvents(r, j, b);
        owned.frame = std::move(b);
      } else {
        return DecodeFail(DecodeErrorCode::kInvalidValue,
                          "canonical frame: unknown frame \"" + name + "\"");
      }
      if (r.error) return tl::unexpected(*r.error);
    }
    if (auto flags = j.find("flags"); flags != j.end() && !flags->is_null()) {
      if (!flags->is_number_unsigned() || flags->get<uint64_t>() != FrameFlags(owned.frame)) {
        return DecodeFail(DecodeErrorCode::kInvalidValue,
                          "canonical frame: \"flags\" does not match the content (expected " +
                              std::to_string(FrameFlags(owned.frame)) + ")");
      }
    }
    return owned;
  } catch (const nlohmann::json::exception& e) {
    return DecodeFail(DecodeErrorCode::kInvalidJson, e.what());
  }
}

}  // namespace felix::wire::flx1
