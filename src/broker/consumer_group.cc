#include "broker/consumer_group.h"

#include <algorithm>
#include <functional>

namespace felix::broker {
namespace {

SettleOutcome Verdict(SettleVerdict verdict, const char* reason, bool fatal = false) {
  SettleOutcome out;
  out.verdict = verdict;
  out.reason = reason;
  out.fatal = fatal;
  return out;
}

}  // namespace

ConsumerGroup::ConsumerGroup(std::optional<Offset> committed, Offset tail_at_start,
                             ConsumerGroupLimits limits)
    : limits_(limits),
      committed_(committed),
      position_(committed.value_or(Offset(0))),
      next_new_(position_),
      tail_at_start_(tail_at_start) {
  finished_.Reset(position_);
}

void ConsumerGroup::RestoreDeadLetter(Offset offset, DeadLetterState state) {
  dead_letters_[offset] = state;
  // A redriven entry is owed until it is finished again. A plain entry at or above the cursor
  // (a crash between the dead-letter write and the cursor write) is listed and still owed as
  // an ordinary record.
  if (state == DeadLetterState::kRedriven) owed_.insert(offset);
}

std::optional<Offset> ConsumerGroup::NextCandidate(Offset tail) {
  if (!owed_.empty()) return *owed_.begin();
  while (next_new_ < tail) {
    const Offset n = next_new_;
    if (n < position_ || finished_.Contains(n) || claims_.contains(n) || delayed_.count(n) ||
        dead_letter_pending_.count(n)) {
      ++next_new_;
      continue;
    }
    return n;
  }
  return std::nullopt;
}

uint32_t ConsumerGroup::Claim(Offset offset, GroupTime visible_until, const GroupMember& holder) {
  owed_.erase(offset);
  // Only the record at the scan position moves it. An owed record above it exists after a
  // rebuild (a nack below T0 of a record the previous tracker handed out): jumping past it
  // would skip the unfinished records in between for good (they would never be handed out,
  // and the cursor would stall below them).
  if (offset == next_new_) ++next_new_;
  uint32_t attempts = ++attempts_.FindOrInsert(offset);
  DropClaim(offset);
  claims_.Insert(offset, ClaimState{attempts, visible_until, holder});
  PushDeadline(visible_until, offset);
  touched_ = true;
  return attempts;
}

size_t ConsumerGroup::Reclaim(const GroupMember& who) {
  if (who.member.empty()) return 0;
  uint64_t& last = last_reclaim_[who.member];
  // Only the first reclaim per connection reserves, and never from a connection older than
  // the last one that reclaimed (it would take claims back from its successor).
  if (who.connection <= last) return 0;
  last = who.connection;
  size_t reserved = 0;
  claims_.ForEach([&](Offset offset, const ClaimState& claim) {
    if (claim.holder.member == who.member && claim.holder.connection < who.connection) {
      reserved_[offset] = who.connection;
      ++reserved;
    }
  });
  return reserved;
}

std::optional<Offset> ConsumerGroup::NextReserved(uint64_t connection) const {
  for (const auto& [offset, holder] : reserved_) {
    if (holder == connection) return offset;
  }
  return std::nullopt;
}

bool ConsumerGroup::DeadLetterIfAtBound(Offset offset) {
  if (AttemptsOf(offset) < limits_.max_attempts) return false;
  DropClaim(offset);
  dead_letter_pending_.insert(offset);
  dead_letter_work_.push_back(offset);
  return true;
}

void ConsumerGroup::Release(Offset offset, uint32_t attempts) {
  const ClaimState* claim = claims_.Find(offset);
  if (claim == nullptr || claim->attempts != attempts) return;
  DropClaim(offset);
  uint32_t* count = attempts_.Find(offset);
  if (count != nullptr && *count > 0) --*count;
  owed_.insert(offset);
}

bool ConsumerGroup::SkipTrimmed(Offset oldest) {
  auto below = [oldest](Offset o) { return o < oldest; };
  claims_.EraseIf([&](Offset offset, const ClaimState&) { return below(offset); });
  std::erase_if(reserved_, [&](const auto& r) { return below(r.first); });
  PruneDeadlines();
  std::erase_if(owed_, below);  // a redriven entry stays listed, but nothing is left to deliver
  std::erase_if(delayed_, [&](const auto& d) { return below(d.first); });
  attempts_.EraseIf([&](Offset offset, uint32_t) { return below(offset); });
  finished_.DropBelow(oldest);
  next_new_ = std::max(next_new_, oldest);
  if (position_ >= oldest) return false;
  position_ = oldest;
  Advance();
  return true;
}

bool ConsumerGroup::HandedOutByUs(Offset offset) const {
  return offset < std::max(tail_at_start_, next_new_) || owed_.count(offset) != 0 ||
         claims_.contains(offset) || delayed_.count(offset) != 0;
}

std::optional<SettleOutcome> ConsumerGroup::CheckSettle(Offset offset, Offset tail) const {
  if (offset >= tail) {
    return Verdict(SettleVerdict::kInvalid, "offset is at or past the log tail");
  }
  auto dl = dead_letters_.find(offset);
  bool redriven = dl != dead_letters_.end() && dl->second == DeadLetterState::kRedriven;
  if (!redriven && (offset < position_ || finished_.Contains(offset) ||
                    dead_letter_pending_.count(offset) != 0)) {
    return Verdict(SettleVerdict::kDuplicate, "already finished");
  }
  if (!redriven && !HandedOutByUs(offset)) {
    return Verdict(SettleVerdict::kStaleClaim, "offset was not handed out by this group yet");
  }
  return std::nullopt;
}

SettleOutcome ConsumerGroup::Ack(Offset offset, Offset tail) {
  if (auto refused = CheckSettle(offset, tail)) return *refused;
  SettleOutcome out;
  auto dl = dead_letters_.find(offset);
  if (dl != dead_letters_.end() && dl->second == DeadLetterState::kRedriven) {
    dead_letters_.erase(dl);
    out.dead_letter_cleared = true;
  }
  DropClaim(offset);
  owed_.erase(offset);
  delayed_.erase(offset);
  attempts_.Erase(offset);
  if (offset >= position_ && !finished_.Contains(offset)) out.cursor_moved = Finish(offset);
  return out;
}

SettleOutcome ConsumerGroup::Nack(Offset offset, Offset tail, uint32_t attempts, GroupTime now,
                                  GroupClock::duration delay) {
  if (auto refused = CheckSettle(offset, tail)) return *refused;
  const ClaimState* claim = claims_.Find(offset);
  if (attempts != 0 && (claim == nullptr || claim->attempts != attempts)) {
    return Verdict(SettleVerdict::kStaleClaim, "that delivery's claim no longer stands", true);
  }
  if (claim == nullptr && (owed_.count(offset) != 0 || delayed_.count(offset) != 0)) {
    return SettleOutcome{};  // already handed back
  }
  DropClaim(offset);
  if (delay > GroupClock::duration::zero()) {
    delayed_[offset] = now + delay;
  } else {
    MakeOwed(offset);
  }
  return SettleOutcome{};
}

SettleOutcome ConsumerGroup::Extend(Offset offset, uint32_t attempts, GroupTime visible_until) {
  ClaimState* claim = claims_.Find(offset);
  if (claim == nullptr || claim->attempts != attempts) {
    return Verdict(SettleVerdict::kStaleClaim, "that delivery's claim no longer stands", true);
  }
  claim->visible_until = visible_until;  // the entry of the old deadline goes stale
  PushDeadline(visible_until, offset);
  PruneDeadlines();
  return SettleOutcome{};
}

SettleOutcome ConsumerGroup::DeadLetterNow(Offset offset, Offset tail) {
  if (auto refused = CheckSettle(offset, tail)) {
    if (refused->verdict == SettleVerdict::kDuplicate) {
      return Verdict(SettleVerdict::kInvalid, "the record is already finished");
    }
    return *refused;
  }
  DropClaim(offset);
  owed_.erase(offset);
  delayed_.erase(offset);
  dead_letter_pending_.insert(offset);
  dead_letter_work_.push_back(offset);
  return SettleOutcome{};
}

bool ConsumerGroup::Expire(GroupTime now) {
  bool changed = false;
  constexpr std::greater<> kEarliestFirst;
  while (!claim_deadlines_.empty() && claim_deadlines_.front().first <= now) {
    const auto entry = claim_deadlines_.front();
    std::pop_heap(claim_deadlines_.begin(), claim_deadlines_.end(), kEarliestFirst);
    claim_deadlines_.pop_back();
    if (!DeadlineLive(entry)) continue;  // a duplicate of one that lapsed a moment ago
    const Offset offset = entry.second;
    DropClaim(offset);
    MakeOwed(offset);
    changed = true;
  }
  for (auto it = delayed_.begin(); it != delayed_.end();) {
    if (it->second <= now) {
      Offset offset = it->first;
      it = delayed_.erase(it);
      MakeOwed(offset);
      changed = true;
    } else {
      ++it;
    }
  }
  return changed;
}

std::optional<GroupTime> ConsumerGroup::NextDeadline() const {
  std::optional<GroupTime> next;
  if (!claim_deadlines_.empty()) next = claim_deadlines_.front().first;
  for (const auto& [offset, due] : delayed_) {
    if (!next || due < *next) next = due;
  }
  return next;
}

std::vector<Offset> ConsumerGroup::TakeDeadLetterWork() {
  return std::exchange(dead_letter_work_, {});
}

bool ConsumerGroup::FinishDeadLettered(Offset offset) {
  dead_letter_pending_.erase(offset);
  dead_letters_[offset] = DeadLetterState::kDeadLettered;
  attempts_.Erase(offset);
  if (offset >= position_ && !finished_.Contains(offset)) return Finish(offset);
  return false;
}

void ConsumerGroup::AbortDeadLetter(Offset offset) {
  if (dead_letter_pending_.erase(offset) != 0) owed_.insert(offset);
}

std::vector<Offset> ConsumerGroup::DeadLetters() const {
  std::vector<Offset> out;
  out.reserve(dead_letters_.size());
  for (const auto& [offset, state] : dead_letters_) out.push_back(offset);
  return out;
}

std::optional<DeadLetterState> ConsumerGroup::DeadLetterStateOf(Offset offset) const {
  auto it = dead_letters_.find(offset);
  if (it == dead_letters_.end()) return std::nullopt;
  return it->second;
}

void ConsumerGroup::ApplyRedrive(Offset offset) {
  dead_letters_[offset] = DeadLetterState::kRedriven;
  attempts_.Erase(offset);
  if (!claims_.contains(offset) && delayed_.count(offset) == 0) owed_.insert(offset);
}

void ConsumerGroup::ApplyDiscard(Offset offset) {
  dead_letters_.erase(offset);
  // A finished (or redriven) record is no longer owed; one still below no cursor stays an
  // ordinary record.
  if (offset < position_ || finished_.Contains(offset)) {
    DropClaim(offset);
    owed_.erase(offset);
    delayed_.erase(offset);
    attempts_.Erase(offset);
  }
}

void ConsumerGroup::Seek(Offset position) {
  claims_.clear();
  reserved_.clear();
  claim_deadlines_.clear();
  delayed_.clear();
  owed_.clear();
  attempts_.clear();
  finished_.Reset(position);
  position_ = position;
  next_new_ = position;
  tail_at_start_ = position;
  touched_ = true;
  for (const auto& [offset, state] : dead_letters_) {
    if (state == DeadLetterState::kRedriven) owed_.insert(offset);
  }
}

uint32_t ConsumerGroup::AttemptsOf(Offset offset) const {
  const uint32_t* count = attempts_.Find(offset);
  return count == nullptr ? 0 : *count;
}

void ConsumerGroup::DropClaim(Offset offset) {
  if (!claims_.Erase(offset)) return;
  if (!reserved_.empty()) reserved_.erase(offset);  // settled or lapsed: no longer reserved
  PruneDeadlines();
}

bool ConsumerGroup::DeadlineLive(const std::pair<GroupTime, Offset>& entry) const {
  const ClaimState* claim = claims_.Find(entry.second);
  return claim != nullptr && claim->visible_until == entry.first;
}

void ConsumerGroup::PushDeadline(GroupTime visible_until, Offset offset) {
  constexpr std::greater<> kEarliestFirst;
  claim_deadlines_.emplace_back(visible_until, offset);
  std::push_heap(claim_deadlines_.begin(), claim_deadlines_.end(), kEarliestFirst);
  if (claim_deadlines_.size() <= 2 * claims_.size() + 64) return;
  // Mostly stale: rebuilt from the live claims, so the heap stays within 2 × claims + 64
  // entries whatever the pattern of acks (amortised O(1) per push).
  std::vector<std::pair<GroupTime, Offset>> live;
  live.reserve(2 * claims_.size() + 64);
  claims_.ForEach(
      [&](Offset at, const ClaimState& claim) { live.emplace_back(claim.visible_until, at); });
  std::make_heap(live.begin(), live.end(), kEarliestFirst);
  claim_deadlines_ = std::move(live);
}

void ConsumerGroup::PruneDeadlines() {
  constexpr std::greater<> kEarliestFirst;
  while (!claim_deadlines_.empty() && !DeadlineLive(claim_deadlines_.front())) {
    std::pop_heap(claim_deadlines_.begin(), claim_deadlines_.end(), kEarliestFirst);
    claim_deadlines_.pop_back();
  }
}

void ConsumerGroup::MakeOwed(Offset offset) {
  if (AttemptsOf(offset) >= limits_.max_attempts) {
    dead_letter_pending_.insert(offset);
    dead_letter_work_.push_back(offset);
    return;
  }
  owed_.insert(offset);
}

bool ConsumerGroup::Finish(Offset offset) {
  finished_.Mark(offset);
  return Advance();
}

bool ConsumerGroup::Advance() {
  const Offset before = position_;
  position_ = finished_.AdvanceFrom(position_);
  next_new_ = std::max(next_new_, position_);
  return position_ != before;
}

}  // namespace felix::broker
