#include "broker/stream_groups.h"

#include <algorithm>

#include <spdlog/spdlog.h>

#include "wire/flx1/constants.h"

namespace felix::broker {
namespace {

GroupError Refusal(GroupErrc reason, std::string message, bool fatal = false) {
  return GroupError{reason, fatal, std::move(message)};
}

tl::unexpected<GroupError> Refused(GroupErrc reason, std::string message, bool fatal = false) {
  return tl::unexpected<GroupError>(Refusal(reason, std::move(message), fatal));
}

// Folds a key → latest-value log (storage.md §19) into `out`.
Result<void> Fold(const storage::DurableLog& log, std::map<std::string, std::string>& out) {
  Offset from = log.BaseOffset();
  const Offset tail = log.TailOffset();
  while (from < tail) {
    auto batch = log.Read(from, storage::ReadLimits{1024, 1u << 20});
    if (!batch) return tl::unexpected(batch.error().ToError());
    if (batch->records.empty()) break;
    for (const storage::Record& r : batch->records) {
      auto decoded = DecodeGroupLogRecord(storage::AsBytes(r.payload));
      if (!decoded) {
        return Fail(ErrorCode::kCorruption, log.dir() + " offset " + to_string(r.offset) + ": " +
                                                GroupRecordErrorName(decoded.error()));
      }
      if (decoded->op == GroupRecordOp::kPut) {
        out[decoded->key] = std::move(decoded->value);
      } else {
        out.erase(decoded->key);
      }
    }
    from = batch->records.back().offset + 1;
  }
  return Ok();
}

}  // namespace

StreamGroups::StreamGroups(std::string shard_name, Executor& executor, StreamShard& shard,
                           LogAppender& cursors, LogAppender& dead_letters, GroupOptions options,
                           GroupMetrics& metrics, std::function<GroupTime()> clock)
    : shard_name_(std::move(shard_name)),
      executor_(executor),
      shard_(shard),
      cursors_(cursors),
      dead_letters_(dead_letters),
      options_(options),
      metrics_(metrics),
      clock_(std::move(clock)),
      alive_(std::make_shared<StreamGroups*>(this)) {}

StreamGroups::~StreamGroups() {
  int64_t reported = 0;
  for (auto& [name, entry] : groups_) reported += entry->reported_in_flight;
  metrics_.inflight.Add(-reported);
}

Result<void> StreamGroups::Recover() {
  std::map<std::string, std::string> cursors, dead_letters;
  if (auto folded = Fold(cursors_.log(), cursors); !folded) return folded;
  if (auto folded = Fold(dead_letters_.log(), dead_letters); !folded) return folded;
  const Offset tail = shard_.committed_next();
  ConsumerGroupLimits limits{options_.max_attempts, options_.max_in_flight};
  for (const auto& [group, value] : cursors) {
    auto position = DecodeCursorValue(value);
    if (!position) {
      return Fail(ErrorCode::kCorruption, cursors_.log().dir() + " group '" + group +
                                              "': " + GroupRecordErrorName(position.error()));
    }
    groups_.emplace(group, std::make_unique<Entry>(ConsumerGroup(Offset(*position), tail, limits)));
  }
  for (const auto& [key, value] : dead_letters) {
    auto parts = ParseDeadLetterKey(key);
    auto state = DecodeDeadLetterValue(value);
    if (!parts || !state) {
      return Fail(ErrorCode::kCorruption,
                  dead_letters_.log().dir() + ": " +
                      GroupRecordErrorName(!parts ? parts.error() : state.error()));
    }
    auto it = groups_.find(parts->group);
    if (it == groups_.end()) {
      it = groups_
               .emplace(parts->group,
                        std::make_unique<Entry>(ConsumerGroup(std::nullopt, tail, limits)))
               .first;
    }
    it->second->state.RestoreDeadLetter(Offset(parts->offset), *state);
  }
  if (!groups_.empty()) {
    spdlog::info("consumer groups recovered shard={} groups={} dead_letters={}", shard_name_,
                 groups_.size(), dead_letters.size());
  }
  return Ok();
}

void StreamGroups::NoteSkipped(Entry& entry, Offset from, Offset to) {
  if (from >= to) return;  // the trimmed offsets were handed out before: no new hole
  uint64_t length = to - from;
  if (auto below = entry.skipped_runs.find(from); below != entry.skipped_runs.end()) {
    length += below->second;  // the hole grew upwards before its record was handed out
    entry.skipped_runs.erase(below);
  }
  entry.skipped_runs[to] = length;
}

StreamGroups::Entry& StreamGroups::EntryFor(const std::string& group) {
  auto it = groups_.find(group);
  if (it == groups_.end()) {
    ConsumerGroupLimits limits{options_.max_attempts, options_.max_in_flight};
    it = groups_
             .emplace(group, std::make_unique<Entry>(
                                 ConsumerGroup(std::nullopt, shard_.committed_next(), limits)))
             .first;
  }
  return *it->second;
}

void StreamGroups::Poll(const std::string& group, GroupPollRequest request,
                        Done<std::vector<GroupDelivery>> done) {
  Entry& entry = EntryFor(group);
  if (request.reclaim) entry.state.Reclaim(request.member);
  auto records = Fill(group, entry, request);
  AfterChange(group, entry);
  auto wait = std::min(request.wait, options_.max_wait);
  if (!records || !records->empty() || wait.count() <= 0) {
    done(std::move(records));
    return;
  }
  uint64_t id = next_waiting_id_++;
  Waiting waiting{group, request, std::move(done), 0};
  waiting.timer = executor_.PostAfter(wait, [this, id, alive = std::weak_ptr(alive_)] {
    if (alive.expired()) return;
    auto it = waiting_.find(id);
    if (it == waiting_.end()) return;
    auto answer = std::move(it->second.done);
    waiting_.erase(it);
    answer(std::vector<GroupDelivery>{});  // nothing available within the wait
  });
  waiting_.emplace(id, std::move(waiting));
  metrics_.polls_waited.Increment();
}

GroupResult<std::vector<GroupDelivery>> StreamGroups::Fill(const std::string& group, Entry& entry,
                                                           const GroupPollRequest& request) {
  (void)group;
  ConsumerGroup& state = entry.state;
  std::vector<GroupDelivery> out;
  size_t max_records = std::clamp<size_t>(request.max_records, 1, options_.max_records_per_poll);
  auto visibility = request.visibility.count() > 0
                        ? std::min(request.visibility, options_.max_visibility)
                        : options_.visibility_timeout;
  const GroupTime visible_until = clock_() + visibility;
  const Offset tail = shard_.committed_next();
  // Holes the cursor has passed are reported no more.
  entry.skipped_runs.erase(entry.skipped_runs.begin(),
                           entry.skipped_runs.lower_bound(state.position()));
  size_t bytes = 0;
  RecordRead cached;
  const bool has_reserved =
      !request.member.member.empty() && state.NextReserved(request.member.connection);
  if (state.AtInFlightCap() && !has_reserved) {
    metrics_.polls_capped.Increment();
    return out;
  }
  while (out.size() < max_records && bytes < options_.max_bytes_per_poll) {
    // Claims reserved for this connection by a reclaim go first (they are in flight already,
    // so the cap does not hold them back); one at the attempt bound is dead-lettered instead.
    std::optional<Offset> candidate;
    if (!request.member.member.empty()) {
      candidate = state.NextReserved(request.member.connection);
      if (candidate && state.DeadLetterIfAtBound(*candidate)) continue;
    }
    if (!candidate) {
      if (state.AtInFlightCap()) break;
      candidate = state.NextCandidate(tail);
    }
    if (!candidate) break;
    const Offset offset = *candidate;
    const RecordView* view = nullptr;
    auto in_cache = [&]() -> const RecordView* {
      if (cached.records.empty()) return nullptr;
      const Offset first = cached.records.front().offset;
      if (offset < first || offset - first >= cached.records.size()) return nullptr;
      const RecordView& v = cached.records[offset - first];
      return v.offset == offset ? &v : nullptr;
    };
    view = in_cache();
    if (view == nullptr) {
      // Payload budget for the read: what is left of the encoded budget, in raw bytes.
      auto read = shard_.Read(offset, max_records - out.size(),
                              (options_.max_bytes_per_poll - bytes) / 4 * 3);
      if (auto* trimmed = std::get_if<Trimmed>(&read)) {
        // Retention outranks the group: skipped records are settled without delivery.
        const Offset resume = std::max(trimmed->oldest_offset, offset + 1);
        NoteSkipped(entry, state.next_new(), resume);
        if (state.SkipTrimmed(resume)) {
          Persist({CursorWrite(group, entry)}, [](GroupResult<void>) {});
        }
        continue;
      }
      if (auto* error = std::get_if<Error>(&read)) {
        if (!out.empty()) break;
        return Refused(GroupErrc::kStorage, "group poll not served: " + error->message);
      }
      cached = std::get<RecordRead>(std::move(read));
      view = in_cache();
      if (view == nullptr && cached.passed_over > 0) {
        // A generation-start record (replication.md §17) holds no event: settled without
        // delivery, in memory only (a rebuilt tracker settles it again the same way).
        state.Claim(offset, visible_until, request.member);
        (void)state.Ack(offset, tail);
        continue;
      }
      if (view == nullptr) break;  // the log did not return the record asked for
    }
    // Bounded by the encoded answer, not raw payload bytes: base64 grows them by a third.
    size_t encoded = GroupRecordEncodedBytes(view->payload.size(), view->publisher.size());
    if (!out.empty() && bytes + encoded > options_.max_bytes_per_poll) break;
    uint32_t attempts = state.Claim(offset, visible_until, request.member);
    if (attempts > 1) metrics_.redeliveries.Increment();
    auto run = entry.skipped_runs.find(offset);
    out.push_back(GroupDelivery{offset, attempts, view->timestamp_micros,
                                run == entry.skipped_runs.end() ? 0 : run->second, view->payload,
                                view->publisher, cached.owner});
    bytes += encoded;
  }
  return out;
}

void StreamGroups::Ack(const std::string& group, Offset offset, Done<void> done) {
  Entry& entry = EntryFor(group);
  SettleOutcome outcome = entry.state.Ack(offset, shard_.committed_next());
  const bool settled =
      outcome.verdict == SettleVerdict::kAccepted || outcome.verdict == SettleVerdict::kDuplicate;
  // An earlier cursor write failed, so memory is ahead of the log: this ack (a client's retry
  // of the one that failed is answered as a duplicate) writes the cursor again, and is answered
  // ok only once it is durable — never ok over a cursor the log does not hold.
  const bool cursor_behind = entry.durable_position < entry.state.position();
  std::vector<Write> writes;
  if (outcome.verdict == SettleVerdict::kAccepted && outcome.dead_letter_cleared) {
    writes.push_back(Write{&dead_letters_, EncodeDeadLetterDelete(group, offset.value())});
  }
  if (settled && (outcome.cursor_moved || cursor_behind)) {
    if (writes.empty() && entry.cursor_writes_in_flight >= kMaxCursorWritesInFlight) {
      entry.cursor_waiters.push_back(std::move(done));  // answered by the next cursor write
      metrics_.acks_sharing_cursor_write.Increment();
      AfterChange(group, entry);
      return;
    }
    writes.push_back(CursorWrite(group, entry));
  }
  if (outcome.verdict == SettleVerdict::kDuplicate && !writes.empty()) {
    Persist(std::move(writes), std::move(done));
  } else {
    AnswerSettle(outcome, std::move(done), std::move(writes));
  }
  AfterChange(group, entry);
}

void StreamGroups::Nack(const std::string& group, Offset offset, std::chrono::milliseconds delay,
                        uint32_t attempts, Done<void> done) {
  Entry& entry = EntryFor(group);
  delay = std::min(delay, options_.max_visibility);
  SettleOutcome outcome =
      entry.state.Nack(offset, shard_.committed_next(), attempts, clock_(), delay);
  if (outcome.verdict != SettleVerdict::kAccepted) {
    AnswerSettle(outcome, std::move(done), {});
    AfterChange(group, entry);
    return;
  }
  // A hand-back that reached the attempt bound is answered once the dead letter is durable.
  AfterChange(group, entry, std::move(done));
}

void StreamGroups::Extend(const std::string& group, Offset offset, uint32_t attempts,
                          std::chrono::milliseconds extend, Done<uint64_t> done) {
  if (extend.count() <= 0) {
    done(Refused(GroupErrc::kInvalidRequest, "group extend not served: extend_ms is 0"));
    return;
  }
  Entry& entry = EntryFor(group);
  auto granted = std::min(extend, options_.max_visibility);
  SettleOutcome outcome = entry.state.Extend(offset, attempts, clock_() + granted);
  if (outcome.verdict != SettleVerdict::kAccepted) {
    done(Refused(GroupErrc::kStaleClaim, std::string("group extend not served: ") + outcome.reason,
                 true));
    return;
  }
  AfterChange(group, entry);
  done(static_cast<uint64_t>(granted.count()));
}

void StreamGroups::DeadLetter(const std::string& group, Offset offset, Done<void> done) {
  Entry& entry = EntryFor(group);
  SettleOutcome outcome = entry.state.DeadLetterNow(offset, shard_.committed_next());
  if (outcome.verdict != SettleVerdict::kAccepted) {
    AnswerSettle(outcome, std::move(done), {});
    return;
  }
  AfterChange(group, entry, std::move(done));
}

void StreamGroups::ListDeadLetters(const std::string& group, Done<std::vector<Offset>> done) {
  auto it = groups_.find(group);
  done(it == groups_.end() ? std::vector<Offset>{} : it->second->state.DeadLetters());
}

void StreamGroups::Redrive(const std::string& group, Offset offset, Done<void> done) {
  Entry& entry = EntryFor(group);
  auto state = entry.state.DeadLetterStateOf(offset);
  if (!state) {
    done(Refused(GroupErrc::kInvalidRequest, "group redrive not served: offset " +
                                                 to_string(offset) + " is not dead-lettered"));
    return;
  }
  if (*state == DeadLetterState::kRedriven) {
    done({});
    return;
  }
  Persist({Write{&dead_letters_,
                 EncodeDeadLetterPut(group, offset.value(), DeadLetterState::kRedriven)}},
          [this, group, offset, done = std::move(done)](GroupResult<void> written) {
            if (written) {
              auto it = groups_.find(group);
              if (it != groups_.end()) {
                it->second->state.ApplyRedrive(offset);
                AfterChange(group, *it->second);
              }
            }
            done(std::move(written));
          });
}

void StreamGroups::Discard(const std::string& group, Offset offset, Done<void> done) {
  auto it = groups_.find(group);
  if (it == groups_.end() || !it->second->state.DeadLetterStateOf(offset)) {
    done({});  // nothing tracked: already discarded
    return;
  }
  Persist({Write{&dead_letters_, EncodeDeadLetterDelete(group, offset.value())}},
          [this, group, offset, done = std::move(done)](GroupResult<void> written) {
            if (written) {
              auto it = groups_.find(group);
              if (it != groups_.end()) {
                it->second->state.ApplyDiscard(offset);
                AfterChange(group, *it->second);
              }
            }
            done(std::move(written));
          });
}

void StreamGroups::Describe(const std::string& group, Done<GroupDescription> done) {
  GroupDescription d;
  d.tail = shard_.committed_next();
  if (auto it = groups_.find(group); it != groups_.end()) {
    const ConsumerGroup& state = it->second->state;
    d.committed = state.committed();
    d.in_flight = state.in_flight();
    d.owed = state.owed();
    d.dead_letters = state.dead_letter_count();
  }
  done(d);
}

void StreamGroups::Seek(const std::string& group, GroupSeekTarget target, bool if_new,
                        Done<std::pair<Offset, bool>> done) {
  const Offset earliest = shard_.start_offset();
  const Offset latest = shard_.committed_next();
  Offset position = latest;
  switch (target.kind) {
    case GroupSeekTarget::Kind::kEarliest:
      position = std::min(earliest, latest);
      break;
    case GroupSeekTarget::Kind::kLatest:
      break;
    case GroupSeekTarget::Kind::kOffset:
      if (target.offset < earliest || target.offset > latest) {
        done(Refused(GroupErrc::kInvalidRequest,
                     "group seek not served: offset " + to_string(target.offset) + " is outside [" +
                         to_string(earliest) + ", " + to_string(latest) + "]"));
        return;
      }
      position = target.offset;
      break;
  }
  Entry& entry = EntryFor(group);
  if (if_new && entry.state.Exists()) {
    done(std::make_pair(entry.state.position(), false));
    return;
  }
  entry.state.Seek(position);
  AfterChange(group, entry);
  Persist({CursorWrite(group, entry)},
          [position, done = std::move(done)](GroupResult<void> written) {
            if (!written) return done(tl::unexpected(written.error()));
            done(std::make_pair(position, true));
          });
}

void StreamGroups::Delete(const std::string& group, Done<bool> done) {
  auto it = groups_.find(group);
  if (it == groups_.end()) {
    done(false);
    return;
  }
  Entry& entry = *it->second;
  bool existed = entry.state.Exists() || entry.state.dead_letter_count() > 0;
  std::vector<Write> writes;
  if (entry.state.committed()) writes.push_back(Write{&cursors_, EncodeCursorDelete(group)});
  for (const Offset offset : entry.state.DeadLetters()) {
    writes.push_back(Write{&dead_letters_, EncodeDeadLetterDelete(group, offset.value())});
  }
  if (entry.timer != 0) executor_.Cancel(entry.timer);
  metrics_.inflight.Add(-entry.reported_in_flight);
  // Acks waiting for a cursor write: the group's deletion is what becomes durable instead.
  std::vector<Done<void>> waiters = std::move(entry.cursor_waiters);
  groups_.erase(it);
  Persist(std::move(writes), [existed, done = std::move(done),
                              waiters = std::move(waiters)](GroupResult<void> written) {
    for (auto& waiter : waiters) waiter(written);
    if (!written) return done(tl::unexpected(written.error()));
    done(existed);
  });
}

void StreamGroups::Release(const std::string& group,
                           const std::vector<std::pair<Offset, uint32_t>>& claims) {
  auto it = groups_.find(group);
  if (it == groups_.end()) return;
  for (auto [offset, attempts] : claims) it->second->state.Release(offset, attempts);
  AfterChange(group, *it->second);
}

void StreamGroups::OnCommitted() {
  if (!waiting_.empty()) ServeWaiting();
}

void StreamGroups::Stop() {
  stopped_ = true;
  for (auto& [name, entry] : groups_) {
    if (entry->timer != 0) executor_.Cancel(entry->timer);
    entry->timer = 0;
  }
  for (auto& [id, waiting] : waiting_) executor_.Cancel(waiting.timer);
  waiting_.clear();
  alive_.reset();
}

void StreamGroups::Abort(const GroupError& error) {
  auto waiting = std::move(waiting_);
  waiting_.clear();
  for (auto& [id, w] : waiting) {
    executor_.Cancel(w.timer);
    w.done(tl::unexpected<GroupError>(error));
  }
  Stop();
}

void StreamGroups::AfterChange(const std::string& group, Entry& entry,
                               Done<void> dead_letters_done) {
  ProcessDeadLetters(group, entry, std::move(dead_letters_done));
  ArmTimer(group, entry);
  int64_t in_flight = static_cast<int64_t>(entry.state.in_flight());
  metrics_.inflight.Add(in_flight - entry.reported_in_flight);
  entry.reported_in_flight = in_flight;
  if (!waiting_.empty()) ServeWaiting();
}

void StreamGroups::ProcessDeadLetters(const std::string& group, Entry& entry, Done<void> done) {
  std::vector<Offset> work = entry.state.TakeDeadLetterWork();
  if (work.empty()) {
    if (done) done({});
    return;
  }
  std::vector<Write> writes;
  writes.reserve(work.size());
  for (const Offset offset : work) {
    writes.push_back(Write{&dead_letters_, EncodeDeadLetterPut(group, offset.value(),
                                                               DeadLetterState::kDeadLettered)});
  }
  // Listed first, finished after: a crash in between leaves the record listed and owed.
  Persist(std::move(writes), [this, group, work,
                              done = std::move(done)](GroupResult<void> written) {
    auto it = groups_.find(group);
    if (it == groups_.end()) {
      if (done) done(std::move(written));
      return;
    }
    Entry& entry = *it->second;
    bool moved = false;
    for (const Offset offset : work) {
      if (written) {
        moved = entry.state.FinishDeadLettered(offset) || moved;
        metrics_.dead_letters.Increment();
        spdlog::info("group record dead-lettered shard={} group={} offset={}", shard_name_, group,
                     offset);
      } else {
        entry.state.AbortDeadLetter(offset);
      }
    }
    std::vector<Write> cursor;
    if (moved) cursor.push_back(CursorWrite(group, entry));
    AfterChange(group, entry);
    Persist(std::move(cursor), [written, done = std::move(done)](GroupResult<void> cursor_written) {
      if (!done) return;
      if (!written) return done(std::move(written));
      done(std::move(cursor_written));
    });
  });
}

void StreamGroups::ArmTimer(const std::string& group, Entry& entry) {
  if (stopped_) return;
  auto next = entry.state.NextDeadline();
  // A timer armed for a moment no later than the next deadline stays: firing early finds
  // nothing lapsed and arms the next one. When the earliest claim is acknowledged — nearly every
  // acknowledgement of an in-order drain — the deadline moves later, and re-arming cost a cancel
  // and a timer post per acknowledgement (docs/performance.md change 70).
  if (entry.timer != 0 && entry.timer_at && (!next || *entry.timer_at <= *next)) return;
  if (entry.timer != 0) executor_.Cancel(entry.timer);
  entry.timer = 0;
  entry.timer_at.reset();
  if (!next) return;
  auto delay = std::max(GroupClock::duration::zero(), *next - clock_());
  entry.timer_at = next;
  entry.timer = executor_.PostAfter(delay, [this, group, alive = std::weak_ptr(alive_)] {
    if (!alive.expired()) OnTimer(group);
  });
}

void StreamGroups::OnTimer(const std::string& group) {
  auto it = groups_.find(group);
  if (it == groups_.end()) return;
  Entry& entry = *it->second;
  entry.timer = 0;
  entry.timer_at.reset();
  entry.state.Expire(clock_());
  AfterChange(group, entry);
}

void StreamGroups::ServeWaiting() {
  const Offset tail = shard_.committed_next();
  for (auto it = waiting_.begin(); it != waiting_.end();) {
    auto group_it = groups_.find(it->second.group);
    Entry* entry = group_it == groups_.end() ? nullptr : group_it->second.get();
    if (entry == nullptr) entry = &EntryFor(it->second.group);
    // Cheap check first: nothing owed and nothing new → keep waiting.
    if (entry->state.AtInFlightCap() || !entry->state.NextCandidate(tail)) {
      ++it;
      continue;
    }
    auto records = Fill(it->second.group, *entry, it->second.request);
    ProcessDeadLetters(it->second.group, *entry, {});  // reserved claims past the bound
    if (records && records->empty()) {
      ++it;
      continue;
    }
    executor_.Cancel(it->second.timer);
    auto done = std::move(it->second.done);
    std::string group = it->second.group;
    it = waiting_.erase(it);
    done(std::move(records));
    // The claims just made need their lapse timer (no ServeWaiting recursion: done above).
    ArmTimer(group, *entry);
    int64_t in_flight = static_cast<int64_t>(entry->state.in_flight());
    metrics_.inflight.Add(in_flight - entry->reported_in_flight);
    entry->reported_in_flight = in_flight;
  }
}

void StreamGroups::Persist(std::vector<Write> writes, Done<void> done) {
  if (writes.empty()) {
    done({});
    return;
  }
  struct Join {
    size_t left;
    std::optional<GroupError> error;
    Done<void> done;
  };
  auto join = std::make_shared<Join>(Join{writes.size(), std::nullopt, std::move(done)});
  std::weak_ptr<StreamGroups*> alive = alive_;
  Executor* executor = &executor_;
  // `cursor`: the position of a cursor write of `group` (entry `serial`).
  auto complete = [join, alive, executor](std::optional<GroupError> error, std::string group,
                                          std::optional<Offset> cursor, uint64_t serial) {
    // On a durable log's flusher thread when the executor is idle (as StreamShard::Publish).
    executor->RunAloneOrPost(
        [join, alive, error = std::move(error), group = std::move(group), cursor, serial] {
          auto self = alive.lock();
          if (!self) return;
          if (cursor) (*self)->CursorWriteDone(group, serial, *cursor, !error);
          if (error && !join->error) join->error = error;
          if (--join->left != 0) return;
          if (join->error) {
            join->done(tl::unexpected(*join->error));
          } else {
            join->done({});
          }
        });
  };
  for (Write& w : writes) {
    storage::AppendRecord record{std::span<const uint8_t>(w.record), Generation(), 0};
    w.log->Append(std::span<storage::AppendRecord>(&record, 1),
                  [complete, group = w.group, cursor = w.cursor,
                   serial = w.entry_serial](Result<storage::AppendResult> result) {
                    if (result) return complete(std::nullopt, group, cursor, serial);
                    bool fenced = result.error().code == ErrorCode::kUnavailable;
                    complete(Refusal(fenced ? GroupErrc::kUnavailable : GroupErrc::kStorage,
                                     "group state not written: " + result.error().message),
                             group, cursor, serial);
                  });
  }
}

StreamGroups::Write StreamGroups::CursorWrite(const std::string& group, Entry& entry) {
  const Offset position = entry.state.position();
  entry.state.SetCommitted(position);  // written in order: the log's latest value
  if (entry.serial == 0) entry.serial = next_entry_serial_++;
  ++entry.cursor_writes_in_flight;
  metrics_.cursor_writes.Increment();
  return Write{&cursors_, EncodeCursorPut(group, position.value()), group, position, entry.serial};
}

void StreamGroups::CursorWriteDone(const std::string& group, uint64_t serial, Offset position,
                                   bool durable) {
  auto it = groups_.find(group);
  if (it == groups_.end() || it->second->serial != serial) return;  // deleted since
  Entry& entry = *it->second;
  // Writes complete in log order, but a seek may have moved the cursor back since: the latest
  // write that succeeded is what the log holds.
  if (durable) entry.durable_position = position;
  --entry.cursor_writes_in_flight;
  if (entry.cursor_waiters.empty() || entry.cursor_writes_in_flight >= kMaxCursorWritesInFlight)
    return;
  // The acks that came while writes were in flight: one write of the position reached now
  // (after a failed write too, so each waiter gets the outcome of a write made after its ack).
  Persist({CursorWrite(group, entry)},
          [waiters = std::move(entry.cursor_waiters)](const GroupResult<void>& written) {
            for (const auto& waiter : waiters) waiter(written);
          });
  entry.cursor_waiters.clear();
}

void StreamGroups::AnswerSettle(const SettleOutcome& outcome, Done<void> done,
                                std::vector<Write> writes) {
  switch (outcome.verdict) {
    case SettleVerdict::kDuplicate:
      done({});
      return;
    case SettleVerdict::kInvalid:
      done(Refused(GroupErrc::kInvalidRequest,
                   std::string("group request not served: ") + outcome.reason));
      return;
    case SettleVerdict::kStaleClaim:
      done(Refused(GroupErrc::kStaleClaim,
                   std::string("group request not served: ") + outcome.reason, outcome.fatal));
      return;
    case SettleVerdict::kAccepted:
      Persist(std::move(writes), std::move(done));
      return;
  }
}

}  // namespace felix::broker
