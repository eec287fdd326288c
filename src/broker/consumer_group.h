// ConsumerGroup: the in-memory state of one consumer group on one stream shard
// (consumer-groups.md §1–3): the committed cursor, claims with their visibility deadlines,
// owed (due for redelivery) offsets, delayed hand-backs, attempt counts and dead letters.
//
// A pure state machine: no I/O and no clock of its own. Every call that depends on time takes
// `now`; the owner (StreamGroups) reads record payloads, writes the cursor and dead-letter logs
// and arms timers. Durable effects are reported back to the owner:
//   - cursor_moved on an ack / skip: write position() to the cursor log before answering;
//   - TakeDeadLetterWork(): offsets that reached the attempt bound; the owner writes each to the
//     dead-letter log and then calls FinishDeadLettered (or AbortDeadLetter on failure), so a
//     crash in between leaves the record listed *and* owed, never silently finished.
//
// Cursor rule: position() is the first offset not known finished; it advances only over a
// contiguous run of finished offsets and never moves backwards (except by Seek).
//
// Settle rules after a (re)build (§1.2): T0 = the log tail when the tracker was created;
// o < position → duplicate (ok); o ≥ tail → invalid; o ≥ T0 and not yet handed out by this
// tracker → stale_claim; otherwise accepted.
//
// Named members (FEATURE_GROUP_CONSUMER, consumer-groups.md §2 step 1): a claim remembers the
// member (principal + consumer name) and connection it went to. The first poll with `reclaim`
// on a connection newer than the member's last reclaiming one reserves every claim the member
// holds from older connections for that connection; its polls take them first (another
// attempt each; one at the attempt bound is dead-lettered instead). A reserved claim that
// lapses, or is settled, is no longer reserved (lapsed: owed to the whole group). Members are
// memory only, like claims: a rebuild leaves nothing to reclaim.
//
// Threading: not thread-safe; owned by the stream shard's executor.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "broker/finished_window.h"
#include "broker/group_log_record.h"
#include "broker/offset_table.h"
#include "common/strong_types.h"

namespace felix::broker {

using GroupClock = std::chrono::steady_clock;
using GroupTime = GroupClock::time_point;

struct ConsumerGroupLimits {
  uint32_t max_attempts = 5;       // FELIX_GROUP_MAX_ATTEMPTS
  uint64_t max_in_flight = 10000;  // FELIX_GROUP_MAX_IN_FLIGHT
};

// Who a poll is from. `member` empty: an anonymous poll (no `consumer`).
struct GroupMember {
  std::string member;       // principal and consumer name, as one key
  uint64_t connection = 0;  // grows with each client connection: larger = newer
};

enum class SettleVerdict : uint8_t {
  kAccepted,    // applied
  kDuplicate,   // already finished (harmless, answered ok)
  kStaleClaim,  // never handed out by this tracker (retry), or the named claim is gone (fatal)
  kInvalid,     // at/past the tail, or not in the state the request needs
};

struct SettleOutcome {
  SettleVerdict verdict = SettleVerdict::kAccepted;
  bool cursor_moved = false;         // write position() before answering
  bool dead_letter_cleared = false;  // a redriven record finished: delete its dead-letter entry
  bool fatal = false;                // kStaleClaim: the named delivery's claim no longer stands
  const char* reason = "";
};

class ConsumerGroup {
 public:
  // `committed`: the durable cursor (nullopt: the group has none yet, it starts at 0).
  // `tail_at_start`: the shard's committed tail when this tracker is created (T0).
  ConsumerGroup(std::optional<Offset> committed, Offset tail_at_start, ConsumerGroupLimits limits);

  // Replay: a dead-letter entry read from the log (redriven entries become owed again).
  void RestoreDeadLetter(Offset offset, DeadLetterState state);

  // ---- Hand-out (a poll) ----
  bool AtInFlightCap() const { return in_flight() >= limits_.max_in_flight; }
  // The next offset a poll would hand out: the lowest owed one, else the lowest never handed
  // out below `tail` that is not finished. nullopt: nothing available.
  std::optional<Offset> NextCandidate(Offset tail);
  // Claims `offset` (a NextCandidate) until `visible_until` for `holder`; returns its attempt
  // number.
  uint32_t Claim(Offset offset, GroupTime visible_until, const GroupMember& holder = {});
  // A `reclaim` poll: reserves for `who.connection` every claim `who.member` holds from older
  // connections, if this is the first reclaim from a connection newer than the member's last
  // reclaiming one. Returns how many claims were reserved.
  size_t Reclaim(const GroupMember& who);
  // The lowest claim reserved for `connection`, if any.
  std::optional<Offset> NextReserved(uint64_t connection) const;
  // A reserved claim that reached the attempt bound: queued as dead-letter work instead of
  // being delivered again. True if it was at the bound (and is no longer claimed).
  bool DeadLetterIfAtBound(Offset offset);
  // Gives back a claim whose records never reached the consumer (its connection went away):
  // owed again, and the attempt does not count.
  void Release(Offset offset, uint32_t attempts);
  // Retention removed every offset below `oldest`: those are settled without delivery.
  // True if the cursor moved.
  bool SkipTrimmed(Offset oldest);

  // ---- Settling ----
  SettleOutcome Ack(Offset offset, Offset tail);
  // `attempts` 0 = whatever claim stands; `delay` zero = owed now.
  SettleOutcome Nack(Offset offset, Offset tail, uint32_t attempts, GroupTime now,
                     GroupClock::duration delay);
  // Keeps the claim named by (offset, attempts) visible until `visible_until`.
  SettleOutcome Extend(Offset offset, uint32_t attempts, GroupTime visible_until);
  // The consumer gives up on `offset` now: queued as dead-letter work.
  SettleOutcome DeadLetterNow(Offset offset, Offset tail);

  // Lapsed claims and due delayed hand-backs become owed (or dead-letter work). Returns true
  // if anything changed.
  bool Expire(GroupTime now);
  // The earliest claim deadline or delayed hand-back, if any.
  std::optional<GroupTime> NextDeadline() const;

  // ---- Dead letters ----
  // Offsets that reached the attempt bound (or were given up explicitly) since the last call.
  std::vector<Offset> TakeDeadLetterWork();
  // The dead-letter entry for `offset` is durable: finish it. True if the cursor moved.
  bool FinishDeadLettered(Offset offset);
  // Its write failed: owed again.
  void AbortDeadLetter(Offset offset);
  std::vector<Offset> DeadLetters() const;  // lowest first (both states)
  std::optional<DeadLetterState> DeadLetterStateOf(Offset offset) const;
  // After the "redriven" entry is durable: owed again with its attempt count reset.
  void ApplyRedrive(Offset offset);
  // After the entry's delete is durable: no longer tracked (nor owed).
  void ApplyDiscard(Offset offset);

  // ---- Admin ----
  // Moves the cursor to `position` and voids every claim, owed offset and delayed hand-back.
  void Seek(Offset position);
  // Has a cursor or has handed something out.
  bool Exists() const { return committed_.has_value() || touched_; }

  // ---- Inspection ----
  Offset position() const { return position_; }
  // The lowest offset this tracker has not handed out yet (new records start here).
  Offset next_new() const { return next_new_; }
  std::optional<Offset> committed() const { return committed_; }
  uint64_t in_flight() const { return claims_.size() + delayed_.size(); }
  uint64_t owed() const { return owed_.size(); }
  uint64_t dead_letter_count() const { return dead_letters_.size(); }
  // Records the committed cursor value once it is durable.
  void SetCommitted(Offset position) { committed_ = position; }
  uint32_t AttemptsOf(Offset offset) const;
  bool IsClaimed(Offset offset) const { return claims_.contains(offset); }

 private:
  struct ClaimState {
    uint32_t attempts = 0;
    GroupTime visible_until;
    GroupMember holder;
  };
  // Settle-rule check shared by ack/nack/dead-letter; nullopt = go on.
  std::optional<SettleOutcome> CheckSettle(Offset offset, Offset tail) const;
  bool HandedOutByUs(Offset offset) const;
  void DropClaim(Offset offset);
  // The claim deadlines: a min-heap of (visible_until, offset) whose entries go stale when
  // their claim is dropped or extended (an erase from the middle of a heap is not cheap, a
  // stale entry is). Invariant: the top, if any, is live — every call that can make it stale
  // ends with PruneDeadlines — so NextDeadline and Expire read it as it stands.
  bool DeadlineLive(const std::pair<GroupTime, Offset>& entry) const;
  void PushDeadline(GroupTime visible_until, Offset offset);
  void PruneDeadlines();
  void MakeOwed(Offset offset);
  // Marks `offset` finished and advances the cursor; true if it moved.
  bool Finish(Offset offset);
  bool Advance();

  ConsumerGroupLimits limits_;
  std::optional<Offset> committed_;  // durable value, as last written
  Offset position_;                  // first offset not known finished
  Offset next_new_;                  // lowest offset this tracker has not handed out
  Offset tail_at_start_;             // T0
  bool touched_ = false;
  FinishedWindow finished_;  // finished offsets >= position_
  OffsetTable<ClaimState> claims_;
  // At most 2 × claims + 64 entries: a push beyond that rebuilds it from the live claims.
  std::vector<std::pair<GroupTime, Offset>> claim_deadlines_;
  std::map<Offset, GroupTime> delayed_;  // nacked with a delay: owed at that time
  std::set<Offset> owed_;
  OffsetTable<uint32_t> attempts_;  // deliveries so far, per unsettled offset
  std::map<Offset, DeadLetterState> dead_letters_;
  std::set<Offset> dead_letter_pending_;  // being written to the dead-letter log
  std::vector<Offset> dead_letter_work_;
  std::map<Offset, uint64_t> reserved_;           // claimed offset → reclaiming connection
  std::map<std::string, uint64_t> last_reclaim_;  // member → its last reclaiming connection
};

}  // namespace felix::broker
