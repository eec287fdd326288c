#include "etcd/etcd_error.h"

namespace felix::etcd {

const char* EtcdErrcName(EtcdErrc code) {
  switch (code) {
    case EtcdErrc::kTimeout:
      return "etcd_timeout";
    case EtcdErrc::kUnavailable:
      return "etcd_unavailable";
    case EtcdErrc::kLeaseNotFound:
      return "etcd_lease_not_found";
    case EtcdErrc::kCompacted:
      return "etcd_compacted";
    case EtcdErrc::kVersionTooOld:
      return "etcd_version_too_old";
    case EtcdErrc::kInvalidArgument:
      return "etcd_invalid_argument";
    case EtcdErrc::kCanceled:
      return "etcd_canceled";
    case EtcdErrc::kInternal:
      return "etcd_internal";
  }
  return "etcd_unknown";
}

std::string EtcdError::ToString() const {
  return std::string(EtcdErrcName(code)) + ": " + message;
}

Error EtcdError::ToError() const {
  ErrorCode broad = ErrorCode::kInternal;
  switch (code) {
    case EtcdErrc::kTimeout:
      broad = ErrorCode::kTimeout;
      break;
    case EtcdErrc::kUnavailable:
    case EtcdErrc::kCanceled:
      broad = ErrorCode::kUnavailable;
      break;
    case EtcdErrc::kLeaseNotFound:
      broad = ErrorCode::kNotFound;
      break;
    case EtcdErrc::kCompacted:
    case EtcdErrc::kVersionTooOld:
    case EtcdErrc::kInvalidArgument:
      broad = ErrorCode::kInvalidArgument;
      break;
    case EtcdErrc::kInternal:
      broad = ErrorCode::kInternal;
      break;
  }
  return Error{broad, ToString()};
}

}  // namespace felix::etcd
