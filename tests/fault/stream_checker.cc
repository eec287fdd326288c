#include "fault/stream_checker.h"

#include <set>
#include <sstream>
#include <unordered_map>

namespace felix::fault {

std::string Violation::ToString() const {
  std::ostringstream out;
  out << "rule " << rule << " " << what << ": shard " << shard << " value \"" << value << "\"";
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
      where[value].push_back(Place{shard, offset});
      at[{shard, offset}] = &value;
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
    published.insert(op.value);
    switch (op.outcome) {
      case Outcome::kOk: {
        ++verdict.acknowledged;
        auto it = where.find(op.value);
        if (it == where.end()) {
          add(1, "lost", op.shard, op.value, op.offset, {}, op.id);
          break;
        }
        bool exact = false;
        for (const auto& p : it->second) exact |= p.shard == op.shard && op.offset == p.offset;
        if (!exact)
          add(1, "wrong_offset", op.shard, op.value, op.offset, found_of(op.value), op.id);
        break;
      }
      case Outcome::kFail:
        ++verdict.failed;
        if (where.count(op.value)) {
          add(6, "failed_but_present", op.shard, op.value, std::nullopt, found_of(op.value), op.id);
        }
        break;
      case Outcome::kIndeterminate:
        ++verdict.indeterminate;
        verdict.indeterminate_present += where.count(op.value) ? 1 : 0;
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
    for (const auto& [offset, value] : op.read) {
      if (!published.count(value)) {
        add(5, "phantom_read", op.shard, value, offset, found_of(value), op.id);
        continue;
      }
      auto it = at.find({op.shard, offset});
      if (it == at.end() || *it->second != value) {
        add(3, "read_not_prefix", op.shard, value, offset, found_of(value), op.id);
      }
    }
  }
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
