// Sender-side kind selection (§6.1, §6.5, §6.9, §7.1) and the receiver's target log (§7.2).
#include <algorithm>
#include <utility>

#include "wire/flxi/flxi.h"

namespace felix::wire::flxi {

Kind ForwardPublishKind(const ForwardPublish& m) {
  return m.credential ? Kind::kAuthorizedForwardPublish : Kind::kForwardPublish;
}

Kind CacheOpFrameKind(const CacheOp& m) {
  if (m.condition) return Kind::kConditionalForwardCacheOp;
  return m.credential ? Kind::kAuthorizedForwardCacheOp : Kind::kForwardCacheOp;
}

Kind HelloKind(const Hello& m, bool answer) {
  if (m.capabilities) return answer ? Kind::kHelloCapableOk : Kind::kHelloCapable;
  return answer ? Kind::kHelloOk : Kind::kHello;
}

Result<Frame> MakeRecordsFrame(ReplicaLog log, Records m, bool labelled, bool timed) {
  bool stream = log == ReplicaLog::kStream;
  bool any_mark = HasAnyMark(m.marks);
  if (m.marks.size() > m.payloads.size()) {
    return felix::Fail(felix::ErrorCode::kInvalidArgument, "records: more marks than payloads");
  }
  // Times travel only with labels; without them they are dropped (§7.1).
  if (!labelled) timed = false;
  if (!timed) m.times.clear();
  Kind kind;
  if (labelled) {
    kind = timed ? Kind::kReplicateTimedRecords : Kind::kReplicateLabelledRecords;
  } else if (m.commit_offset) {
    kind = Kind::kReplicateCommittedRecords;
  } else if (stream && any_mark) {
    kind = Kind::kReplicateMarkedRecords;
  } else {
    if (any_mark) {
      return felix::Fail(felix::ErrorCode::kInvalidArgument,
                         std::string("records: marks on the ") + ReplicaLogName(log) +
                             " log need a commit offset or labels to travel");
    }
    switch (log) {
      case ReplicaLog::kStream:
        kind = Kind::kReplicateRecords;
        break;
      case ReplicaLog::kCache:
        kind = Kind::kReplicateCacheRecords;
        break;
      case ReplicaLog::kGroupCursors:
        kind = Kind::kReplicateGroupRecords;
        break;
      case ReplicaLog::kGroupDeadLetters:
        kind = Kind::kReplicateDeadLetterRecords;
        break;
      case ReplicaLog::kCounters:
        kind = Kind::kReplicateCounterRecords;
        break;
      default:
        return felix::Fail(felix::ErrorCode::kInvalidArgument, "records: unknown replica log");
    }
  }
  bool has_marks = kind == Kind::kReplicateMarkedRecords ||
                   kind == Kind::kReplicateCommittedRecords ||
                   kind == Kind::kReplicateLabelledRecords || kind == Kind::kReplicateTimedRecords;
  bool has_log = kind == Kind::kReplicateCommittedRecords ||
                 kind == Kind::kReplicateLabelledRecords || kind == Kind::kReplicateTimedRecords;
  if (has_marks) {
    m.marks.resize(m.payloads.size());
  } else {
    m.marks.clear();
  }
  m.log = has_log ? std::optional<ReplicaLog>(log) : std::nullopt;
  if (!has_log) m.commit_offset.reset();
  if (!labelled) m.generations.clear();
  if (kind == Kind::kReplicateTimedRecords && m.times.size() != m.payloads.size()) {
    return felix::Fail(felix::ErrorCode::kInvalidArgument, "records: needs one time per payload");
  }
  return Frame{kind, std::move(m)};
}

std::optional<ReplicaLog> TargetLog(const Frame& frame) {
  switch (frame.kind) {
    case Kind::kReplicateRecords:
    case Kind::kReplicateMarkedRecords:
    case Kind::kReplicateBootstrap:
      return ReplicaLog::kStream;
    case Kind::kReplicateCacheRecords:
    case Kind::kReplicateCacheBootstrap:
      return ReplicaLog::kCache;
    case Kind::kReplicateGroupRecords:
    case Kind::kReplicateGroupBootstrap:
      return ReplicaLog::kGroupCursors;
    case Kind::kReplicateDeadLetterRecords:
    case Kind::kReplicateDeadLetterBootstrap:
      return ReplicaLog::kGroupDeadLetters;
    case Kind::kReplicateCounterRecords:
    case Kind::kReplicateCounterBootstrap:
      return ReplicaLog::kCounters;
    case Kind::kReplicateCommittedRecords:
    case Kind::kReplicateLabelledRecords:
    case Kind::kReplicateTimedRecords:
      if (const auto* r = std::get_if<Records>(&frame.body)) return r->log;
      return std::nullopt;
    case Kind::kReplicateRebuild:
      if (const auto* r = std::get_if<Rebuild>(&frame.body)) return r->log;
      return std::nullopt;
    case Kind::kFence:
      if (const auto* r = std::get_if<Fence>(&frame.body)) return r->log;
      return std::nullopt;
    case Kind::kReplicateFetch:
    case Kind::kReplicateLabelledFetch:
    case Kind::kReplicateTimedFetch:
      if (const auto* r = std::get_if<Fetch>(&frame.body)) return r->log;
      return std::nullopt;
    default:
      return std::nullopt;
  }
}

uint32_t ClampFetchBytes(uint32_t max_bytes) {
  return std::clamp<uint32_t>(max_bytes, 1, kMaxFetchAnswerBytes);
}

}  // namespace felix::wire::flxi
