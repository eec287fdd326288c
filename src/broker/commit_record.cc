#include "broker/commit_record.h"

namespace felix::broker {
namespace {

void PutU32(std::vector<uint8_t>& out, uint32_t v) {
  for (int shift = 24; shift >= 0; shift -= 8) out.push_back(static_cast<uint8_t>(v >> shift));
}

// Reads the body front to back; every read checks the bytes left first.
class Reader {
 public:
  explicit Reader(std::span<const uint8_t> bytes) : bytes_(bytes) {}
  size_t left() const { return bytes_.size() - at_; }
  bool U8(uint8_t* v) {
    if (left() < 1) return false;
    *v = bytes_[at_++];
    return true;
  }
  bool U32(uint32_t* v) {
    if (left() < 4) return false;
    *v = 0;
    for (int i = 0; i < 4; ++i) *v = (*v << 8) | bytes_[at_++];
    return true;
  }
  bool Bytes(uint32_t len, std::span<const uint8_t>* out) {
    if (left() < len) return false;
    *out = bytes_.subspan(at_, len);
    at_ += len;
    return true;
  }

 private:
  std::span<const uint8_t> bytes_;
  size_t at_ = 0;
};

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
  out.push_back(kCommitRecordVersion);
  PutU32(out, static_cast<uint32_t>(record.event.size()));
  out.insert(out.end(), record.event.begin(), record.event.end());
  PutU32(out, static_cast<uint32_t>(record.ops.size()));
  for (const CommitOp& op : record.ops) {
    out.push_back(static_cast<uint8_t>(op.kind));
    PutU32(out, static_cast<uint32_t>(op.key.size()));
    out.insert(out.end(), op.key.begin(), op.key.end());
    if (op.kind == CommitOp::Kind::kPut) {
      PutU32(out, static_cast<uint32_t>(op.value.size()));
      out.insert(out.end(), op.value.begin(), op.value.end());
    }
  }
  return out;
}

tl::expected<std::span<const uint8_t>, CommitRecordError> CommitEventBytes(
    std::span<const uint8_t> body) {
  Reader r(body);
  uint8_t version = 0;
  uint32_t event_len = 0;
  std::span<const uint8_t> event;
  if (!r.U8(&version)) return Refused(CommitRecordError::kTruncated);
  if (version != kCommitRecordVersion) return Refused(CommitRecordError::kVersion);
  if (!r.U32(&event_len) || !r.Bytes(event_len, &event)) {
    return Refused(CommitRecordError::kTruncated);
  }
  return event;
}

tl::expected<CommitRecord, CommitRecordError> DecodeCommitRecord(std::span<const uint8_t> body) {
  auto event = CommitEventBytes(body);
  if (!event) return Refused(event.error());
  Reader r(body.subspan(1 + 4 + event->size()));
  uint32_t count = 0;
  if (!r.U32(&count)) return Refused(CommitRecordError::kTruncated);
  // Every op takes at least 5 bytes (kind + key length): bound the count before reserving.
  if (count > r.left() / 5) return Refused(CommitRecordError::kTruncated);
  CommitRecord out;
  out.event.assign(event->begin(), event->end());
  out.ops.reserve(count);
  for (uint32_t i = 0; i < count; ++i) {
    uint8_t kind = 0;
    uint32_t len = 0;
    std::span<const uint8_t> key, value;
    if (!r.U8(&kind)) return Refused(CommitRecordError::kTruncated);
    if (kind > 1) return Refused(CommitRecordError::kOpKind);
    if (!r.U32(&len) || !r.Bytes(len, &key)) return Refused(CommitRecordError::kTruncated);
    CommitOp op;
    op.kind = static_cast<CommitOp::Kind>(kind);
    op.key.assign(key.begin(), key.end());
    if (op.kind == CommitOp::Kind::kPut) {
      if (!r.U32(&len) || !r.Bytes(len, &value)) return Refused(CommitRecordError::kTruncated);
      op.value.assign(value.begin(), value.end());
    }
    out.ops.push_back(std::move(op));
  }
  if (r.left() != 0) return Refused(CommitRecordError::kTrailing);
  return out;
}

}  // namespace felix::broker
