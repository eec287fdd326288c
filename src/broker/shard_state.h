// ShardState: the key/value state view of one stream shard, projected from its atomic-commit
// records (semantics.md §8, storage.md §3.4) in offset order. Each key remembers the offset of
// the commit that last wrote it (its version); as_of is the last commit applied.
//
// The view is memory only and rebuilt from the log (StreamShard loads it on first use), so it
// holds exactly what the retained log says: a restarted broker, or a replica holding the same
// log, derives the same view.
//
// Threading: not thread-safe; owned by the stream shard's executor.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "broker/commit_record.h"
#include "common/strong_types.h"

namespace felix::broker {

struct StateLookup {
  std::optional<std::vector<uint8_t>> value;  // nullopt: no such key
  std::optional<Offset> version;              // offset of the commit that wrote it
  std::optional<Offset> as_of;                // last commit reflected (nullopt: none yet)
};

class ShardState {
 public:
  // Applies the ops of the commit at `offset` (offsets must ascend).
  void Apply(Offset offset, const std::vector<CommitOp>& ops);
  StateLookup Get(const std::string& key) const;
  size_t size() const { return entries_.size(); }

 private:
  struct Entry {
    std::vector<uint8_t> value;
    Offset version;
  };
  std::map<std::string, Entry> entries_;
  std::optional<Offset> as_of_;
};

}  // namespace felix::broker
