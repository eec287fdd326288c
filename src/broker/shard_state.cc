#include "broker/shard_state.h"

namespace felix::broker {

void ShardState::Apply(Offset offset, const std::vector<CommitOp>& ops) {
  for (const CommitOp& op : ops) {
    if (op.kind == CommitOp::Kind::kPut) {
      entries_[op.key] = Entry{op.value, offset};
    } else {
      entries_.erase(op.key);
    }
  }
  as_of_ = offset;
}

StateLookup ShardState::Get(const std::string& key) const {
  StateLookup out;
  out.as_of = as_of_;
  if (auto it = entries_.find(key); it != entries_.end()) {
    out.value = it->second.value;
    out.version = it->second.version;
  }
  return out;
}

}  // namespace felix::broker
