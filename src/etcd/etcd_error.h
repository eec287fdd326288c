// EtcdError: the typed failure of every etcd call (real client and fake alike).
//
// Writes (Put, Delete, Transact, LeaseGrant, LeaseRevoke) that fail with kTimeout or
// kUnavailable are INDETERMINATE: etcd may or may not have applied them. Callers re-read before
// deciding (a create-if-absent txn re-run is safe; a blind put must not be assumed lost).
#pragma once

#include <string>

#include "common/result.h"

namespace felix::etcd {

enum class EtcdErrc {
  kTimeout,          // no answer before the call's deadline (etcd stopped, partitioned, slow)
  kUnavailable,      // no connection to any endpoint, or etcd has no leader
  kLeaseNotFound,    // the lease id is unknown (expired or revoked)
  kCompacted,        // a read or watch asked for a revision below etcd's compaction point
  kVersionTooOld,    // the server is older than the minimum Felix supports (3.4.20)
  kInvalidArgument,  // bad input from the caller (bad endpoint URL, key, ...) or refused by etcd
  kCanceled,         // the call or stream was cancelled locally (shutdown)
  kInternal,         // anything else etcd or gRPC reported
};

const char* EtcdErrcName(EtcdErrc code);

struct EtcdError {
  EtcdErrc code = EtcdErrc::kInternal;
  std::string message;

  std::string ToString() const;
  // The broad felix::Error class for code that does not care about etcd specifics.
  Error ToError() const;
};

template <typename T>
using EtcdResult = Result<T, EtcdError>;

inline tl::unexpected<EtcdError> EtcdFail(EtcdErrc code, std::string message) {
  return tl::unexpected<EtcdError>(EtcdError{code, std::move(message)});
}

inline EtcdResult<void> EtcdOk() {
  return {};
}

}  // namespace felix::etcd
