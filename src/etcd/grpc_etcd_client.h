// GrpcEtcdClient: EtcdClient over etcd's v3 gRPC API (plaintext; TLS to etcd is not supported
// yet and an https:// endpoint is refused).
//
// Endpoints: a comma list of URLs ("http://127.0.0.1:2379,http://10.0.0.2:2379"). One gRPC
// channel per endpoint; calls go to the current endpoint, and a transport failure (unavailable,
// deadline exceeded) moves "current" to the next endpoint for the calls that follow. A call
// first waits (within its share of the deadline) for its endpoint to connect and skips to the
// next one if it cannot: nothing was sent, so this holds for writes too. Once sent, reads
// (Range, LeaseTimeToLive, Status) are retried on the next endpoint within the same deadline
// when the failure was "unavailable"; writes are not (their outcome is unknown).
//
// Every unary call has a deadline (GrpcEtcdOptions::call_timeout). Watches and keepalive
// streams run on a thread each and hold no deadline; a watch reconnects with jittered backoff,
// resuming at last seen revision + 1. Follows the threading contract of etcd_client.h. gRPC
// types stay out of this header.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "etcd/etcd_client.h"

namespace felix::etcd {

struct GrpcEtcdOptions {
  std::chrono::milliseconds call_timeout{2000};
  // Reconnect backoff of watch and keepalive streams (jittered, see backoff.h).
  std::chrono::milliseconds reconnect_initial{50};
  std::chrono::milliseconds reconnect_max{1000};
};

// "host:port" gRPC targets from the comma list; kInvalidArgument naming the bad entry.
EtcdResult<std::vector<std::string>> ParseEtcdEndpoints(std::string_view endpoints);

class GrpcEtcdClient final : public EtcdClient {
 public:
  // Creates channels (no I/O yet: the first call connects). Fails only on bad endpoints.
  static EtcdResult<std::unique_ptr<GrpcEtcdClient>> Create(std::string_view endpoints,
                                                            GrpcEtcdOptions options = {});
  ~GrpcEtcdClient() override;

  EtcdResult<RangeResult> Range(std::string_view key, const RangeOptions& options) override;
  EtcdResult<PutResult> Put(std::string_view key, std::string_view value,
                            int64_t lease = 0) override;
  EtcdResult<DeleteResult> Delete(std::string_view key, std::string_view range_end = {}) override;
  EtcdResult<TxnResult> Transact(const Txn& txn) override;
  EtcdResult<void> Compact(int64_t revision) override;
  EtcdResult<LeaseGrantResult> LeaseGrant(int64_t ttl_seconds) override;
  EtcdResult<void> LeaseRevoke(int64_t lease_id) override;
  EtcdResult<LeaseTtlResult> LeaseTimeToLive(int64_t lease_id) override;
  EtcdResult<std::unique_ptr<KeepAliveStream>> OpenKeepAlive(KeepAliveCallbacks callbacks) override;
  EtcdResult<std::unique_ptr<WatchHandle>> Watch(const WatchOptions& options,
                                                 WatchCallbacks callbacks) override;
  EtcdResult<ServerStatus> Status() override;

  struct Impl;

 private:
  explicit GrpcEtcdClient(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace felix::etcd
