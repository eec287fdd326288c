// DurableLog: one segmented, checksummed, append-only log in its own directory (one per shard
// and log kind). Offsets are assigned by the log, start at the base offset and are never
// renumbered; records carry the generation they were written in and a timestamp.
//
// Durability (LogOptions::fsync_mode):
//   kOnCommit  Append returns only after fdatasync covered the batch. Group commit: a waiting
//              appender either becomes the flush leader or sleeps on its own condition
//              variable; a finished flush wakes only the waiters it covered, plus the first
//              uncovered one to lead the next flush. Readers see a record once it is durable.
//   kPeriodic  a flusher thread owned by the log syncs every `fsync_interval` (idle logs issue
//              no fsync). Readers see a record once written.
//   kNone      synced only at roll, Sync(), Truncate/Reset and Close.
// Preallocation (LogOptions::preallocate_bytes, kOnCommit only): the flusher thread keeps up to
// that many zeroed, synced bytes ahead of the active segment's end, between flushes. An append
// then overwrites blocks the file already has, so its fdatasync commits no size change (no
// journal commit on ext4/xfs): measured 313–348 → 179–186 µs alone, ~650 → ~375 µs with three
// logs syncing at once (docs/performance.md). The zeros past the last record are cut at roll
// (a sealed segment ends at its last record) and at close; after a crash recovery reads them as
// the segment's end, not as a torn tail.
// A failed fsync (any path) poisons the log: every later Append/Sync/Truncate/Reset answers
// kPoisoned, a POISONED file is left in the directory, and the next Open refuses with
// kPoisoned unless LogOptions::clear_poison is set (RecoveryReport::previous_poison then
// carries the message). While poisoned, reads stop at DurableOffset(). A failed write is undone
// (the segment is cut back to its last good byte) and consumes no offsets; if the undo fails, every
// later append is refused until reopen.
//
// Threading contract:
//   - Append/AppendAt/AppendAsync/Sync: any number of threads concurrently. Appends are
//     serialised on an internal mutex (one pwrite per batch); the fsync wait happens outside
//     it. Append blocks its caller until durable under kOnCommit; AppendAsync never waits for
//     the flush (its callback runs on the log's flusher thread), for shard executors.
//   - The log owns at most one flusher thread: started at open under kPeriodic, or on the
//     first AppendAsync; joined by Close. Under kOnCommit the flush is otherwise done by the
//     appender that becomes the group-commit leader.
//   - Read/ReadOne/WaitFor/NotifyWhen/CancelNotify/Tail/Base/DurableOffset, and the written
//     variants ReadWritten/NotifyWrittenWhen/CancelWrittenNotify/WrittenOffset: any thread,
//     concurrently with appends (positioned reads, no lock held during I/O).
//   - Truncate/Reset: callable from any thread, but the caller (replication) must not have
//     appends in flight on this log; readers of the removed records see them vanish.
//   - EnforceRetention: any thread (the broker's retention timer); serialises with appends.
//   - Close: once, after callers stopped issuing calls; the destructor closes if needed.
//   - NotifyWhen callbacks run on the appending (or flushing) thread, outside the log's locks;
//     they must be short and must not append to the same log.
// The MetricsRegistry (if given) must outlive the log.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "storage/fsync_mode.h"
#include "storage/io_util.h"
#include "storage/log_reader.h"
#include "storage/record_format.h"
#include "storage/recovery.h"
#include "storage/storage_error.h"
#include "storage/storage_metrics.h"

namespace felix {
class MetricsRegistry;
}

namespace felix::storage {

struct LogOptions {
  FsyncMode fsync_mode = FsyncMode::kPeriodic;
  std::chrono::milliseconds fsync_interval{250};
  uint64_t segment_bytes = 256ull << 20;
  uint64_t index_spacing_bytes = 4096;
  uint64_t retention_bytes = 0;           // 0 = unbounded
  std::chrono::seconds retention_age{0};  // 0 = unbounded
  uint64_t max_records_per_read = 10000;
  Offset initial_base_offset;  // base of a brand-new log
  // kOnCommit: zeroed bytes kept ahead of the active segment's end (0: none; see above).
  uint64_t preallocate_bytes = 0;
  bool verify_all_on_open = false;     // check every record of sealed segments too
  bool clear_poison = false;           // open a log poisoned in an earlier run
  std::string metrics_label = "log";   // label log="..." on the storage series
  MetricsRegistry* metrics = nullptr;  // optional; must outlive the log
#if FELIX_FAULT_INJECTION
  std::shared_ptr<FaultInjector> faults;  // tests: inject fsync/write failures
#endif
};

struct RecoveryReport {
  bool fresh = false;
  bool torn_tail_repaired = false;
  std::string torn_reason;
  uint64_t truncated_bytes = 0;
  uint64_t preallocated_bytes = 0;  // zeros after the last record, cut (not a torn tail)
  uint64_t blank_segments_removed = 0;
  uint64_t indexes_rebuilt = 0;
  uint64_t segments = 0;
  uint64_t records_scanned = 0;
  uint64_t bytes_scanned = 0;
  std::string previous_poison;  // set when clear_poison opened a poisoned log
};

struct RetentionResult {
  uint64_t segments_deleted = 0;
  uint64_t bytes_reclaimed = 0;
  Offset base_offset;
};

struct Segment;

class DurableLog final : public LogReader {
 public:
  static StorageResult<std::unique_ptr<DurableLog>> Open(std::string dir, LogOptions options);
  ~DurableLog() override;
  DurableLog(const DurableLog&) = delete;
  DurableLog& operator=(const DurableLog&) = delete;

  // Appends the batch with one write; offsets are consecutive from the tail.
  StorageResult<AppendResult> Append(std::span<const AppendRecord> records);
  StorageResult<AppendResult> Append(const AppendRecord& record) { return Append({&record, 1}); }
  // Appends only if `expected_first` equals the tail; else kOffsetMismatch (with the tail),
  // nothing written, no offset consumed.
  StorageResult<AppendResult> AppendAt(Offset expected_first,
                                       std::span<const AppendRecord> records);
  // For an executor that must not block on fsync: writes the batch now and returns its
  // offsets at once; `on_durable` runs later on the log's flusher thread (started on first use)
  // once a flush covered the batch — Ok, or the poison error if the flush failed — or from
  // Close. Under kOnCommit readers see the batch only once it is durable, as with Append.
  // Any fsync mode: the call asks for a flush. The callback must be short and must not call
  // Close; it may append.
  using DurableCallback = std::function<void(const StorageResult<void>&)>;
  StorageResult<AppendResult> AppendAsync(std::span<const AppendRecord> records,
                                          DurableCallback on_durable);
  // AppendAt, completing as AppendAsync does: written now, `on_durable` on the flusher thread
  // once a flush covered it (not called when the append itself fails). For a caller with
  // other I/O to do while the log flushes.
  StorageResult<AppendResult> AppendAtAsync(Offset expected_first,
                                            std::span<const AppendRecord> records,
                                            DurableCallback on_durable);
  // Makes everything appended so far durable (group commit with concurrent appenders).
  StorageResult<void> Sync();

  // Replication: cut the log so that the tail becomes `new_tail`. kBelowCommit if that would
  // discard a record below the commit offset; kInvalidArgument below the base or past the tail.
  StorageResult<void> Truncate(Offset new_tail);
  // Replication bootstrap/rebuild: discard everything and begin empty at `base`. kBelowCommit
  // if records in [max(base offset, base), commit offset) would be discarded.
  StorageResult<void> Reset(Offset base);
  // The commit offset (one past the last committed record), kept by replication; storage
  // refuses to cut below it. In memory only (replication persists it).
  void SetCommitOffset(Offset offset) { commit_offset_.store(offset.value()); }
  Offset CommitOffset() const { return Offset(commit_offset_.load()); }
  // When held, retention never deletes a segment holding offsets >= the commit offset.
  void SetRetentionHold(bool hold) { retention_hold_.store(hold); }
  bool RetentionHeld() const { return retention_hold_.load(); }

  // Deletes whole sealed segments, oldest first, while over the size bound or older than the
  // age bound (by their newest record's timestamp); advances the base offset.
  StorageResult<RetentionResult> EnforceRetention(uint64_t now_ms);
  StorageResult<RetentionResult> EnforceRetention();

  // Compaction (cache and counter logs): Roll seals the active segment (synced) and starts a
  // new one at the tail, so every record below TailOffset() is in sealed segments; a no-op when
  // the active segment is empty. DropSegmentsBelow deletes sealed segments that lie wholly
  // below `offset`, oldest first, with a directory sync after each unlink (never the active
  // segment, never past the commit offset while retention is held); the base advances to the
  // first kept segment. Any thread; serialised with appends.
  StorageResult<void> Roll();
  StorageResult<RetentionResult> DropSegmentsBelow(Offset offset);
  // How many times Truncate or Reset set out to discard records (a reader that remembers what
  // it read, such as a follower's compaction index, starts over when this changed).
  uint64_t Rewrites() const { return rewrites_.load(); }
  // Bytes of every segment file (headers and record frames included).
  uint64_t DiskBytes() const;

  // Syncs, writes indexes and the durable mark, wakes waiters with kClosed.
  StorageResult<void> Close();

  // LogReader
  Offset BaseOffset() const override { return Offset(base_offset_.load()); }
  Offset TailOffset() const override { return notifier_.tail(); }
  StorageResult<ReadBatch> Read(Offset from, ReadLimits limits) const override;
  WaitOutcome WaitFor(Offset offset, Deadline deadline) const override;
  uint64_t NotifyWhen(Offset offset, TailCallback cb) override;
  bool CancelNotify(uint64_t id) override;

  // Offset after the last record written (durable or not); >= TailOffset().
  Offset WrittenOffset() const { return Offset(written_end_.load()); }
  // Records written but perhaps not yet durable, for a Quorum leader's replicator: it ships
  // them while the leader's own fdatasync runs, so the two flushes overlap instead of queueing
  // (replication.md §8.2 counts the leader only up to its durable tail, so nothing here is
  // acknowledged early). As Read, up to WrittenOffset() instead of TailOffset(); a poisoned log
  // still serves only what is durable. NotifyWrittenWhen: as NotifyWhen, on the written tail
  // (the callback runs on the appending thread, outside the log's locks).
  StorageResult<ReadBatch> ReadWritten(Offset from, ReadLimits limits) const;
  // Read and ReadWritten with the records in place: their payloads view one buffer the read
  // filled (RecordViews::bytes, which keeps every buffer the read filled), with no allocation
  // or copy per record — for a replicator that ships them on, and a group poll that sends them.
  // Bounded like Read: by the limits, the tail and the log's max_records_per_read.
  StorageResult<RecordViews> ReadViews(Offset from, ReadLimits limits) const;
  StorageResult<RecordViews> ReadWrittenViews(Offset from, ReadLimits limits) const;
  uint64_t NotifyWrittenWhen(Offset offset, TailCallback cb);
  bool CancelWrittenNotify(uint64_t id);
  // Offset up to which the log is known durable (exclusive).
  Offset DurableOffset() const { return Offset(durable_atomic_.load()); }
  bool poisoned() const { return poisoned_.load(); }
  const RecoveryReport& recovery() const { return report_; }
  const std::string& dir() const { return dir_; }
  const LogOptions& options() const { return opts_; }
  size_t SegmentCount() const;

 private:
  DurableLog(std::string dir, LogOptions options);
  StorageResult<void> Apply(RecoveryPlan plan);
  StorageResult<AppendResult> AppendImpl(std::optional<uint64_t> expected,
                                         std::span<const AppendRecord> records,
                                         DurableCallback* on_durable = nullptr);
  void StartFlusherLocked();
  void CompleteAsync(bool all, const StorageResult<void>& result);
  StorageResult<void> RollLocked();
  StorageResult<std::shared_ptr<Segment>> CreateSegment(uint64_t base);
  StorageResult<void> WaitDurable(uint64_t need);
  int SyncData(int fd);
  int WriteData(int fd, const uint8_t* data, size_t len, uint64_t pos);
  void PublishDurableLocked(uint64_t target, uint64_t seg_base, uint64_t seg_bytes);
  void SetPoisonLocked(int err, const std::string& what);
  void PoisonFromWriter(int err, const std::string& what);
  void WritePoisonMarker();
  StorageError PoisonError() const;
  void WriteMark(uint64_t seg_base, uint64_t bytes, bool sync);
  void WriteIndexFile(const Segment& seg);
  void AcquireFlushExclusive();
  void ReleaseFlushExclusive();
  StorageResult<void> RemoveSegmentFiles(const Segment& seg);
  StorageResult<uint64_t> LocatePosition(const Segment& seg, uint64_t offset) const;
  void FlusherLoop();
  // Preallocation: whether it is on; asks the flusher for more zeroed space when the active
  // segment has less than half of preallocate_bytes left (append_mu_ held).
  bool Preallocating() const;
  void WantPreallocationLocked(const Segment& seg);
  // Flusher thread: zero-fills and syncs the next stretch of the active segment.
  void Preallocate();
  // Waits until no zero-fill is under way (append_mu_ held through `l`).
  void WaitForZeroFill(std::unique_lock<std::mutex>& l);
  // Out: ReadBatch (records copied) or RecordViews (in place).
  template <typename Out>
  StorageResult<Out> ReadBelow(uint64_t from, ReadLimits limits, uint64_t tail) const;

  const std::string dir_;
  const LogOptions opts_;
  std::optional<StorageMetrics> metrics_;

  // Writers: append, roll, truncate, reset, retention, close.
  mutable std::mutex append_mu_;
  std::vector<uint8_t> staging_;         // append_mu_
  std::vector<IndexEntry> new_entries_;  // append_mu_
  IndexBuilder builder_;                 // append_mu_ (for the active segment)
  uint64_t next_offset_ = 0;             // append_mu_
  bool broken_ = false;                  // append_mu_: a failed write could not be undone
  // A zero-fill from zero_fill_from_ on is being written by the flusher (append_mu_); appends
  // that would reach it, rolls, truncations and resets wait on zero_fill_done_.
  bool zero_filling_ = false;
  uint64_t zero_fill_from_ = 0;
  std::condition_variable zero_fill_done_;
  std::atomic<bool> preallocation_wanted_{false};
  std::atomic<uint64_t> written_end_{0};  // offset after the last written record
  std::atomic<bool> closed_{false};

  // Segment list and per-segment index/end offsets (mutated with append_mu_ also held).
  mutable std::mutex state_mu_;
  std::vector<std::shared_ptr<Segment>> segments_;
  std::shared_ptr<Segment> active_;
  std::atomic<uint64_t> base_offset_{0};

  // Group commit.
  struct SyncWaiter;
  mutable std::mutex sync_mu_;
  std::condition_variable idle_cv_;  // flushing_ became false
  uint64_t durable_ = 0;             // sync_mu_
  std::atomic<uint64_t> durable_atomic_{0};
  bool flushing_ = false;               // sync_mu_: a flush (or exclusive section) is in progress
  SyncWaiter* waiters_ = nullptr;       // sync_mu_: intrusive list, arrival order
  std::optional<StorageError> poison_;  // sync_mu_
  std::atomic<bool> poisoned_{false};
  int mark_fd_ = -1;

  std::atomic<uint64_t> commit_offset_{0};
  std::atomic<bool> retention_hold_{false};
  std::atomic<uint64_t> rewrites_{0};  // Rewrites()

  // Flusher thread: periodic flushes and AppendAsync completions.
  std::thread flusher_;  // flusher_mu_
  std::mutex flusher_mu_;
  std::condition_variable flusher_cv_;
  bool stop_flusher_ = false;  // flusher_mu_
  struct AsyncWaiter {
    uint64_t need;
    DurableCallback cb;
  };
  std::vector<AsyncWaiter> async_;  // flusher_mu_, in offset order

  TailNotifier notifier_{Offset(0)};          // what readers see (durable under kOnCommit)
  TailNotifier written_notifier_{Offset(0)};  // written_end_, for ReadWritten's watchers
  RecoveryReport report_;
};

}  // namespace felix::storage
