#include "cluster/peer_frames.h"

#include <variant>

namespace felix::cluster {
namespace {

namespace flxi = wire::flxi;

std::string_view CutToIdent(std::string_view s) {
  if (s.size() <= flxi::kMaxIdentBytes) return s;
  size_t n = flxi::kMaxIdentBytes;
  // Step back over continuation bytes so a multi-byte character is not split.
  while (n > 0 && (static_cast<uint8_t>(s[n]) & 0xC0) == 0x80) --n;
  return s.substr(0, n);
}

void PutBe(std::vector<uint8_t>& out, uint64_t v, int bytes) {
  for (int i = bytes - 1; i >= 0; --i) out.push_back(uint8_t(v >> (8 * i)));
}

}  // namespace

flxi::Kind RefusalKind(uint16_t request_kind) {
  using K = flxi::Kind;
  if (!flxi::IsKnownKind(request_kind)) return K::kForwardPublishError;
  switch (static_cast<K>(request_kind)) {
    case K::kForwardCacheOp:
    case K::kAuthorizedForwardCacheOp:
    case K::kConditionalForwardCacheOp:
      return K::kForwardCacheError;
    case K::kReplicateRecords:
    case K::kReplicateBootstrap:
    case K::kReplicateCacheRecords:
    case K::kReplicateCacheBootstrap:
    case K::kReplicateGroupRecords:
    case K::kReplicateGroupBootstrap:
    case K::kReplicateDeadLetterRecords:
    case K::kReplicateDeadLetterBootstrap:
    case K::kReplicateCounterRecords:
    case K::kReplicateCounterBootstrap:
    case K::kReplicateRebuild:
    case K::kReplicateMarkedRecords:
    case K::kReplicateCommittedRecords:
    case K::kFence:
    case K::kReplicateFetch:
    case K::kReplicateLabelledRecords:
    case K::kReplicateLabelledFetch:
    case K::kReplicateTimedRecords:
    case K::kReplicateTimedFetch:
      return K::kReplicateError;
    default:
      return K::kForwardPublishError;
  }
}

flxi::Frame Refusal(uint16_t request_kind, uint64_t correlation_id, flxi::ErrorCode code,
                    std::string_view detail) {
  flxi::Kind kind = RefusalKind(request_kind);
  if (kind == flxi::Kind::kReplicateError) {
    return flxi::Frame{kind, flxi::ReplicateError{correlation_id, code, 0, CutToIdent(detail)}};
  }
  return flxi::Frame{kind, flxi::ErrorAnswer{correlation_id, code, CutToIdent(detail)}};
}

uint64_t RequiredCapabilities(const flxi::Frame& frame) {
  using K = flxi::Kind;
  auto log = flxi::TargetLog(frame);
  const bool counters = log == flxi::ReplicaLog::kCounters;
  const bool cache_side = counters || log == flxi::ReplicaLog::kCache;
  switch (frame.kind) {
    case K::kFence:
      return flxi::kCapFence | (counters ? flxi::kCapCacheFence : 0);
    case K::kReplicateFetch:
      return flxi::kCapTailFetch | (counters ? flxi::kCapCacheFence : 0);
    case K::kReplicateLabelledFetch:
      return flxi::kCapGenerationLabels | (counters ? flxi::kCapCacheFence : 0);
    case K::kReplicateTimedFetch:
      return flxi::kCapRecordTimes | (counters ? flxi::kCapCacheFence : 0);
    case K::kReplicateLabelledRecords:
      return flxi::kCapGenerationLabels | (cache_side ? flxi::kCapCacheFence : 0);
    case K::kReplicateTimedRecords:
      return flxi::kCapRecordTimes | (cache_side ? flxi::kCapCacheFence : 0);
    case K::kPing:
      return flxi::kCapPing;
    default:
      return 0;
  }
}

Result<std::vector<uint8_t>> EncodeWithCorrelation(flxi::Frame frame, uint64_t correlation_id) {
  std::visit([correlation_id](auto& body) { body.correlation_id = correlation_id; }, frame.body);
  return flxi::EncodeFrame(frame);
}

std::vector<uint8_t> RawFrame(uint16_t kind, uint64_t correlation_id,
                              std::span<const uint8_t> rest) {
  std::vector<uint8_t> out;
  out.reserve(flxi::kHeaderBytes + 8 + rest.size());
  PutBe(out, flxi::kMagic, 4);
  PutBe(out, flxi::kVersion, 2);
  PutBe(out, kind, 2);
  PutBe(out, 8 + rest.size(), 4);
  PutBe(out, correlation_id, 8);
  out.insert(out.end(), rest.begin(), rest.end());
  return out;
}

void SetCorrelationId(std::vector<uint8_t>& frame, uint64_t correlation_id) {
  for (size_t i = 0; i < 8; ++i) {
    frame[flxi::kHeaderBytes + i] = uint8_t(correlation_id >> (8 * (7 - i)));
  }
}

std::optional<std::string> DescribeRefusal(uint16_t kind, std::span<const uint8_t> body) {
  if (!flxi::IsKnownKind(kind)) return std::nullopt;
  auto k = static_cast<flxi::Kind>(kind);
  if (k != flxi::Kind::kForwardPublishError && k != flxi::Kind::kForwardCacheError &&
      k != flxi::Kind::kReplicateError) {
    return std::nullopt;
  }
  auto frame = flxi::DecodeBody(k, body);
  if (!frame) return std::nullopt;
  flxi::ErrorCode code;
  std::string_view detail;
  if (const auto* e = std::get_if<flxi::ErrorAnswer>(&frame->body)) {
    code = e->code;
    detail = e->detail;
  } else if (const auto* r = std::get_if<flxi::ReplicateError>(&frame->body)) {
    code = r->code;
    detail = r->detail;
  } else {
    return std::nullopt;
  }
  return std::string(flxi::ErrorCodeName(code)) + " (code " +
         std::to_string(static_cast<uint16_t>(code)) + "): " + std::string(detail);
}

std::string ErrorCodeLabel(flxi::ErrorCode code) {
  std::string out;
  for (char c : std::string_view(flxi::ErrorCodeName(code))) {
    if (c >= 'A' && c <= 'Z') {
      if (!out.empty()) out += '_';
      c = static_cast<char>(c - 'A' + 'a');
    }
    out += c;
  }
  return out;
}

}  // namespace felix::cluster
