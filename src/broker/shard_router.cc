#include "broker/shard_router.h"

namespace felix::broker {

std::string ShardId::ToString() const {
  return std::string(kind == ShardKind::kCache ? "cache:" : "") + tenant + "/" + name_space + "/" +
         name + "#" + std::to_string(shard);
}

}  // namespace felix::broker
