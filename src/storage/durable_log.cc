#include "storage/durable_log.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <type_traits>

#include <spdlog/spdlog.h>

namespace felix::storage {

struct Segment {
  uint64_t base = 0;
  std::string log_path;
  std::string index_path;
  int fd = -1;
  std::atomic<uint64_t> bytes{0};  // header + complete records
  // The file's size as far as this log made it so (append_mu_): past `bytes` it holds the
  // zeros preallocation wrote and synced.
  uint64_t allocated = 0;
  uint64_t end_offset = 0;         // state_mu_
  uint64_t last_timestamp_ms = 0;  // state_mu_
  std::vector<IndexEntry> index;   // state_mu_
  // Where the last few appended batches begin (state_mu_), beside the sparse index: a reader
  // that follows the tail (a replicator, one read per batch and follower) starts at one of
  // these and finds it without reading the record headers between the index entry and it.
  static constexpr size_t kRecentBatches = 8;
  std::array<IndexEntry, kRecentBatches> recent{};
  size_t recent_count = 0;  // valid entries, the newest at (recent_next + size − 1) % size
  size_t recent_next = 0;
  void NoteBatch(uint64_t offset, uint64_t position) {
    recent[recent_next] = IndexEntry{offset, position};
    recent_next = (recent_next + 1) % kRecentBatches;
    recent_count = std::min(recent_count + 1, kRecentBatches);
  }
  // Drops what a truncation to `tail` removed.
  void ForgetBatchesFrom(uint64_t tail) {
    std::array<IndexEntry, kRecentBatches> kept{};
    size_t n = 0;
    for (size_t i = 0; i < recent_count; ++i) {
      const IndexEntry& e =
          recent[(recent_next + kRecentBatches - recent_count + i) % kRecentBatches];
      if (e.offset < tail) kept[n++] = e;
    }
    recent = kept;
    recent_count = n;
    recent_next = n % kRecentBatches;
  }
  ~Segment() {
    if (fd >= 0) ::close(fd);
  }
};

struct DurableLog::SyncWaiter {
  uint64_t need = 0;
  std::condition_variable cv;
  SyncWaiter* next = nullptr;
  SyncWaiter* prev = nullptr;
};

namespace {

// A read scans forward in preads of kFirstReadAheadBytes, doubling at each refill up to
// kReadAheadBytes (fewer at a segment's end, and a refill no more than the records still
// wanted need at the size of those read so far). A poll of 100 small records needs ~30 KiB: one
// pread of the whole 256 KiB copied eight times what it used out of the page cache (and
// allocated as much) — a measurable share of a queue drain's loop thread.
constexpr uint64_t kFirstReadAheadBytes = uint64_t{16} * 1024;
constexpr uint64_t kReadAheadBytes = uint64_t{256} * 1024;

// What an in-place read's views point into: the buffers it filled, in order.
struct ReadBuffers {
  std::vector<std::unique_ptr<uint8_t[]>> filled;
};

uint64_t WallMs() {
  return uint64_t(std::chrono::duration_cast<std::chrono::milliseconds>(
                      std::chrono::system_clock::now().time_since_epoch())
                      .count());
}

double SecondsSince(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

DurableLog::DurableLog(std::string dir, LogOptions options)
    : dir_(std::move(dir)), opts_(std::move(options)), builder_(opts_.index_spacing_bytes) {
  if (opts_.metrics != nullptr) {
    metrics_ = StorageMetrics::Register(*opts_.metrics, opts_.metrics_label);
  }
}

DurableLog::~DurableLog() {
  (void)Close();
  if (mark_fd_ >= 0) ::close(mark_fd_);
}

StorageResult<std::unique_ptr<DurableLog>> DurableLog::Open(std::string dir, LogOptions options) {
  if (options.segment_bytes < 4096) {
    return StorageFail(StorageErrc::kInvalidArgument, "segment_bytes must be at least 4096");
  }
  if (options.fsync_mode == FsyncMode::kPeriodic && options.fsync_interval.count() <= 0) {
    return StorageFail(StorageErrc::kInvalidArgument, "fsync_interval must be positive");
  }
  if (auto r = MakeDirectories(dir); !r) return tl::unexpected(r.error());
  auto plan = PlanRecovery(dir, options.index_spacing_bytes, options.verify_all_on_open,
                           options.initial_base_offset.value());
  if (!plan) return tl::unexpected(plan.error());
  if (plan->poison && !options.clear_poison) {
    StorageError e;
    e.code = StorageErrc::kPoisoned;
    e.file = dir + "/" + kPoisonFileName;
    e.message = "log " + dir + " was poisoned by a failed fsync in an earlier run (" +
                *plan->poison + "); reopen with clear_poison once the device is trusted";
    return StorageFail(std::move(e));
  }
  std::unique_ptr<DurableLog> log(new DurableLog(dir, std::move(options)));
  if (auto r = log->Apply(std::move(*plan)); !r) {
    log->closed_.store(true);
    return tl::unexpected(r.error());
  }
  return log;
}

StorageResult<void> DurableLog::Apply(RecoveryPlan plan) {
  auto started = std::chrono::steady_clock::now();
  (void)started;
  report_.records_scanned = plan.records_scanned;
  report_.bytes_scanned = plan.bytes_scanned;
  for (const auto& f : plan.files_to_delete) {
    if (::unlink(f.c_str()) != 0 && errno != ENOENT)
      return StorageFail(IoError("unlink", f, errno));
    if (f.size() > 4 && f.compare(f.size() - 4, 4, ".log") == 0) ++report_.blank_segments_removed;
  }
  if (!plan.files_to_delete.empty()) {
    if (auto r = SyncDirectory(dir_); !r) return r;
  }
  if (plan.poison) report_.previous_poison = *plan.poison;

  if (plan.fresh) {
    report_.fresh = plan.files_to_delete.empty();
    auto seg = CreateSegment(plan.fresh_base);
    if (!seg) return tl::unexpected(seg.error());
    segments_.push_back(*seg);
  } else {
    for (auto& sp : plan.segments) {
      auto seg = std::make_shared<Segment>();
      seg->base = sp.base;
      seg->log_path = sp.log_path;
      seg->index_path = sp.index_path;
      seg->fd = ::open(sp.log_path.c_str(), O_RDWR | O_CLOEXEC);
      if (seg->fd < 0) return StorageFail(IoError("open", sp.log_path, errno));
      seg->bytes.store(sp.valid_bytes);
      seg->end_offset = sp.end_offset;
      seg->last_timestamp_ms = sp.last_timestamp_ms;
      seg->index = std::move(sp.index);
      if (sp.valid_bytes < sp.file_bytes) {
        if (::ftruncate(seg->fd, off_t(sp.valid_bytes)) != 0) {
          return StorageFail(IoError("truncate torn tail of", sp.log_path, errno));
        }
      }
      seg->allocated = sp.valid_bytes;
      if (sp.index_rebuilt) {
        WriteIndexFile(*seg);
        if (&sp != &plan.segments.back()) ++report_.indexes_rebuilt;
      }
      segments_.push_back(std::move(seg));
    }
    if (int err = DataSync(segments_.back()->fd); err != 0) {
      return StorageFail(IoError("fdatasync", segments_.back()->log_path, err));
    }
  }
  report_.torn_tail_repaired = plan.torn_tail;
  report_.torn_reason = plan.torn_reason;
  report_.truncated_bytes = plan.truncated_bytes;
  report_.preallocated_bytes = plan.preallocated_bytes;
  report_.segments = segments_.size();

  active_ = segments_.back();
  base_offset_.store(segments_.front()->base);
  next_offset_ = active_->end_offset;
  written_end_.store(next_offset_);
  durable_ = next_offset_;
  durable_atomic_.store(next_offset_);
  if (!active_->index.empty()) {
    builder_.Reset(active_->bytes.load() - active_->index.back().position, true);
  }
  std::string mark_path = dir_ + "/" + kMarkFileName;
  mark_fd_ = ::open(mark_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (mark_fd_ < 0) return StorageFail(IoError("open", mark_path, errno));
  WriteMark(active_->base, active_->bytes.load(), true);
  if (plan.poison) {
    std::string p = dir_ + "/" + kPoisonFileName;
    if (::unlink(p.c_str()) != 0 && errno != ENOENT)
      return StorageFail(IoError("unlink", p, errno));
  }
  if (auto r = SyncDirectory(dir_); !r) return r;
  written_notifier_.Set(Offset(next_offset_));
  notifier_.Set(Offset(next_offset_));

  if (metrics_) {
    if (report_.torn_tail_repaired) metrics_->torn_tails_repaired->Increment();
    metrics_->truncated_bytes->Increment(report_.truncated_bytes);
    metrics_->index_rebuilds->Increment(report_.indexes_rebuilt);
  }
  // Recovery changed the files: say so (issue 12 item 12), not only in the counters.
  if (report_.torn_tail_repaired) {
    spdlog::warn("log recovery cut a torn tail log={} reason={} truncated_bytes={} next_offset={}",
                 dir_, report_.torn_reason, report_.truncated_bytes, next_offset_);
  }
  if (report_.blank_segments_removed > 0 || report_.indexes_rebuilt > 0) {
    spdlog::info("log recovery log={} blank_segments_removed={} indexes_rebuilt={}", dir_,
                 report_.blank_segments_removed, report_.indexes_rebuilt);
  }
  if (opts_.fsync_mode == FsyncMode::kPeriodic) {
    std::lock_guard<std::mutex> f(flusher_mu_);
    StartFlusherLocked();
  }
  return {};
}

void DurableLog::StartFlusherLocked() {
  if (!flusher_.joinable() && !stop_flusher_) flusher_ = std::thread([this] { FlusherLoop(); });
}

void DurableLog::CompleteAsync(bool all, const StorageResult<void>& result) {
  std::vector<AsyncWaiter> done;
  {
    std::lock_guard<std::mutex> l(flusher_mu_);
    const uint64_t durable = durable_atomic_.load();
    size_t n = 0;
    while (n < async_.size() && (all || async_[n].need <= durable)) ++n;
    done.assign(std::make_move_iterator(async_.begin()),
                std::make_move_iterator(async_.begin() + long(n)));
    async_.erase(async_.begin(), async_.begin() + long(n));
  }
  for (auto& w : done) w.cb(result);
}

StorageResult<std::shared_ptr<Segment>> DurableLog::CreateSegment(uint64_t base) {
  auto seg = std::make_shared<Segment>();
  seg->base = base;
  seg->log_path = dir_ + "/" + SegmentFileName(base);
  seg->index_path = dir_ + "/" + IndexFileName(base);
  seg->end_offset = base;
  seg->fd = ::open(seg->log_path.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (seg->fd < 0) return StorageFail(IoError("create", seg->log_path, errno));
  uint8_t header[kSegmentHeaderBytes];
  EncodeSegmentHeader(SegmentHeader{base, WallMs()}, header);
  if (int err = WriteFullAt(seg->fd, header, sizeof(header), 0); err != 0) {
    ::unlink(seg->log_path.c_str());
    return StorageFail(IoError("write header of", seg->log_path, err));
  }
  if (int err = SyncData(seg->fd); err != 0) {
    ::unlink(seg->log_path.c_str());
    PoisonFromWriter(err, "fdatasync new segment " + seg->log_path);
    return StorageFail(PoisonError());
  }
  if (auto r = SyncDirectory(dir_); !r) return tl::unexpected(r.error());
  seg->bytes.store(kSegmentHeaderBytes);
  seg->allocated = kSegmentHeaderBytes;
  WriteIndexFile(*seg);
  return seg;
}

int DurableLog::SyncData(int fd) {
#if FELIX_FAULT_INJECTION
  if (opts_.faults) {
    if (int err = opts_.faults->OnSync(); err != 0) return err;
  }
#endif
  return DataSync(fd);
}

int DurableLog::WriteData(int fd, const uint8_t* data, size_t len, uint64_t pos) {
#if FELIX_FAULT_INJECTION
  if (opts_.faults) {
    size_t partial = 0;
    if (int err = opts_.faults->OnWrite(&partial); err != 0) {
      (void)WriteFullAt(fd, data, std::min(partial, len), pos);
      return err;
    }
  }
#endif
  return WriteFullAt(fd, data, len, pos);
}

void DurableLog::WriteMark(uint64_t seg_base, uint64_t bytes, bool sync) {
  uint8_t buf[kMarkBytes];
  EncodeDurableMark(DurableMark{seg_base, bytes}, buf);
  if (mark_fd_ < 0) return;
  if (WriteFullAt(mark_fd_, buf, sizeof(buf), 0) == 0 && sync) (void)DataSync(mark_fd_);
}

void DurableLog::WriteIndexFile(const Segment& seg) {
  std::vector<uint8_t> bytes;
  {
    std::lock_guard<std::mutex> l(state_mu_);
    bytes = EncodeIndexFile(seg.base, seg.index);
  }
  // The index is derived and never trusted: a failed write only costs a rebuild at open.
  int fd = ::open(seg.index_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return;
  (void)WriteFullAt(fd, bytes.data(), bytes.size(), 0);
  ::close(fd);
}

StorageError DurableLog::PoisonError() const {
  std::lock_guard<std::mutex> l(sync_mu_);
  if (poison_) return *poison_;
  StorageError e;
  e.code = StorageErrc::kPoisoned;
  e.message = "log poisoned";
  return e;
}

void DurableLog::SetPoisonLocked(int err, const std::string& what) {
  if (!poison_) {
    StorageError e;
    e.code = StorageErrc::kPoisoned;
    e.sys_errno = err;
    e.file = dir_;
    e.message = "log " + dir_ + " poisoned: " + what + " failed: " + std::strerror(err);
    poison_ = std::move(e);
  }
  poisoned_.store(true);
  if (metrics_) metrics_->sync_failures->Increment();
  for (SyncWaiter* w = waiters_; w != nullptr; w = w->next) w->cv.notify_one();
}

void DurableLog::PoisonFromWriter(int err, const std::string& what) {
  {
    std::lock_guard<std::mutex> l(sync_mu_);
    SetPoisonLocked(err, what);
  }
  WritePoisonMarker();
}

void DurableLog::WritePoisonMarker() {
  std::string msg = PoisonError().message;
  (void)WriteFileAtomic(dir_, kPoisonFileName, AsBytes(msg), true);
}

StorageResult<AppendResult> DurableLog::Append(std::span<const AppendRecord> records) {
  return AppendImpl(std::nullopt, records);
}

StorageResult<AppendResult> DurableLog::AppendAt(Offset expected_first,
                                                 std::span<const AppendRecord> records) {
  return AppendImpl(expected_first.value(), records);
}

StorageResult<AppendResult> DurableLog::AppendAsync(std::span<const AppendRecord> records,
                                                    DurableCallback on_durable) {
  return AppendImpl(std::nullopt, records, &on_durable);
}

StorageResult<AppendResult> DurableLog::AppendAtAsync(Offset expected_first,
                                                      std::span<const AppendRecord> records,
                                                      DurableCallback on_durable) {
  return AppendImpl(expected_first.value(), records, &on_durable);
}

StorageResult<AppendResult> DurableLog::AppendImpl(std::optional<uint64_t> expected,
                                                   std::span<const AppendRecord> records,
                                                   DurableCallback* on_durable) {
  auto started = std::chrono::steady_clock::now();
  if (records.empty()) return StorageFail(StorageErrc::kInvalidArgument, "empty append");
  uint64_t total = 0;
  for (const auto& r : records) {
    if (r.payload.size() > kMaxPayloadBytes) {
      return StorageFail(
          StorageErrc::kInvalidArgument,
          "record of " + std::to_string(r.payload.size()) + " bytes exceeds the 64 MiB limit");
    }
    if ((r.flags & ~kKnownRecordFlags) != 0) {
      return StorageFail(StorageErrc::kInvalidArgument, "unknown record flags");
    }
    total += RecordBytes(r.payload.size());
  }
  const uint64_t now_ms = WallMs();
  AppendResult result;
  uint64_t new_tail = 0;
  {
    std::unique_lock<std::mutex> l(append_mu_);
    if (closed_.load()) return StorageFail(StorageErrc::kClosed, "log " + dir_ + " is closed");
    if (poisoned_.load()) return StorageFail(PoisonError());
    if (broken_) {
      return StorageFail(StorageErrc::kIo, "log " + dir_ +
                                               " refuses appends: a failed write could not be "
                                               "undone; reopen to recover");
    }
    if (expected && *expected != next_offset_) {
      StorageError e;
      e.code = StorageErrc::kOffsetMismatch;
      e.tail = Offset(next_offset_);
      e.message = "append at offset " + std::to_string(*expected) + " refused: tail is " +
                  std::to_string(next_offset_);
      return StorageFail(std::move(e));
    }
    if (active_->bytes.load() + total > opts_.segment_bytes && next_offset_ > active_->base) {
      WaitForZeroFill(l);
      if (auto r = RollLocked(); !r) return tl::unexpected(r.error());
    }
    // Only when this batch would reach the zeros being written (it outran the fill).
    while (zero_filling_ && active_->bytes.load() + total > zero_fill_from_)
      zero_fill_done_.wait(l);
    Segment& seg = *active_;
    staging_.resize(total);
    new_entries_.clear();
    const uint64_t pos = seg.bytes.load();
    uint64_t at = 0;
    uint64_t offset = next_offset_;
    uint64_t last_ts = 0;
    for (const auto& r : records) {
      uint64_t ts = r.timestamp_ms != 0 ? r.timestamp_ms : now_ms;
      EncodeRecord(staging_.data() + at, offset, r.generation.value(), ts, r.payload, r.flags);
      uint64_t step = RecordBytes(r.payload.size());
      builder_.Add(offset, pos + at, step, &new_entries_);
      at += step;
      ++offset;
      last_ts = ts;
    }
    if (int err = WriteData(seg.fd, staging_.data(), total, pos); err != 0) {
      if (metrics_) metrics_->write_failures->Increment();
      WaitForZeroFill(l);
      if (::ftruncate(seg.fd, off_t(pos)) != 0) broken_ = true;
      seg.allocated = pos;
      // Rebuild the builder's spacing state: nothing of this batch exists.
      if (!seg.index.empty()) {
        builder_.Reset(pos - seg.index.back().position, true);
      } else {
        builder_.Reset(0, false);
      }
      return StorageFail(IoError("write", seg.log_path, err));
    }
    // Before end_offset is published: a reader that sees a record below end_offset (under
    // state_mu_) then finds `bytes` covering it, and reads no further (ReadBelow).
    seg.bytes.store(pos + total);
    {
      std::lock_guard<std::mutex> s(state_mu_);
      for (const auto& e : new_entries_) {
        if (seg.index.empty() || e.offset > seg.index.back().offset) seg.index.push_back(e);
      }
      seg.NoteBatch(next_offset_, pos);
      seg.end_offset = offset;
      seg.last_timestamp_ms = last_ts;
    }
    seg.allocated = std::max(seg.allocated, pos + total);
    if (Preallocating()) WantPreallocationLocked(seg);
    result.first_offset = Offset(next_offset_);
    result.last_offset = Offset(offset - 1);
    next_offset_ = offset;
    written_end_.store(offset);
    new_tail = offset;
    if (on_durable != nullptr) {
      {
        std::lock_guard<std::mutex> f(flusher_mu_);
        async_.push_back(AsyncWaiter{offset, std::move(*on_durable)});
        StartFlusherLocked();
      }
      // Woken after the lock is released: a flusher woken while it is held only blocks on it,
      // and the unlock wakes it a second time (a futex wake and a context switch for nothing;
      // docs/performance.md change 69).
      flusher_cv_.notify_all();
    }
  }
  written_notifier_.Advance(Offset(new_tail));
  if (on_durable != nullptr) {
    if (opts_.fsync_mode != FsyncMode::kOnCommit) notifier_.Advance(Offset(new_tail));
  } else if (opts_.fsync_mode == FsyncMode::kOnCommit) {
    if (auto r = WaitDurable(new_tail); !r) return tl::unexpected(r.error());
  } else {
    notifier_.Advance(Offset(new_tail));
  }
  if (metrics_) metrics_->append_duration->Observe(SecondsSince(started));
  return result;
}

StorageResult<void> DurableLog::RollLocked() {
  std::shared_ptr<Segment> old = active_;
  // A sealed segment ends at its last record (recovery refuses anything else in one): cut the
  // preallocated zeros before the sync below, which then also makes the new size durable (a
  // size change is metadata fdatasync flushes) before the next segment exists.
  if (old->allocated > old->bytes.load()) {
    if (::ftruncate(old->fd, off_t(old->bytes.load())) != 0) {
      return StorageFail(IoError("truncate preallocated space of", old->log_path, errno));
    }
    old->allocated = old->bytes.load();
  }
  if (int err = SyncData(old->fd); err != 0) {
    PoisonFromWriter(err, "fdatasync of sealed segment " + old->log_path);
    return StorageFail(PoisonError());
  }
  WriteIndexFile(*old);
  {
    std::lock_guard<std::mutex> l(sync_mu_);
    PublishDurableLocked(next_offset_, old->base, old->bytes.load());
  }
  if (opts_.fsync_mode == FsyncMode::kOnCommit) notifier_.Advance(Offset(next_offset_));
  auto seg = CreateSegment(next_offset_);
  if (!seg) return tl::unexpected(seg.error());
  {
    std::lock_guard<std::mutex> l(state_mu_);
    segments_.push_back(*seg);
    active_ = *seg;
  }
  builder_.Reset(0, false);
  {
    std::lock_guard<std::mutex> l(sync_mu_);
    WriteMark(active_->base, kSegmentHeaderBytes, false);
  }
  if (metrics_) metrics_->segment_rolls->Increment();
  return {};
}

void DurableLog::PublishDurableLocked(uint64_t target, uint64_t seg_base, uint64_t seg_bytes) {
  if (target > durable_) {
    durable_ = target;
    durable_atomic_.store(target);
    WriteMark(seg_base, seg_bytes, false);
  }
  SyncWaiter* first_uncovered = nullptr;
  for (SyncWaiter* w = waiters_; w != nullptr; w = w->next) {
    if (w->need <= durable_) {
      w->cv.notify_one();
    } else if (first_uncovered == nullptr) {
      first_uncovered = w;
    }
  }
  if (first_uncovered != nullptr && !flushing_) first_uncovered->cv.notify_one();
}

StorageResult<void> DurableLog::WaitDurable(uint64_t need) {
  std::unique_lock<std::mutex> l(sync_mu_);
  SyncWaiter self;
  self.need = need;
  bool linked = false;
  auto unlink = [&] {
    if (!linked) return;
    if (self.prev != nullptr)
      self.prev->next = self.next;
    else
      waiters_ = self.next;
    if (self.next != nullptr) self.next->prev = self.prev;
    linked = false;
  };
  bool wrote_poison = false;
  StorageResult<void> result;
  while (true) {
    if (durable_ >= need) break;
    if (poison_) {
      result = StorageFail(*poison_);
      break;
    }
    if (!flushing_) {
      flushing_ = true;
      unlink();
      l.unlock();
      // Target first, then the segment: data counted in the target lives in this segment or
      // in one a roll already synced.
      const uint64_t target = written_end_.load();
      std::shared_ptr<Segment> seg;
      {
        std::lock_guard<std::mutex> s(state_mu_);
        seg = active_;
      }
      const uint64_t seg_bytes = seg->bytes.load();
      auto t0 = std::chrono::steady_clock::now();
      int err = SyncData(seg->fd);
      double took = SecondsSince(t0);
      l.lock();
      flushing_ = false;
      idle_cv_.notify_all();
      if (err != 0) {
        SetPoisonLocked(err, "fdatasync of " + seg->log_path);
        wrote_poison = true;
        result = StorageFail(*poison_);
        break;
      }
      if (metrics_) {
        metrics_->sync_duration->Observe(took);
        uint64_t appends = 1;
        for (SyncWaiter* w = waiters_; w != nullptr; w = w->next) {
          if (w->need <= target) ++appends;
        }
        metrics_->sync_batch_appends->Observe(double(appends));
        metrics_->sync_batch_records->Observe(double(target > durable_ ? target - durable_ : 0));
      }
      PublishDurableLocked(target, seg->base, seg_bytes);
      continue;
    }
    if (!linked) {
      self.next = nullptr;
      self.prev = nullptr;
      // Append at the tail to keep arrival order (the next leader is the oldest waiter).
      if (waiters_ == nullptr) {
        waiters_ = &self;
      } else {
        SyncWaiter* t = waiters_;
        while (t->next != nullptr) t = t->next;
        t->next = &self;
        self.prev = t;
      }
      linked = true;
    }
    self.cv.wait(l);
  }
  unlink();
  // Hand leadership on if nobody is flushing and someone still waits.
  if (!flushing_ && waiters_ != nullptr && !poison_) waiters_->cv.notify_one();
  uint64_t durable = durable_;
  l.unlock();
  if (wrote_poison) WritePoisonMarker();
  if (result && opts_.fsync_mode == FsyncMode::kOnCommit) notifier_.Advance(Offset(durable));
  return result;
}

StorageResult<void> DurableLog::Sync() {
  if (poisoned_.load()) return StorageFail(PoisonError());
  return WaitDurable(written_end_.load());
}

void DurableLog::AcquireFlushExclusive() {
  std::unique_lock<std::mutex> l(sync_mu_);
  idle_cv_.wait(l, [&] { return !flushing_; });
  flushing_ = true;
}

void DurableLog::ReleaseFlushExclusive() {
  std::lock_guard<std::mutex> l(sync_mu_);
  flushing_ = false;
  idle_cv_.notify_all();
  if (waiters_ != nullptr) waiters_->cv.notify_one();
}

StorageResult<void> DurableLog::RemoveSegmentFiles(const Segment& seg) {
  if (::unlink(seg.log_path.c_str()) != 0 && errno != ENOENT) {
    return StorageFail(IoError("unlink", seg.log_path, errno));
  }
  if (::unlink(seg.index_path.c_str()) != 0 && errno != ENOENT) {
    return StorageFail(IoError("unlink", seg.index_path, errno));
  }
  return SyncDirectory(dir_);
}

StorageResult<uint64_t> DurableLog::LocatePosition(const Segment& seg, uint64_t offset) const {
  uint64_t pos = kSegmentHeaderBytes;
  uint64_t at = seg.base;
  uint64_t end_bytes = seg.bytes.load();
  {
    std::lock_guard<std::mutex> l(state_mu_);
    auto it = std::upper_bound(seg.index.begin(), seg.index.end(), offset,
                               [](uint64_t o, const IndexEntry& e) { return o < e.offset; });
    if (it != seg.index.begin()) {
      --it;
      pos = it->position;
      at = it->offset;
    }
    for (size_t i = 0; i < seg.recent_count; ++i) {
      const IndexEntry& e = seg.recent[i];
      if (e.offset <= offset && e.offset > at) {
        pos = e.position;
        at = e.offset;
      }
    }
  }
  uint8_t hdr[kRecordHeaderBytes];
  while (at < offset) {
    if (pos + kRecordHeaderBytes > end_bytes) break;
    int64_t n = ReadAt(seg.fd, hdr, sizeof(hdr), pos);
    if (n > 0 && metrics_) metrics_->read_bytes->Increment(uint64_t(n));
    if (n != int64_t(sizeof(hdr))) break;
    RecordHeader h;
    if (!DecodeRecordHeader(hdr, &h) || h.offset != at) {
      return StorageFail(
          CorruptionError("record header damaged while seeking offset " + std::to_string(offset),
                          seg.log_path, pos));
    }
    pos += RecordBytes(h.payload_len);
    ++at;
  }
  if (at != offset) {
    return StorageFail(
        CorruptionError("offset " + std::to_string(offset) + " not found", seg.log_path, pos));
  }
  return pos;
}

StorageResult<void> DurableLog::Truncate(Offset new_tail_offset) {
  const uint64_t new_tail = new_tail_offset.value();
  std::unique_lock<std::mutex> l(append_mu_);
  if (closed_.load()) return StorageFail(StorageErrc::kClosed, "log " + dir_ + " is closed");
  if (poisoned_.load()) return StorageFail(PoisonError());
  if (new_tail < commit_offset_.load()) {
    return StorageFail(StorageErrc::kBelowCommit, "truncate to " + std::to_string(new_tail) +
                                                      " refused: below commit offset " +
                                                      std::to_string(commit_offset_.load()));
  }
  if (new_tail > next_offset_) {
    return StorageFail(StorageErrc::kInvalidArgument, "truncate to " + std::to_string(new_tail) +
                                                          " is past the tail " +
                                                          std::to_string(next_offset_));
  }
  if (new_tail < base_offset_.load()) {
    return StorageFail(StorageErrc::kInvalidArgument,
                       "truncate to " + std::to_string(new_tail) + " is below the base " +
                           std::to_string(base_offset_.load()) + " (use Reset)");
  }
  if (new_tail == next_offset_) return {};
  rewrites_.fetch_add(1);
  WaitForZeroFill(l);
  AcquireFlushExclusive();
  StorageResult<void> result;
  do {
    // Whole segments at or above the cut go, newest first, a directory sync after each.
    while (segments_.size() > 1 && segments_.back()->base >= new_tail) {
      std::shared_ptr<Segment> gone;
      {
        std::lock_guard<std::mutex> s(state_mu_);
        gone = segments_.back();
        segments_.pop_back();
        active_ = segments_.back();
      }
      if (auto r = RemoveSegmentFiles(*gone); !r) {
        result = r;
        break;
      }
    }
    if (!result) break;
    std::shared_ptr<Segment> seg = segments_.back();
    uint64_t end_offset;
    {
      std::lock_guard<std::mutex> s(state_mu_);
      end_offset = seg->end_offset;
    }
    uint64_t pos = seg->bytes.load();
    if (new_tail < end_offset) {
      auto p = LocatePosition(*seg, new_tail);
      if (!p) {
        result = tl::unexpected(p.error());
        break;
      }
      pos = *p;
    }
    if (::ftruncate(seg->fd, off_t(pos)) != 0) {
      result = StorageFail(IoError("truncate", seg->log_path, errno));
      break;
    }
    seg->allocated = pos;
    if (int err = SyncData(seg->fd); err != 0) {
      {
        std::lock_guard<std::mutex> s(sync_mu_);
        SetPoisonLocked(err, "fdatasync after truncate of " + seg->log_path);
      }
      WritePoisonMarker();
      result = StorageFail(PoisonError());
      break;
    }
    {
      std::lock_guard<std::mutex> s(state_mu_);
      seg->end_offset = new_tail;
      while (!seg->index.empty() && seg->index.back().offset >= new_tail) seg->index.pop_back();
      seg->ForgetBatchesFrom(new_tail);
      active_ = seg;
    }
    seg->bytes.store(pos);
    builder_.Reset(seg->index.empty() ? 0 : pos - seg->index.back().position, !seg->index.empty());
    WriteIndexFile(*seg);
    next_offset_ = new_tail;
    written_end_.store(new_tail);
    {
      std::lock_guard<std::mutex> s(sync_mu_);
      durable_ = new_tail;
      durable_atomic_.store(new_tail);
      WriteMark(seg->base, pos, true);
    }
  } while (false);
  ReleaseFlushExclusive();
  if (result) {
    written_notifier_.Set(new_tail_offset);
    notifier_.Set(new_tail_offset);
  }
  return result;
}

StorageResult<void> DurableLog::Reset(Offset base_offset) {
  const uint64_t base = base_offset.value();
  std::unique_lock<std::mutex> l(append_mu_);
  if (closed_.load()) return StorageFail(StorageErrc::kClosed, "log " + dir_ + " is closed");
  if (poisoned_.load()) return StorageFail(PoisonError());
  uint64_t from = std::max(base_offset_.load(), base);
  if (from < commit_offset_.load() && next_offset_ > from) {
    return StorageFail(StorageErrc::kBelowCommit,
                       "reset to base " + std::to_string(base) +
                           " refused: it would discard records below commit offset " +
                           std::to_string(commit_offset_.load()));
  }
  rewrites_.fetch_add(1);
  WaitForZeroFill(l);
  AcquireFlushExclusive();
  StorageResult<void> result;
  do {
    while (!segments_.empty()) {
      std::shared_ptr<Segment> gone;
      {
        std::lock_guard<std::mutex> s(state_mu_);
        gone = segments_.back();
        segments_.pop_back();
      }
      if (auto r = RemoveSegmentFiles(*gone); !r) {
        result = r;
        break;
      }
    }
    if (!result) break;
    auto seg = CreateSegment(base);
    if (!seg) {
      result = tl::unexpected(seg.error());
      break;
    }
    {
      std::lock_guard<std::mutex> s(state_mu_);
      segments_.push_back(*seg);
      active_ = *seg;
    }
    base_offset_.store(base);
    builder_.Reset(0, false);
    next_offset_ = base;
    written_end_.store(base);
    {
      std::lock_guard<std::mutex> s(sync_mu_);
      durable_ = base;
      durable_atomic_.store(base);
      WriteMark(base, kSegmentHeaderBytes, true);
    }
  } while (false);
  ReleaseFlushExclusive();
  if (result) {
    written_notifier_.Set(base_offset);
    notifier_.Set(base_offset);
  }
  return result;
}

StorageResult<RetentionResult> DurableLog::EnforceRetention() {
  return EnforceRetention(WallMs());
}

StorageResult<RetentionResult> DurableLog::EnforceRetention(uint64_t now_ms) {
  std::unique_lock<std::mutex> l(append_mu_);
  RetentionResult res;
  if (closed_.load()) return StorageFail(StorageErrc::kClosed, "log " + dir_ + " is closed");
  const uint64_t age_ms = uint64_t(opts_.retention_age.count()) * 1000;
  while (segments_.size() > 1) {
    std::shared_ptr<Segment> oldest;
    uint64_t total = 0;
    uint64_t end_offset;
    uint64_t last_ts;
    {
      std::lock_guard<std::mutex> s(state_mu_);
      oldest = segments_.front();
      for (const auto& seg : segments_) total += seg->bytes.load();
      end_offset = oldest->end_offset;
      last_ts = oldest->last_timestamp_ms;
    }
    bool by_size = opts_.retention_bytes > 0 && total > opts_.retention_bytes;
    bool by_age = age_ms > 0 && last_ts + age_ms < now_ms;
    if (!by_size && !by_age) break;
    if (retention_hold_.load() && end_offset > commit_offset_.load()) break;
    {
      std::lock_guard<std::mutex> s(state_mu_);
      segments_.erase(segments_.begin());
      base_offset_.store(segments_.front()->base);
    }
    if (auto r = RemoveSegmentFiles(*oldest); !r) return tl::unexpected(r.error());
    ++res.segments_deleted;
    res.bytes_reclaimed += oldest->bytes.load();
    if (metrics_) {
      metrics_->retention_segments->Increment();
      metrics_->retention_bytes->Increment(oldest->bytes.load());
    }
  }
  res.base_offset = Offset(base_offset_.load());
  return res;
}

StorageResult<void> DurableLog::Roll() {
  std::unique_lock<std::mutex> l(append_mu_);
  if (closed_.load()) return StorageFail(StorageErrc::kClosed, "log " + dir_ + " is closed");
  if (poisoned_.load()) return StorageFail(PoisonError());
  if (next_offset_ == active_->base) return {};
  WaitForZeroFill(l);
  return RollLocked();
}

StorageResult<RetentionResult> DurableLog::DropSegmentsBelow(Offset below) {
  const uint64_t offset = below.value();
  std::unique_lock<std::mutex> l(append_mu_);
  RetentionResult res;
  if (closed_.load()) return StorageFail(StorageErrc::kClosed, "log " + dir_ + " is closed");
  while (true) {
    std::shared_ptr<Segment> oldest;
    {
      std::lock_guard<std::mutex> s(state_mu_);
      if (segments_.size() <= 1) break;
      oldest = segments_.front();
    }
    if (oldest->end_offset > offset) break;
    if (retention_hold_.load() && oldest->end_offset > commit_offset_.load()) break;
    {
      std::lock_guard<std::mutex> s(state_mu_);
      segments_.erase(segments_.begin());
      base_offset_.store(segments_.front()->base);
    }
    if (auto r = RemoveSegmentFiles(*oldest); !r) return tl::unexpected(r.error());
    ++res.segments_deleted;
    res.bytes_reclaimed += oldest->bytes.load();
  }
  res.base_offset = Offset(base_offset_.load());
  return res;
}

uint64_t DurableLog::DiskBytes() const {
  std::lock_guard<std::mutex> l(state_mu_);
  uint64_t total = 0;
  for (const auto& seg : segments_) total += seg->bytes.load();
  return total;
}

StorageResult<void> DurableLog::Close() {
  if (closed_.exchange(true)) return {};
  std::thread flusher;
  {
    std::lock_guard<std::mutex> l(flusher_mu_);
    stop_flusher_ = true;
    flusher = std::move(flusher_);
  }
  flusher_cv_.notify_all();
  if (flusher.joinable()) flusher.join();
  StorageResult<void> result;
  {
    std::lock_guard<std::mutex> l(append_mu_);
    if (!poisoned_.load() && active_ != nullptr) {
      if (written_end_.load() > durable_atomic_.load()) result = WaitDurable(written_end_.load());
      // The flusher is gone, so no zero-fill runs: leave the file ending at its last record
      // (were this cut lost in a crash, recovery reads the zeros as the end).
      if (result && active_->allocated > active_->bytes.load() &&
          ::ftruncate(active_->fd, off_t(active_->bytes.load())) == 0) {
        active_->allocated = active_->bytes.load();
      }
      if (result) {
        WriteIndexFile(*active_);
        std::lock_guard<std::mutex> s(sync_mu_);
        WriteMark(active_->base, active_->bytes.load(), true);
      }
    } else if (poisoned_.load()) {
      result = StorageFail(PoisonError());
    }
  }
  // Async appends still waiting learn the outcome of the final flush.
  CompleteAsync(true, result);
  written_notifier_.Close();
  notifier_.Close();
  return result;
}

void DurableLog::FlusherLoop() {
  std::unique_lock<std::mutex> l(flusher_mu_);
  const bool periodic = opts_.fsync_mode == FsyncMode::kPeriodic;
  while (!stop_flusher_) {
    auto ready = [&] { return stop_flusher_ || !async_.empty() || preallocation_wanted_.load(); };
    if (periodic) {
      flusher_cv_.wait_for(l, opts_.fsync_interval, ready);
    } else {
      flusher_cv_.wait(l, ready);
    }
    if (stop_flusher_) break;
    // Flushes first: zero-filling runs only while no append waits for the disk.
    if (!periodic && async_.empty()) {
      l.unlock();
      Preallocate();
      l.lock();
      continue;
    }
    l.unlock();
    uint64_t target = written_end_.load();
    StorageResult<void> r;
    if (poisoned_.load()) {
      r = StorageFail(PoisonError());
    } else if (target > durable_atomic_.load()) {
      r = WaitDurable(target);
    }
    CompleteAsync(!r, r);
    l.lock();
  }
}

bool DurableLog::Preallocating() const {
  return opts_.preallocate_bytes > 0 && opts_.fsync_mode == FsyncMode::kOnCommit;
}

void DurableLog::WantPreallocationLocked(const Segment& seg) {
  const uint64_t limit = opts_.segment_bytes;
  // A fill under way already reaches preallocate_bytes past where it began.
  if (zero_filling_ || seg.allocated >= limit ||
      seg.allocated >= seg.bytes.load() + opts_.preallocate_bytes / 2) {
    return;
  }
  if (preallocation_wanted_.exchange(true)) return;
  std::lock_guard<std::mutex> f(flusher_mu_);
  StartFlusherLocked();
  flusher_cv_.notify_all();
}

void DurableLog::WaitForZeroFill(std::unique_lock<std::mutex>& l) {
  zero_fill_done_.wait(l, [this] { return !zero_filling_; });
}

void DurableLog::Preallocate() {
  static constexpr size_t kPiece = 64 << 10;
  static const std::array<uint8_t, kPiece> kZeros{};
  std::shared_ptr<Segment> seg;
  uint64_t from = 0;
  uint64_t to = 0;
  {
    std::lock_guard<std::mutex> l(append_mu_);
    preallocation_wanted_.store(false);
    if (closed_.load() || poisoned_.load() || broken_ || active_ == nullptr) return;
    seg = active_;
    // Starting a little past the records, so the appends that follow at once do not wait for
    // the fill (an append waits only if it would reach `from`); the bytes skipped grow the
    // file as appends always did.
    const uint64_t used = seg->bytes.load();
    const uint64_t slack = std::min<uint64_t>(opts_.preallocate_bytes / 4, 64 << 10);
    from = std::max(seg->allocated, used + slack);
    to = std::min(used + opts_.preallocate_bytes, opts_.segment_bytes);
    if (to <= from) return;
    zero_filling_ = true;
    zero_fill_from_ = from;
  }
  int err = 0;
  for (uint64_t pos = from; pos < to && err == 0; pos += kPiece) {
    err = WriteFullAt(seg->fd, kZeros.data(), size_t(std::min<uint64_t>(kPiece, to - pos)), pos);
  }
  // Once the zeros are in the page cache an append may overwrite them (its bytes come later,
  // so they win): appends wait for the writes, never for the sync below, so a slow or hung
  // disk stalls no executor here that it would not stall anyway.
  {
    std::lock_guard<std::mutex> l(append_mu_);
    zero_filling_ = false;
    if (err == 0) seg->allocated = std::max(seg->allocated, to);
  }
  zero_fill_done_.notify_all();
  if (err != 0) {
    // Nothing is lost (zeros past the records); appends grow the file as without it.
    spdlog::warn("log {}: preallocating {} bytes failed: {}", dir_, to - from, std::strerror(err));
    return;
  }
  // Synced here, so the flush of the records that land in it has no size change to commit.
  // A failed fdatasync may have dropped dirty pages of records too: poison, as every path does.
  if (err = SyncData(seg->fd); err != 0) {
    PoisonFromWriter(err, "fdatasync of preallocated space in " + seg->log_path);
  }
}

size_t DurableLog::SegmentCount() const {
  std::lock_guard<std::mutex> l(state_mu_);
  return segments_.size();
}

StorageResult<ReadBatch> DurableLog::Read(Offset from, ReadLimits limits) const {
  return ReadBelow<ReadBatch>(from.value(), limits, notifier_.tail().value());
}

StorageResult<ReadBatch> DurableLog::ReadWritten(Offset from, ReadLimits limits) const {
  return ReadBelow<ReadBatch>(from.value(), limits, written_end_.load());
}

StorageResult<RecordViews> DurableLog::ReadViews(Offset from, ReadLimits limits) const {
  return ReadBelow<RecordViews>(from.value(), limits, notifier_.tail().value());
}

StorageResult<RecordViews> DurableLog::ReadWrittenViews(Offset from, ReadLimits limits) const {
  return ReadBelow<RecordViews>(from.value(), limits, written_end_.load());
}

template <typename Out>
StorageResult<Out> DurableLog::ReadBelow(uint64_t from, ReadLimits limits, uint64_t tail) const {
  // In place, the records view `buf`: it is filled once (anew only while nothing views it).
  constexpr bool kInPlace = std::is_same_v<Out, RecordViews>;
  Out batch;
  batch.next_offset = Offset(from);
  const uint64_t base = base_offset_.load();
  if (from < base) {
    StorageError e;
    e.code = StorageErrc::kTrimmed;
    e.requested = Offset(from);
    e.oldest = Offset(base);
    e.message =
        "offset " + std::to_string(from) + " was trimmed; oldest is " + std::to_string(base);
    return StorageFail(std::move(e));
  }
  // A poisoned log serves only what is known durable (later bytes may never reach the disk).
  if (poisoned_.load()) tail = std::min(tail, durable_atomic_.load());
  uint64_t max_records =
      std::max<uint64_t>(1, std::min(limits.max_records, opts_.max_records_per_read));
  uint64_t budget = limits.max_bytes;
  uint64_t used = 0;
  uint64_t cur = from;
  // Read-ahead buffer, never zero-filled: a tail read (a replicator's, a live reader's) fills
  // only the few KiB it needs. In place, a buffer records already view is kept (`viewed`)
  // and the next pread fills a new one.
  std::unique_ptr<uint8_t[]> buf;
  size_t buf_capacity = 0;
  uint64_t read_ahead = kFirstReadAheadBytes;
  uint64_t scanned = 0;  // bytes of the records returned so far (headers included)
  [[maybe_unused]] std::vector<std::unique_ptr<uint8_t[]>> viewed;
  [[maybe_unused]] size_t records_in_viewed = 0;  // records viewing `viewed` or `buf` before
  auto finish = [&]() -> Out {
    if constexpr (kInPlace) {
      if (viewed.empty()) {
        batch.bytes = std::shared_ptr<const void>(std::shared_ptr<uint8_t[]>(std::move(buf)));
      } else {
        auto buffers = std::make_shared<ReadBuffers>();
        buffers->filled = std::move(viewed);
        buffers->filled.push_back(std::move(buf));
        batch.bytes = std::shared_ptr<const void>(std::move(buffers));
      }
    }
    batch.next_offset = Offset(cur);
    return std::move(batch);
  };
  while (cur < tail && batch.records.size() < max_records &&
         (batch.records.empty() || used < budget)) {
    std::shared_ptr<Segment> seg;
    uint64_t seg_end = 0;
    {
      std::lock_guard<std::mutex> l(state_mu_);
      auto it = std::upper_bound(
          segments_.begin(), segments_.end(), cur,
          [](uint64_t o, const std::shared_ptr<Segment>& s) { return o < s->base; });
      if (it == segments_.begin()) {
        if (batch.records.empty()) {
          StorageError e;
          e.code = StorageErrc::kTrimmed;
          e.requested = Offset(cur);
          e.oldest = Offset(segments_.empty() ? cur : segments_.front()->base);
          e.message = "offset " + std::to_string(cur) + " was trimmed";
          return StorageFail(std::move(e));
        }
        break;
      }
      seg = *std::prev(it);
      seg_end = seg->end_offset;
    }
    if (cur >= seg_end) break;
    // Stored before seg_end was published: covers every record below it. Past it the file
    // holds preallocated zeros (or nothing), which a read-ahead must not copy.
    const uint64_t seg_bytes = seg->bytes.load();
    auto start = LocatePosition(*seg, cur);
    if (!start) return tl::unexpected(start.error());
    uint64_t pos = *start;
    const uint64_t stop = std::min(seg_end, tail);
    // Buffered forward scan over [pos, ...).
    uint64_t buf_pos = pos;
    size_t buf_len = 0;
    while (cur < stop && batch.records.size() < max_records &&
           (batch.records.empty() || used < budget)) {
      enum class Have { kYes, kShort };
      auto ensure = [&](uint64_t p, size_t n) -> Have {
        if (p >= buf_pos && p + n <= buf_pos + buf_len) return Have::kYes;
        const uint64_t complete = seg_bytes > p ? seg_bytes - p : 0;
        uint64_t ahead = read_ahead;
        read_ahead = std::min(read_ahead * 2, kReadAheadBytes);
        if (!batch.records.empty()) {
          // A refill reads what the records still wanted would take at the size of those
          // read so far, plus a quarter (fewer bytes copied, and held by an in-place read's
          // views; a record larger than that is still read whole, in another refill).
          const uint64_t per_record = scanned / batch.records.size() + 1;
          const uint64_t expected = (max_records - batch.records.size()) * per_record;
          ahead = std::min(ahead, expected + expected / 4);
        }
        const size_t want = std::max<size_t>(n, std::min(complete, ahead));
        if constexpr (kInPlace) {
          if (batch.records.size() > records_in_viewed) {
            viewed.push_back(std::move(buf));  // records view it: the next pread fills another
            records_in_viewed = batch.records.size();
            buf_capacity = 0;
          }
        }
        if (buf_capacity < want) {
          buf = std::make_unique_for_overwrite<uint8_t[]>(want);
          buf_capacity = want;
        }
        int64_t got = ReadAt(seg->fd, buf.get(), want, p);
        if (got < 0) return Have::kShort;
        if (metrics_) metrics_->read_bytes->Increment(uint64_t(got));
        buf_pos = p;
        buf_len = size_t(got);
        return buf_len >= n ? Have::kYes : Have::kShort;
      };
      // Damage: the intact records before it are returned first, so the reader's next read
      // starts exactly at the damaged offset and gets the error naming offset, file and byte.
      std::optional<StorageError> damage;
      RecordHeader h;
      const uint8_t* payload = nullptr;
      Have header = ensure(pos, kRecordHeaderBytes);
      if (header == Have::kShort) {
        damage = CorruptionError("short read of record header at offset " + std::to_string(cur),
                                 seg->log_path, pos);
      } else if (!DecodeRecordHeader(buf.get() + (pos - buf_pos), &h) || h.offset != cur ||
                 h.payload_len > kMaxPayloadBytes) {
        damage = CorruptionError("record header damaged at offset " + std::to_string(cur),
                                 seg->log_path, pos);
      } else if (ensure(pos, RecordBytes(h.payload_len)) == Have::kShort) {
        damage = CorruptionError("short read of record payload at offset " + std::to_string(cur),
                                 seg->log_path, pos);
      } else {
        payload = buf.get() + (pos - buf_pos) + kRecordHeaderBytes;
        if (!PayloadCrcMatches(h, payload)) {
          damage = CorruptionError("record checksum mismatch at offset " + std::to_string(cur),
                                   seg->log_path, pos);
        }
      }
      if (damage) {
        if (batch.records.empty()) return StorageFail(std::move(*damage));
        return finish();
      }
      if constexpr (kInPlace) {
        batch.records.push_back(RecordView{
            Offset(h.offset), Generation(h.generation), h.timestamp_ms,
            std::string_view(reinterpret_cast<const char*>(payload), h.payload_len), h.flags});
      } else {
        Record rec;
        rec.offset = Offset(h.offset);
        rec.generation = Generation(h.generation);
        rec.timestamp_ms = h.timestamp_ms;
        rec.flags = h.flags;
        rec.payload.assign(reinterpret_cast<const char*>(payload), h.payload_len);
        batch.records.push_back(std::move(rec));
      }
      used += h.payload_len;
      scanned += RecordBytes(h.payload_len);
      pos += RecordBytes(h.payload_len);
      ++cur;
    }
  }
  return finish();
}

WaitOutcome DurableLog::WaitFor(Offset offset, Deadline deadline) const {
  return notifier_.Wait(offset, deadline);
}

uint64_t DurableLog::NotifyWhen(Offset offset, TailCallback cb) {
  return notifier_.Notify(offset, std::move(cb));
}

bool DurableLog::CancelNotify(uint64_t id) {
  return notifier_.Cancel(id);
}

uint64_t DurableLog::NotifyWrittenWhen(Offset offset, TailCallback cb) {
  return written_notifier_.Notify(offset, std::move(cb));
}

bool DurableLog::CancelWrittenNotify(uint64_t id) {
  return written_notifier_.Cancel(id);
}

}  // namespace felix::storage
