#include "broker/log_appender.h"

#include <spdlog/spdlog.h>

namespace felix::broker {

Result<Generation> ShardFence::Admit() const {
  if (lease_valid_ && !lease_valid_()) {
    return Fail(ErrorCode::kUnavailable,
                "this broker's lease is not valid now: it may not write (retry shortly)");
  }
  if (leads_) {
    if (auto leads = leads_(); !leads) return tl::unexpected(leads.error());
  }
  return generation_;
}

void LogAppender::Append(std::span<storage::AppendRecord> records, Done done) {
  auto generation = fence_.Admit();
  if (!generation) return done(tl::unexpected(generation.error()));
  for (auto& record : records) record.generation = *generation;
  bool wait_for_flush =
      ack_after_ == AckAfter::kFlush || log_.options().fsync_mode == storage::FsyncMode::kOnCommit;
  if (!wait_for_flush) {
    auto appended = log_.Append(records);
    NoteWrite(appended);
    if (!appended) return done(tl::unexpected(appended.error().ToError()));
    return done(*appended);
  }
  // The result is known only after AppendAsync returns, the flush may finish before that:
  // whichever of the two comes second answers.
  struct Pending {
    std::mutex mu;
    std::optional<storage::AppendResult> appended;
    std::optional<storage::StorageResult<void>> flushed;
    Done done;
  };
  auto pending = std::make_shared<Pending>();
  pending->done = std::move(done);
  auto answer_if_both = [](Pending& p) {
    if (!p.appended || !p.flushed) return false;
    if (!*p.flushed) {
      p.done(tl::unexpected(p.flushed->error().ToError()));
    } else {
      p.done(*p.appended);
    }
    return true;
  };
  auto appended = log_.AppendAsync(
      records, [pending, answer_if_both](const storage::StorageResult<void>& flushed) {
        std::lock_guard lock(pending->mu);
        pending->flushed = flushed;
        answer_if_both(*pending);
      });
  NoteWrite(appended);
  if (!appended) return pending->done(tl::unexpected(appended.error().ToError()));
  std::lock_guard lock(pending->mu);
  pending->appended = *appended;
  answer_if_both(*pending);
}

void LogAppender::NoteWrite(const storage::StorageResult<storage::AppendResult>& appended) {
  constexpr auto kRelogInterval = std::chrono::seconds(10);
  if (appended) {
    if (!write_failing_) return;
    write_failing_ = false;
    spdlog::info("storage writes succeed again log={} after failed_appends={}", log_.dir(),
                 failed_appends_);
    if (reporting_.health) reporting_.health->Clear(HealthKind::kStorageWrite, log_.dir());
    return;
  }
  const storage::StorageError& error = appended.error();
  if (error.code != storage::StorageErrc::kIo) return;  // closed, poisoned: reported elsewhere
  if (error.NoSpace() && reporting_.full) {
    reporting_.full->Increment();
  }
  auto now = std::chrono::steady_clock::now();
  std::string what = error.ToString();
  if (!write_failing_) {
    write_failing_ = true;
    failed_appends_ = 1;
    last_failure_log_ = now;
    spdlog::error(
        "storage write failed log={} error={}: appends to it are refused until a write "
        "succeeds (counted in felix_storage_write_failures_total; logged again at most every "
        "10 s)",
        log_.dir(), what);
    if (reporting_.health) reporting_.health->Set(HealthKind::kStorageWrite, log_.dir(), what);
    return;
  }
  ++failed_appends_;
  if (now - last_failure_log_ >= kRelogInterval) {
    last_failure_log_ = now;
    spdlog::error("storage writes still failing log={} error={} failed_appends={}", log_.dir(),
                  what, failed_appends_);
  }
}

}  // namespace felix::broker
