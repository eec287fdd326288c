// FakeRecordLog: an in-process RecordLog for shard unit tests. Appends complete at once, or
// are held until CompleteHeld() when `hold_completions` is set (to model a pending fsync).
#pragma once

#include <deque>
#include <mutex>
#include <optional>
#include <set>
#include <string>

#include "broker/record_log.h"

namespace felix::broker::testing {

class FakeRecordLog final : public RecordLog {
 public:
  bool hold_completions = false;
  bool fail_appends = false;
  Offset trimmed_below;              // reads below this answer Trimmed
  bool is_durable = true;            // false: behaves as an in-memory ring (no replay on overflow)
  std::optional<Offset> corrupt_at;  // reads reaching this offset stop there / fail

  void Append(const PayloadBatch& batch, AppendDone done) override {
    if (fail_appends) {
      done(Fail(ErrorCode::kIo, "injected append failure"));
      return;
    }
    const Offset first(records_.size());
    for (auto p : batch.payloads) {
      records_.push_back({std::string(p.begin(), p.end()), batch.timestamp_micros});
    }
    if (hold_completions) {
      held_.push_back([done = std::move(done), first] { done(first); });
    } else {
      done(first);
    }
  }
  // Appends a generation-start record (replication.md §17) as a leader's fence does, below
  // the shard: reads pass over it as DurableRecordLog's do.
  void AppendStartRecord() {
    start_records_.insert(Offset(records_.size()));
    records_.push_back({"", 0});
  }
  void CompleteHeld() {
    while (!held_.empty()) {
      auto f = std::move(held_.front());
      held_.pop_front();
      f();
    }
  }
  Offset start_offset() const override { return trimmed_below; }
  Offset next_offset() const override { return Offset(records_.size()); }
  ReadOutcome Read(Offset from, size_t max_records, size_t) override {
    ++reads;
    if (from < trimmed_below) return Trimmed{trimmed_below};
    if (corrupt_at && from == *corrupt_at) {
      return Error{ErrorCode::kCorruption,
                   "record checksum mismatch at offset " + to_string(from) + " (file=f.log)"};
    }
    RecordRead out;
    auto keep = std::make_shared<std::deque<Stored>>();
    for (Offset o = from; o < next_offset() && out.records.size() < max_records; ++o) {
      if (corrupt_at && o == *corrupt_at) break;  // intact records first, like DurableLog
      if (start_records_.count(o) != 0) {
        if (!out.records.empty()) break;  // a read ends before one
        ++out.passed_over;
        continue;
      }
      keep->push_back(records_[o.value()]);
      const std::string& bytes = keep->back().payload;
      out.records.push_back(
          RecordView{o,
                     keep->back().timestamp,
                     {reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()}});
    }
    out.owner = keep;
    return out;
  }
  bool durable() const override { return is_durable; }

  int reads = 0;

 private:
  struct Stored {
    std::string payload;
    uint64_t timestamp;
  };
  std::deque<Stored> records_;
  std::set<Offset> start_records_;
  std::deque<std::function<void()>> held_;
};

}  // namespace felix::broker::testing
