#include "broker/shard_producers.h"

#include <spdlog/spdlog.h>

namespace felix::broker {

namespace {

// A mark: producer u64, sequence u64, digest u64, count u32, first_offset u64 (big-endian).
constexpr size_t kMarkSize = 36;

void Put(std::vector<uint8_t>& out, uint64_t v, int bytes) {
  for (int i = bytes - 1; i >= 0; --i) out.push_back(static_cast<uint8_t>(v >> (8 * i)));
}

uint64_t Get(const uint8_t* p, int bytes) {
  uint64_t v = 0;
  for (int i = 0; i < bytes; ++i) v = (v << 8) | p[i];
  return v;
}

}  // namespace

ShardProducers::ShardProducers(Executor& executor, StreamShard& shard, LogAppender* marks)
    : executor_(executor),
      shard_(shard),
      marks_(marks),
      alive_(std::make_shared<ShardProducers*>(this)) {}

Result<void> ShardProducers::Recover() {
  if (marks_ == nullptr) return Ok();
  const storage::DurableLog& log = marks_->log();
  Offset from = log.BaseOffset();
  const Offset tail = log.TailOffset();
  size_t restored = 0;
  while (from < tail) {
    auto batch = log.Read(from, storage::ReadLimits{4096, 1u << 20});
    if (!batch) return tl::unexpected(batch.error().ToError());
    if (batch->records.empty()) break;
    for (const storage::Record& r : batch->records) {
      if (r.payload.size() != kMarkSize) {
        return Fail(ErrorCode::kCorruption, log.dir() + " offset " + to_string(r.offset) +
                                                ": producer mark of " +
                                                std::to_string(r.payload.size()) + " bytes");
      }
      auto* p = reinterpret_cast<const uint8_t*>(r.payload.data());
      table_.Restore(Get(p, 8), Get(p + 8, 8), Get(p + 16, 8),
                     static_cast<uint32_t>(Get(p + 24, 4)), Get(p + 28, 8));
      ++restored;
    }
    from = batch->records.back().offset + 1;
  }
  if (restored > 0) {
    spdlog::info("idempotent producers recovered log={} marks={} producers={}", log.dir(), restored,
                 table_.producers());
  }
  return Ok();
}

void ShardProducers::Publish(PayloadBatch batch, uint64_t producer, uint64_t sequence, Done done) {
  using Kind = ProducerTable::Verdict::Kind;
  uint64_t digest = BatchDigest(batch.payloads);
  auto count = static_cast<uint32_t>(batch.payloads.size());
  ProducerTable::Verdict verdict = table_.Admit(producer, sequence, digest, count);
  IdempotentOutcome outcome;
  switch (verdict.kind) {
    case Kind::kAppend: {
      std::weak_ptr<ShardProducers*> alive = alive_;
      // A `Quorum` batch answered quorum_timeout is written all the same: it keeps its sequence
      // (a resend waits for it) and is committed here once a majority holds it (`late`).
      auto late = [alive, producer, sequence, digest, count](Result<Offset> result) {
        if (auto self = alive.lock()) {
          (*self)->OnAppended(producer, sequence, digest, count, std::move(result),
                              [](const IdempotentOutcome&) {});
        }
      };
      shard_.Publish(
          std::move(batch),
          [alive, producer, sequence, digest, count,
           done = std::move(done)](Result<Offset> result) mutable {
            // StreamShard runs this on the executor.
            if (auto self = alive.lock()) {
              (*self)->OnAppended(producer, sequence, digest, count, std::move(result),
                                  std::move(done));
            }
          },
          std::move(late));
      return;
    }
    case Kind::kDuplicate:
      if (!verdict.first_offset) {  // the original is still being written
        waiting_[{producer, sequence}].push_back(std::move(done));
        return;
      }
      outcome.kind = IdempotentOutcome::Kind::kDuplicate;
      outcome.first_offset = verdict.first_offset;
      break;
    default:
      outcome.kind = IdempotentOutcome::Kind::kRefused;
      outcome.refusal = verdict.kind;
      outcome.expected = verdict.expected;
      break;
  }
  done(outcome);
}

void ShardProducers::OnAppended(uint64_t producer, uint64_t sequence, uint64_t digest,
                                uint32_t count, Result<Offset> result, Done done) {
  if (!result && result.error().code == ErrorCode::kTimeout) {
    // Not vouched for by a majority yet, but in the log: outcome unknown for this publisher;
    // resends under the sequence wait for the late commit (or the shard's reopen).
    IdempotentOutcome unknown;
    unknown.kind = IdempotentOutcome::Kind::kFailed;
    unknown.error = result.error();
    done(unknown);
    return;
  }
  if (!result) {
    table_.Failed(producer, sequence);
    IdempotentOutcome failed;
    failed.kind = IdempotentOutcome::Kind::kFailed;
    failed.error = result.error();
    Settle(producer, sequence, failed, done);
    return;
  }
  const uint64_t first = result->value();  // the producer table keeps the wire's numbers
  table_.Committed(producer, sequence, first);
  IdempotentOutcome written;
  written.kind = IdempotentOutcome::Kind::kWritten;
  written.first_offset = first;
  if (marks_ == nullptr) {
    Settle(producer, sequence, written, done);
    return;
  }
  // Answer once the mark is durable: an acknowledged batch is then known after a restart.
  auto mark = std::make_shared<std::vector<uint8_t>>();
  mark->reserve(kMarkSize);
  Put(*mark, producer, 8);
  Put(*mark, sequence, 8);
  Put(*mark, digest, 8);
  Put(*mark, count, 4);
  Put(*mark, first, 8);
  storage::AppendRecord record{std::span<const uint8_t>(*mark), Generation(), 0};
  std::weak_ptr<ShardProducers*> alive = alive_;
  Executor* executor = &executor_;
  auto finish = [alive, executor, producer, sequence, written, done,
                 mark](std::optional<Error> error) {
    executor->Post([alive, producer, sequence, written, done, error] {
      auto self = alive.lock();
      if (!self) return;
      IdempotentOutcome outcome = written;
      if (error) {
        // The batch is written but its mark is not: indeterminate for the client.
        outcome.kind = IdempotentOutcome::Kind::kFailed;
        outcome.error = *error;
      }
      (*self)->Settle(producer, sequence, outcome, done);
    });
  };
  marks_->Append(std::span<storage::AppendRecord>(&record, 1),
                 [finish](Result<storage::AppendResult> r) {
                   if (r) return finish(std::nullopt);
                   finish(r.error());
                 });
}

void ShardProducers::Settle(uint64_t producer, uint64_t sequence, const IdempotentOutcome& outcome,
                            const Done& done) {
  done(outcome);
  auto it = waiting_.find({producer, sequence});
  if (it == waiting_.end()) return;
  std::vector<Done> resends = std::move(it->second);
  waiting_.erase(it);
  IdempotentOutcome duplicate = outcome;
  if (duplicate.kind == IdempotentOutcome::Kind::kWritten) {
    duplicate.kind = IdempotentOutcome::Kind::kDuplicate;
  }
  for (const Done& resend : resends) resend(duplicate);
}

}  // namespace felix::broker
