#include "broker/log_appender.h"

namespace felix::broker {

Result<Generation> ShardFence::Admit() const {
  if (lease_valid_ && !lease_valid_()) {
    return Fail(ErrorCode::kUnavailable,
                "this broker's lease is not valid now: it may not write (retry shortly)");
  }
  return generation_;
}

void LogAppender::Append(std::span<storage::AppendRecord> records, Done done) {
  auto generation = fence_.Admit();
  if (!generation) return done(tl::unexpected(generation.error()));
  for (auto& record : records) record.generation = generation->value();
  bool wait_for_flush =
      ack_after_ == AckAfter::kFlush || log_.options().fsync_mode == storage::FsyncMode::kOnCommit;
  if (!wait_for_flush) {
    auto appended = log_.Append(records);
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
  if (!appended) return pending->done(tl::unexpected(appended.error().ToError()));
  std::lock_guard lock(pending->mu);
  pending->appended = *appended;
  answer_if_both(*pending);
}

}  // namespace felix::broker
