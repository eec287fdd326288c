#include "broker/commit_record.h"

#include "wire/byte_reader.h"
#include "wire/byte_writer.h"

namespace felix::broker {
namespace {

tl::unexpected<CommitRecordError> Refused(CommitRecordError e) {
  return tl::unexpected<CommitRecordError>(e);
}

}  // namespace

const char* CommitRecordErrorName(CommitRecordError error) {
  switch (error) {
    case CommitRecordError::kTruncated:
      return "commit record truncated";
    case CommitRecordError::kVersion:
      return "unknown commit record version";
    case CommitRecordError::kOpKind:
      return "unknown commit op kind";
    case CommitRecordError::kTrailing:
      return "trailing bytes after the commit record";
  }
  return "bad commit record";
}

std::vector<uint8_t> EncodeCommitRecord(const CommitRecord& record) {
  std::vector<uint8_t> out;
  size_t size = 1 + 4 + record.event.size() + 4;
  for (const CommitOp& op : record.ops) size += 1 + 4 + op.key.size() + 4 + op.value.size();
  out.reserve(size);
  wire::ByteWriter w(out);
  w.WriteU8(kCommitRecordVersion);
  w.WriteBytes32(std::span<const uint8_t>(record.event));
  w.WriteU32(static_cast<uint32_t>(record.ops.size()));
  for (const CommitOp& op : record.ops) {
    w.WriteU8(static_cast<uint8_t>(op.kind));
    w.WriteBytes32(std::string_view(op.key));
    if (op.kind == CommitOp::Kind::kPut) w.WriteBytes32(std::span<const uint8_t>(op.value));
  }
  return out;
}

tl::expected<std::span<const uint8_t>, CommitRecordError> CommitEventBytes(
    std::span<const uint8_t> body) {
  wire::ByteReader r(body);
  auto version = r.ReadU8("version");
  if (!version) return Refused(CommitRecordError::kTruncated);
  if (*version != kCommitRecordVersion) return Refused(CommitRecordError::kVersion);
  auto event = r.ReadBytes32("event");
  if (!event) return Refused(CommitRecordError::kTruncated);
  return *event;
}

tl::expected<CommitRecord, CommitRecordError> DecodeCommitRecord(std::span<const uint8_t> body) {
  auto event = CommitEventBytes(body);
  if (!event) return Refused(event.error());
  wire::ByteReader r(body.subspan(1 + 4 + event->size()));
  auto count = r.ReadU32("op_count");
  // Every op takes at least 5 bytes (kind + key length): bound the count before reserving.
  if (!count || !r.CheckCount(*count, 5, UINT32_MAX, "ops")) {
    return Refused(CommitRecordError::kTruncated);
  }
  CommitRecord out;
  out.event.assign(event->begin(), event->end());
  out.ops.reserve(*count);
  for (uint32_t i = 0; i < *count; ++i) {
    auto kind = r.ReadU8("op");
    if (!kind) return Refused(CommitRecordError::kTruncated);
    if (*kind > 1) return Refused(CommitRecordError::kOpKind);
    auto key = r.ReadBytes32("key");
    if (!key) return Refused(CommitRecordError::kTruncated);
    CommitOp op;
    op.kind = static_cast<CommitOp::Kind>(*kind);
    op.key.assign(key->begin(), key->end());
    if (op.kind == CommitOp::Kind::kPut) {
      auto value = r.ReadBytes32("value");
      if (!value) return Refused(CommitRecordError::kTruncated);
      op.value.assign(value->begin(), value->end());
    }
    out.ops.push_back(std::move(op));
  }
  if (!r.ExpectEnd("commit record")) return Refused(CommitRecordError::kTrailing);
  return out;
}

}  // namespace felix::broker
