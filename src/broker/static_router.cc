#include "broker/static_router.h"

#include <charconv>

namespace felix::broker {

Route StaticRouter::RouteShard(const ShardId& shard) const {
  if (remote_.empty()) return Route{};  // a lone broker: no per-request key to build
  auto it = remote_.find(shard.ToString());
  return it == remote_.end() ? Route{} : it->second;
}

Result<StaticRouter> StaticRouter::Parse(std::string_view table) {
  std::map<std::string, Route> remote;
  while (!table.empty()) {
    size_t end = table.find(';');
    std::string_view entry = table.substr(0, end);
    table = end == std::string_view::npos ? std::string_view{} : table.substr(end + 1);
    if (entry.empty()) continue;
    auto bad = [&] {
      return Fail(ErrorCode::kInvalidArgument,
                  "routing entry '" + std::string(entry) +
                      "' is not <shard>=<node id>@<client host:port>@<generation>");
    };
    size_t eq = entry.find('=');
    if (eq == std::string_view::npos || eq == 0) return bad();
    std::string_view rest = entry.substr(eq + 1);
    size_t at1 = rest.find('@');
    size_t at2 = at1 == std::string_view::npos ? at1 : rest.find('@', at1 + 1);
    if (at1 == 0 || at2 == std::string_view::npos) return bad();
    Route route;
    route.where = Route::Where::kRemote;
    route.owner_node_id = std::string(rest.substr(0, at1));
    route.owner_client_addr = std::string(rest.substr(at1 + 1, at2 - at1 - 1));
    std::string_view generation = rest.substr(at2 + 1);
    uint64_t number = 0;
    auto [ptr, ec] =
        std::from_chars(generation.data(), generation.data() + generation.size(), number);
    if (ec != std::errc() || ptr != generation.data() + generation.size() || generation.empty()) {
      return bad();
    }
    route.generation = Generation(number);
    remote[std::string(entry.substr(0, eq))] = std::move(route);
  }
  return StaticRouter(std::move(remote));
}

}  // namespace felix::broker
