// The startup check that refuses an etcd older than 3.4.20 (cluster-etcd.md §3: earlier 3.4
// releases renew leases without a linearizable check, so a keepalive answered by a stale member
// can extend a lease the cluster already expired).
#pragma once

#include <string_view>

#include "etcd/etcd_client.h"

namespace felix::etcd {

struct EtcdVersion {
  int major = 0;
  int minor = 0;
  int patch = 0;
  auto operator<=>(const EtcdVersion&) const = default;
};

inline constexpr EtcdVersion kMinimumEtcdVersion{3, 4, 20};

// Parses "3.4.23" (a "-suffix" after the patch number is ignored). kInvalidArgument otherwise.
EtcdResult<EtcdVersion> ParseEtcdVersion(std::string_view text);

// kVersionTooOld when `version` is below kMinimumEtcdVersion, kInvalidArgument when unparsable.
EtcdResult<EtcdVersion> CheckEtcdVersion(std::string_view version);

// Asks the server (Maintenance.Status) and applies CheckEtcdVersion; call errors pass through.
EtcdResult<EtcdVersion> VerifyServerVersion(EtcdClient& client);

}  // namespace felix::etcd
