#include "wire/flx1/binary.h"

#include <limits>
#include <string>

#include "wire/byte_reader.h"
#include "wire/byte_writer.h"
#include "wire/flx1/constants.h"

namespace felix::wire::flx1 {

namespace {

#define FLX1_TRY(var, expr)                                                  \
  auto var##_result = (expr);                                                \
  if (!var##_result) return tl::unexpected(std::move(var##_result.error())); \
  auto var = *var##_result

#define FLX1_CHECK(expr)                                                       \
  do {                                                                         \
    auto check_result = (expr);                                                \
    if (!check_result) return tl::unexpected(std::move(check_result.error())); \
  } while (0)

std::string_view AsView(std::span<const uint8_t> bytes) {
  return {reinterpret_cast<const char*>(bytes.data()), bytes.size()};
}

Result<void> CheckText16(std::string_view s, const char* field) {
  if (s.size() > kMaxBinaryStringBytes) {
    return Fail(ErrorCode::kInvalidArgument, std::string(field) + ": longer than 65535 bytes");
  }
  if (!IsValidUtf8(s)) {
    return Fail(ErrorCode::kInvalidArgument, std::string(field) + ": not valid UTF-8");
  }
  return {};
}

Result<void> CheckBytes32(std::string_view s, const char* field) {
  if (s.size() > std::numeric_limits<uint32_t>::max()) {
    return Fail(ErrorCode::kInvalidArgument, std::string(field) + ": longer than u32 max");
  }
  return {};
}

}  // namespace

uint16_t PublishBatchFlags(const BinaryPublishBatch& b) {
  uint16_t flags = kFlagBinaryPublishBatch;
  if (b.acked) flags |= kFlagBinaryPublishAcked;
  if (b.idempotent) flags |= kFlagBinaryPublishIdempotent;
  if (b.key) flags |= kFlagBinaryPublishKeyed;
  return flags;
}

uint16_t PublishAckFlags(const BinaryPublishAck& a) {
  uint16_t flags = kFlagBinaryPublishAck;
  if (a.code) flags |= kFlagBinaryPublishAckCode;
  if (a.detail) flags |= kFlagBinaryPublishAckDetail;
  if (a.owner) flags |= kFlagBinaryPublishAckOwner;
  if (a.offset) flags |= kFlagBinaryPublishAckOffset;
  return flags;
}

uint16_t EventBatchFlags(const BinaryEventBatch& b) {
  uint16_t flags = b.subscription_id ? kFlagBinaryEventBatch : kFlagBinaryEventBatchShared;
  if (b.base_offset) flags |= kFlagEventBatchOffsets;
  if (b.skipped_before) flags |= kFlagEventBatchSkipped;
  if (b.publisher) flags |= kFlagEventBatchPublisher;
  if (b.has_timestamps) flags |= kFlagEventBatchTimestamps;
  return flags;
}

// ---- §5.1 publish batch ----

DecodeResult<BinaryPublishBatch> DecodePublishBatch(uint16_t flags,
                                                    std::span<const uint8_t> payload) {
  ByteReader r(payload);
  BinaryPublishBatch b;
  if (flags & kFlagBinaryPublishAcked) {
    FLX1_TRY(request_id, r.ReadU64("publish_batch.request_id"));
    FLX1_TRY(ack_mode, r.ReadU8("publish_batch.ack_mode"));
    if (ack_mode != 1 && ack_mode != 2) {
      return DecodeFail(DecodeErrorCode::kInvalidValue,
                        "publish_batch.ack_mode: " + std::to_string(ack_mode) + " (1 or 2)");
    }
    b.acked = BinaryPublishBatch::Acked{request_id,
                                        ack_mode == 1 ? AckMode::kPerMessage : AckMode::kPerBatch};
  }
  if (flags & kFlagBinaryPublishIdempotent) {
    if (!b.acked) {
      return DecodeFail(DecodeErrorCode::kInvalidValue, "publish_batch: 0x0100 without 0x0008");
    }
    if (b.acked->ack_mode != AckMode::kPerBatch) {
      return DecodeFail(DecodeErrorCode::kInvalidValue,
                        "publish_batch.ack_mode: idempotent batches are per_batch (2)");
    }
    FLX1_TRY(producer_id, r.ReadU64("publish_batch.producer_id"));
    FLX1_TRY(sequence, r.ReadU64("publish_batch.sequence"));
    b.idempotent = BinaryPublishBatch::Idempotent{producer_id, sequence};
  }
  if (flags & kFlagBinaryPublishKeyed) {
    FLX1_TRY(key, r.ReadBytes16("publish_batch.key"));
    b.key = AsView(key);
  }
  FLX1_TRY(tenant, r.ReadString16("publish_batch.tenant_id"));
  FLX1_TRY(ns, r.ReadString16("publish_batch.namespace"));
  FLX1_TRY(stream, r.ReadString16("publish_batch.stream"));
  b.tenant_id = tenant;
  b.namespace_ = ns;
  b.stream = stream;
  FLX1_TRY(count, r.ReadU32("publish_batch.count"));
  FLX1_CHECK(r.CheckCount(count, 4, std::numeric_limits<uint32_t>::max(), "publish_batch.count"));
  b.payloads.reserve(count);
  for (uint32_t i = 0; i < count; ++i) {
    FLX1_TRY(p, r.ReadBytes32("publish_batch.payload"));
    b.payloads.push_back(AsView(p));
  }
  FLX1_CHECK(r.ExpectEnd("publish_batch"));
  return b;
}

Result<void> EncodePublishBatch(const BinaryPublishBatch& b, std::vector<uint8_t>& out) {
  ByteWriter w(out);
  size_t size = 8 + 1 + 16 + 2 + (b.key ? b.key->size() : 0) + 6 + b.tenant_id.size() +
                b.namespace_.size() + b.stream.size() + 4;
  for (const auto& p : b.payloads) size += 4 + p.size();
  w.Reserve(size);
  if (b.idempotent && !b.acked) {
    return Fail(ErrorCode::kInvalidArgument, "publish_batch: idempotent needs the acked prefix");
  }
  if (b.acked) {
    uint8_t mode = 0;
    if (b.acked->ack_mode == AckMode::kPerMessage) mode = 1;
    if (b.acked->ack_mode == AckMode::kPerBatch) mode = 2;
    if (mode == 0) {
      return Fail(ErrorCode::kInvalidArgument, "publish_batch: acked form has no ack mode none");
    }
    if (b.idempotent && mode != 2) {
      return Fail(ErrorCode::kInvalidArgument, "publish_batch: idempotent batches are per_batch");
    }
    w.WriteU64(b.acked->request_id);
    w.WriteU8(mode);
  }
  if (b.idempotent) {
    w.WriteU64(b.idempotent->producer_id);
    w.WriteU64(b.idempotent->sequence);
  }
  if (b.key) {
    if (b.key->size() > kMaxBinaryStringBytes) {
      return Fail(ErrorCode::kInvalidArgument, "publish_batch.key: longer than 65535 bytes");
    }
    w.WriteBytes16(*b.key);
  }
  for (auto [s, name] : {std::pair{b.tenant_id, "publish_batch.tenant_id"},
                         std::pair{b.namespace_, "publish_batch.namespace"},
                         std::pair{b.stream, "publish_batch.stream"}}) {
    if (auto ok = CheckText16(s, name); !ok) return ok;
    w.WriteBytes16(s);
  }
  if (b.payloads.size() > std::numeric_limits<uint32_t>::max()) {
    return Fail(ErrorCode::kInvalidArgument, "publish_batch: too many payloads");
  }
  w.WriteU32(static_cast<uint32_t>(b.payloads.size()));
  for (const auto& p : b.payloads) {
    if (auto ok = CheckBytes32(p, "publish_batch.payload"); !ok) return ok;
    w.WriteBytes32(p);
  }
  return {};
}

// ---- §5.2 publish acknowledgement ----

DecodeResult<BinaryPublishAck> DecodePublishAck(uint16_t flags, std::span<const uint8_t> payload) {
  ByteReader r(payload);
  BinaryPublishAck a;
  FLX1_TRY(status, r.ReadU8("publish_ack.status"));
  if (status > 1) {
    return DecodeFail(DecodeErrorCode::kInvalidValue,
                      "publish_ack.status: " + std::to_string(status) + " (0 or 1)");
  }
  a.status = static_cast<BinaryPublishAck::Status>(status);
  FLX1_TRY(request_id, r.ReadU64("publish_ack.request_id"));
  a.request_id = request_id;
  FLX1_TRY(message, r.ReadString16("publish_ack.message"));
  a.message = message;
  if (flags & kFlagBinaryPublishAckCode) {
    FLX1_TRY(code, r.ReadU16("publish_ack.code"));
    FLX1_TRY(retry, r.ReadU8("publish_ack.retry"));
    a.code = BinaryPublishAck::Code{code, retry};
  }
  if (flags & kFlagBinaryPublishAckDetail) {
    if (!a.code) {
      return DecodeFail(DecodeErrorCode::kInvalidValue, "publish_ack: 0x0400 without 0x0200");
    }
    FLX1_TRY(reason, r.ReadString16("publish_ack.reason"));
    FLX1_TRY(retry_after, r.ReadU64("publish_ack.retry_after_ms"));
    a.detail = BinaryPublishAck::Detail{reason, retry_after};
  }
  if (flags & kFlagBinaryPublishAckOwner) {
    FLX1_TRY(node_id, r.ReadString16("publish_ack.node_id"));
    FLX1_TRY(addr, r.ReadString16("publish_ack.addr"));
    FLX1_TRY(generation, r.ReadU64("publish_ack.generation"));
    a.owner = BinaryPublishAck::Owner{
        node_id, addr.empty() ? std::nullopt : std::optional<std::string_view>(addr), generation};
  }
  if (flags & kFlagBinaryPublishAckOffset) {
    if (a.status != BinaryPublishAck::Status::kOk) {
      return DecodeFail(DecodeErrorCode::kInvalidValue, "publish_ack: offset on a failed ack");
    }
    FLX1_TRY(offset, r.ReadU64("publish_ack.offset"));
    a.offset = offset;
  }
  FLX1_CHECK(r.ExpectEnd("publish_ack"));
  return a;
}

Result<void> EncodePublishAck(const BinaryPublishAck& a, std::vector<uint8_t>& out) {
  if (a.status != BinaryPublishAck::Status::kOk && a.status != BinaryPublishAck::Status::kError) {
    return Fail(ErrorCode::kInvalidArgument, "publish_ack: status out of range");
  }
  if (a.detail && !a.code) {
    return Fail(ErrorCode::kInvalidArgument, "publish_ack: detail needs a code");
  }
  if (a.offset && a.status != BinaryPublishAck::Status::kOk) {
    return Fail(ErrorCode::kInvalidArgument, "publish_ack: offset only on successful acks");
  }
  if (a.owner && a.owner->addr && a.owner->addr->empty()) {
    return Fail(ErrorCode::kInvalidArgument,
                "publish_ack.addr: empty means absent on the wire; use nullopt");
  }
  ByteWriter w(out);
  w.WriteU8(static_cast<uint8_t>(a.status));
  w.WriteU64(a.request_id);
  if (auto ok = CheckText16(a.message, "publish_ack.message"); !ok) return ok;
  w.WriteBytes16(a.message);
  if (a.code) {
    w.WriteU16(a.code->code);
    w.WriteU8(a.code->retry);
  }
  if (a.detail) {
    if (auto ok = CheckText16(a.detail->reason, "publish_ack.reason"); !ok) return ok;
    w.WriteBytes16(a.detail->reason);
    w.WriteU64(a.detail->retry_after_ms);
  }
  if (a.owner) {
    if (auto ok = CheckText16(a.owner->node_id, "publish_ack.node_id"); !ok) return ok;
    const std::string_view addr = a.owner->addr.value_or(std::string_view());
    if (auto ok = CheckText16(addr, "publish_ack.addr"); !ok) return ok;
    w.WriteBytes16(a.owner->node_id);
    w.WriteBytes16(addr);
    w.WriteU64(a.owner->generation);
  }
  if (a.offset) w.WriteU64(*a.offset);
  return {};
}

// ---- §5.3 event batch ----

DecodeResult<BinaryEventBatch> DecodeEventBatch(uint16_t flags, std::span<const uint8_t> payload) {
  ByteReader r(payload);
  BinaryEventBatch b;
  if (flags & kFlagBinaryEventBatch) {
    FLX1_TRY(id, r.ReadU64("event_batch.subscription_id"));
    b.subscription_id = id;
  }
  if (flags & kFlagEventBatchOffsets) {
    FLX1_TRY(base, r.ReadU64("event_batch.base_offset"));
    b.base_offset = base;
  }
  if (flags & kFlagEventBatchSkipped) {
    if (!b.base_offset) {
      return DecodeFail(DecodeErrorCode::kInvalidValue, "event_batch: 0x0800 without 0x0020");
    }
    FLX1_TRY(skipped, r.ReadU64("event_batch.skipped_before"));
    b.skipped_before = skipped;
  }
  if (flags & kFlagEventBatchPublisher) {
    FLX1_TRY(len, r.ReadU8("event_batch.publisher_len"));
    FLX1_TRY(bytes, r.ReadBytes(len, "event_batch.publisher"));
    const std::string_view publisher = AsView(bytes);
    if (!IsValidUtf8(publisher)) {
      return DecodeFail(DecodeErrorCode::kInvalidUtf8, "event_batch.publisher: not valid UTF-8");
    }
    b.publisher = publisher;
  }
  b.has_timestamps = (flags & kFlagEventBatchTimestamps) != 0;
  FLX1_TRY(count, r.ReadU32("event_batch.count"));
  FLX1_CHECK(r.CheckCount(count, b.has_timestamps ? 12 : 4, std::numeric_limits<uint32_t>::max(),
                          "event_batch.count"));
  b.events.reserve(count);
  for (uint32_t i = 0; i < count; ++i) {
    BinaryEventBatch::Item item;
    if (b.has_timestamps) {
      FLX1_TRY(ts, r.ReadU64("event_batch.timestamp_micros"));
      item.timestamp_micros = ts;
    }
    FLX1_TRY(p, r.ReadBytes32("event_batch.payload"));
    item.payload = AsView(p);
    b.events.push_back(item);
  }
  FLX1_CHECK(r.ExpectEnd("event_batch"));
  return b;
}

Result<void> EncodeEventBatch(const BinaryEventBatch& b, std::vector<uint8_t>& out) {
  if (b.skipped_before && !b.base_offset) {
    return Fail(ErrorCode::kInvalidArgument, "event_batch: skipped_before needs base_offset");
  }
  if (b.publisher && b.publisher->size() > kMaxPublisherBytes) {
    return Fail(ErrorCode::kInvalidArgument, "event_batch.publisher: longer than 255 bytes");
  }
  if (b.publisher && !IsValidUtf8(*b.publisher)) {
    return Fail(ErrorCode::kInvalidArgument, "event_batch.publisher: not valid UTF-8");
  }
  if (b.events.size() > std::numeric_limits<uint32_t>::max()) {
    return Fail(ErrorCode::kInvalidArgument, "event_batch: too many events");
  }
  ByteWriter w(out);
  if (b.subscription_id) w.WriteU64(*b.subscription_id);
  if (b.base_offset) w.WriteU64(*b.base_offset);
  if (b.skipped_before) w.WriteU64(*b.skipped_before);
  if (b.publisher) {
    w.WriteU8(static_cast<uint8_t>(b.publisher->size()));
    w.WriteBytes(*b.publisher);
  }
  w.WriteU32(static_cast<uint32_t>(b.events.size()));
  for (const auto& e : b.events) {
    if (b.has_timestamps) w.WriteU64(e.timestamp_micros);
    if (auto ok = CheckBytes32(e.payload, "event_batch.payload"); !ok) return ok;
    w.WriteBytes32(e.payload);
  }
  return {};
}

#undef FLX1_TRY
#undef FLX1_CHECK

}  // namespace felix::wire::flx1
