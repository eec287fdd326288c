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
    default:
      return Code(ProtocolErrorCode::kInternal);
  }
}

}  // namespace felix::broker
