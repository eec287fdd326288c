// StaticRouter: a fixed routing table — the listed shards are served by other brokers, every
// other shard is local at generation 0.
//
// Used where ownership does not come from etcd: the routing tests of every client request path
// (through `FELIX_TEST_REMOTE_SHARDS`, read only by builds with fault seams), and as the
// simplest ShardRouter to reason about. Thread-safe: immutable after construction.
#pragma once

#include <map>
#include <string>
#include <string_view>

#include "broker/shard_router.h"
#include "common/result.h"

namespace felix::broker {

class StaticRouter final : public ShardRouter {
 public:
  // `remote`: ShardId::ToString() → the route answered for it (where = kRemote).
  explicit StaticRouter(std::map<std::string, Route> remote) : remote_(std::move(remote)) {}

  Route RouteShard(const ShardId& shard) const override;

  // Parses `entry;entry;...`, each `<shard id>=<owner node id>@<client host:port>@<generation>`
  // where <shard id> is ShardId::ToString() (`t/ns/name#N`, `cache:t/ns/name#N`) and the
  // address may be empty. kInvalidArgument names the entry that does not parse.
  static Result<StaticRouter> Parse(std::string_view table);

 private:
  std::map<std::string, Route> remote_;
};

}  // namespace felix::broker
