#include "broker/protocol_codes.h"

namespace felix::broker {

uint16_t ProtocolCodeFor(const Error& error) {
  using wire::flx1::ProtocolErrorCode;
  switch (error.code) {
    case ErrorCode::kIo:
    case ErrorCode::kCorruption:
      return Code(ProtocolErrorCode::kStorage);
    case ErrorCode::kUnavailable:
      return Code(ProtocolErrorCode::kShardUnavailable);
    case ErrorCode::kInvalidArgument:
      return Code(ProtocolErrorCode::kInvalidRequest);
    case ErrorCode::kNotFound:
      return Code(ProtocolErrorCode::kNotFound);
    case ErrorCode::kTimeout:
      // The one timeout a broker request path answers: a `Quorum` write a majority did not
      // confirm in time (commit_gate.h). Class outcome_unknown, as `internal` would be.
      return Code(ProtocolErrorCode::kQuorumTimeout);
    default:
      return Code(ProtocolErrorCode::kInternal);
  }
}

}  // namespace felix::broker
