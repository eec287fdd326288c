#include "fault/stream_checker.h"

#include <algorithm>
#include <functional>
#include <set>
#include <sstream>
#include <unordered_map>

namespace felix::fault {

std::string Violation::ToString() const {
  std::ostringstream out;
  if (rule == 0) {
    out << "group " << what;
  } else {
    out << "rule " << rule << " " << what;
  }
  out << ": shard " << shard << " value \"" << value << "\"";
  if (expected) out << " expected at offset " << *expected;
  out << " found at [";
  for (size_t i = 0; i < found.size(); ++i) out << (i ? "," : "") << found[i];
  out << "]";
  if (op_id != 0) out << " (op " << op_id << ")";
  return out.str();
}

std::string StreamVerdict::Summary() const {
  std::ostringstream out;
  out << "verdict " << (ok() ? "PASS" : "FAIL") << "\n"
      << "acknowledged " << acknowledged << "\nfailed " << failed << "\nindeterminate "
      << indeterminate << " (applied " << indeterminate_present << ")\nreads " << reads
      << "\nfinal_records " << final_records << "\nviolations " << violations.size() << "\n";
  for (const auto& v : violations) out << v.ToString() << "\n";
  return out.str();
}

size_t StreamVerdict::Count(int rule) const {
  size_t n = 0;
  for (const auto& v : violations) n += v.rule == rule ? 1 : 0;
  return n;
}

namespace {

struct Place {
  uint32_t shard;
  uint64_t offset;
};

using AddViolation = std::function<void(int, std::string, uint32_t, std::string,
                                        std::optional<uint64_t>, std::vector<uint64_t>, uint64_t)>;

// Rule 4, real-time order, per shard: (a) an acknowledged publish that completed before another
// was invoked has the lower offsets ("order"); (b) a read that completed normally and was
// invoked after an acknowledged publish completed reached that publish's last offset — it read
// up to the tail the broker reported, so a shorter read saw a stale tail ("stale_read").
void CheckRealTimeOrder(const std::vector<Op>& history, const AddViolation& add) {
  struct Acked {
    const Op* op;
    uint64_t last;  // offset of its last record
  };
  std::map<uint32_t, std::vector<Acked>> by_complete;
  std::map<uint32_t, std::vector<const Op*>> invoked;  // publishes (acked) and reads (ok)
  for (const Op& op : history) {
    if (op.outcome != Outcome::kOk) continue;
    if (op.kind == OpKind::kPublish && op.offset) {
      by_complete[op.shard].push_back({&op, *op.offset + PublishedValues(op).size() - 1});
      invoked[op.shard].push_back(&op);
    } else if (op.kind == OpKind::kRead) {
      invoked[op.shard].push_back(&op);
    }
  }
  for (auto& [shard, acked] : by_complete) {
    std::sort(acked.begin(), acked.end(),
              [](const Acked& a, const Acked& b) { return a.op->complete_us < b.op->complete_us; });
    auto& ops = invoked[shard];
    std::sort(ops.begin(), ops.end(),
              [](const Op* a, const Op* b) { return a->invoke_us < b->invoke_us; });
    // The highest offset acknowledged before the current op was invoked, and by whom.
    std::optional<Acked> highest;
    size_t next = 0;
    for (const Op* op : ops) {
      for (; next < acked.size() && acked[next].op->complete_us < op->invoke_us; ++next) {
        if (!highest || acked[next].last > highest->last) highest = acked[next];
      }
      if (!highest) continue;
      if (op->kind == OpKind::kPublish && *op->offset <= highest->last) {
        add(4, "order", shard, op->value, op->offset, {highest->last}, op->id);
      } else if (op->kind == OpKind::kRead &&
                 (op->read.empty() || op->read.back().first < highest->last)) {
        std::vector<uint64_t> reached;
        if (!op->read.empty()) reached.push_back(op->read.back().first);
        add(4, "stale_read", shard, highest->op->value, highest->last, reached, op->id);
      }
    }
  }
}

}  // namespace

StreamVerdict CheckStreams(const std::vector<Op>& history, const FinalLogs& final_logs) {
  StreamVerdict verdict;
  auto add = [&](int rule, std::string what, uint32_t shard, std::string value,
                 std::optional<uint64_t> expected, std::vector<uint64_t> found, uint64_t op) {
    verdict.violations.push_back(
        Violation{rule, std::move(what), shard, std::move(value), expected, std::move(found), op});
  };

  // Where each value sits in the final state; rule 2 (density, duplicates) on the way.
  std::unordered_map<std::string, std::vector<Place>> where;
  std::map<std::pair<uint32_t, uint64_t>, const std::string*> at;
  for (const auto& [shard, records] : final_logs) {
    for (size_t i = 0; i < records.size(); ++i) {
      const auto& [offset, value] = records[i];
      if (i > 0 && offset != records[i - 1].first + 1) {
        add(2, "gap", shard, value, records[i - 1].first + 1, {offset}, 0);
      }
      at[{shard, offset}] = &value;
      // An offset the broker said holds no event fills its place and is no record.
      if (value == kNoEvent) continue;
      where[value].push_back(Place{shard, offset});
      ++verdict.final_records;
    }
  }
  for (const auto& [value, places] : where) {
    if (places.size() < 2) continue;
    std::vector<uint64_t> offsets;
    for (const auto& p : places) offsets.push_back(p.offset);
    add(2, "duplicate", places[0].shard, value, std::nullopt, offsets, 0);
  }
  auto found_of = [&](const std::string& value) {
    std::vector<uint64_t> offsets;
    if (auto it = where.find(value); it != where.end()) {
      for (const auto& p : it->second) offsets.push_back(p.offset);
    }
    return offsets;
  };

  std::set<std::string> published;
  for (const Op& op : history) {
    if (op.kind != OpKind::kPublish) continue;
    const std::vector<std::string> values = PublishedValues(op);
    size_t present = 0;
    for (const auto& v : values) {
      published.insert(v);
      present += where.count(v) ? 1 : 0;
    }
    // Rule 8: a batch is all in the final state, at consecutive offsets in its order, or not at
    // all (whatever its outcome).
    if (values.size() > 1 && present > 0) {
      bool whole = present == values.size();
      for (size_t i = 1; whole && i < values.size(); ++i) {
        const Place& first = where.at(values[0])[0];
        const auto& places = where.at(values[i]);
        whole = places[0].shard == first.shard && places[0].offset == first.offset + i;
      }
      if (!whole) {
        for (const auto& v : values) {
          if (!where.count(v)) add(8, "partial_batch", op.shard, v, std::nullopt, {}, op.id);
        }
        if (present == values.size()) {
          add(8, "batch_split", op.shard, values[0], std::nullopt, found_of(values[0]), op.id);
        }
      }
    }
    switch (op.outcome) {
      case Outcome::kOk: {
        ++verdict.acknowledged;
        for (size_t i = 0; i < values.size(); ++i) {
          const std::string& v = values[i];
          std::optional<uint64_t> expected;
          if (op.offset) expected = *op.offset + i;
          auto it = where.find(v);
          if (it == where.end()) {
            add(1, "lost", op.shard, v, expected, {}, op.id);
            continue;
          }
          bool exact = false;
          for (const auto& p : it->second) exact |= p.shard == op.shard && expected == p.offset;
          if (!exact) add(1, "wrong_offset", op.shard, v, expected, found_of(v), op.id);
        }
        break;
      }
      case Outcome::kFail:
        ++verdict.failed;
        for (const auto& v : values) {
          if (where.count(v)) {
            add(6, "failed_but_present", op.shard, v, std::nullopt, found_of(v), op.id);
          }
        }
        break;
      case Outcome::kIndeterminate:
        ++verdict.indeterminate;
        verdict.indeterminate_present += present > 0 ? 1 : 0;
        break;
    }
  }

  // Rule 5 on the final state.
  for (const auto& [value, places] : where) {
    if (!published.count(value)) {
      add(5, "phantom", places[0].shard, value, std::nullopt, found_of(value), 0);
    }
  }
  // Rules 3 and 5 on reads.
  for (const Op& op : history) {
    if (op.kind != OpKind::kRead) continue;
    ++verdict.reads;
    // A subscriber sees its shard in offset order from where it started (op.offset when it
    // resumed at an offset; from earliest, the final log's first offset: these runs retain
    // everything), with no gap it was not told of and no duplicate.
    std::optional<uint64_t> want = op.offset;
    if (!want) {
      auto log = final_logs.find(op.shard);
      if (log != final_logs.end() && !log->second.empty()) want = log->second.front().first;
    }
    for (const auto& [offset, value] : op.read) {
      if (want && offset != *want) {
        add(3, offset > *want ? "read_gap" : "read_out_of_order", op.shard, value, *want, {offset},
            op.id);
        break;  // one per read: the rest is off by the same step
      }
      want = offset + 1;
    }
    for (const auto& [offset, value] : op.read) {
      if (value != kNoEvent && !published.count(value)) {
        add(5, "phantom_read", op.shard, value, offset, found_of(value), op.id);
        continue;
      }
      // A hole the reader was told of must be one in the final log too.
      auto it = at.find({op.shard, offset});
      if (it == at.end() || *it->second != value) {
        add(3, "read_not_prefix", op.shard, value, offset, found_of(value), op.id);
      }
    }
  }
  CheckRealTimeOrder(history, add);
  return verdict;
}

CounterVerdict CheckCounters(const std::vector<Op>& history,
                             const std::map<std::string, int64_t>& final_values) {
  struct Bounds {
    int64_t acked = 0, lo = 0, hi = 0;
  };
  std::map<std::string, Bounds> bounds;
  for (const Op& op : history) {
    if (op.kind != OpKind::kAdd) continue;
    Bounds& b = bounds[op.key];
    if (op.outcome == Outcome::kOk) {
      b.acked += op.delta;
      b.lo += op.delta;
      b.hi += op.delta;
    } else if (op.outcome == Outcome::kIndeterminate) {
      (op.delta < 0 ? b.lo : b.hi) += op.delta;
    }
  }
  for (const auto& [key, value] : final_values) bounds.try_emplace(key);
  CounterVerdict verdict;
  for (const auto& [key, b] : bounds) {
    auto it = final_values.find(key);
    int64_t final_value = it == final_values.end() ? 0 : it->second;
    if (final_value < b.lo || final_value > b.hi) {
      verdict.violations.push_back("counter " + key + ": final " + std::to_string(final_value) +
                                   " outside [" + std::to_string(b.lo) + ", " +
                                   std::to_string(b.hi) + "] (acked " + std::to_string(b.acked) +
                                   ")");
    }
  }
  return verdict;
}

}  // namespace felix::fault
