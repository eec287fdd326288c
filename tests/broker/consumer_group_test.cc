// ConsumerGroup state machine with an explicit clock: hand-out order, the contiguous cursor,
// visibility lapses, the attempt bound, dead letters and redrive, settle rules after a rebuild.
#include "broker/consumer_group.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>
#include <set>

namespace felix::broker {
namespace {

using std::chrono::milliseconds;

class ConsumerGroupTest : public ::testing::Test {
 protected:
  GroupTime At(int64_t ms) const { return t0_ + milliseconds(ms); }
  // Hands out up to `n` records (the poll loop of StreamGroups, without payloads).
  std::vector<std::pair<Offset, uint32_t>> Poll(ConsumerGroup& g, size_t n, Offset tail,
                                                GroupTime now, milliseconds visibility) {
    std::vector<std::pair<Offset, uint32_t>> out;
    while (out.size() < n && !g.AtInFlightCap()) {
      auto next = g.NextCandidate(tail);
      if (!next) break;
      out.emplace_back(*next, g.Claim(*next, now + visibility));
    }
    return out;
  }
  GroupTime t0_ = GroupClock::now();
};

TEST_F(ConsumerGroupTest, NewGroupHandsOutInOffsetOrderFromZero) {
  ConsumerGroup g(std::nullopt, Offset(0), {});
  EXPECT_FALSE(g.Exists());
  auto got = Poll(g, 3, Offset(5), At(0), milliseconds(1000));
  ASSERT_EQ(got.size(), 3u);
  EXPECT_EQ(got[0], std::make_pair(Offset(0), uint32_t{1}));
  EXPECT_EQ(got[2], std::make_pair(Offset(2), uint32_t{1}));
  EXPECT_TRUE(g.Exists());
  EXPECT_EQ(g.in_flight(), 3u);
  // Claimed records are not handed out again while the claims stand.
  auto more = Poll(g, 10, Offset(5), At(1), milliseconds(1000));
  ASSERT_EQ(more.size(), 2u);
  EXPECT_EQ(more[0].first, Offset(3));
  EXPECT_TRUE(Poll(g, 10, Offset(5), At(2), milliseconds(1000)).empty());
}

TEST_F(ConsumerGroupTest, CursorAdvancesOnlyOverContiguousFinishedOffsets) {
  ConsumerGroup g(std::nullopt, Offset(0), {});
  Poll(g, 4, Offset(4), At(0), milliseconds(1000));
  auto ack1 = g.Ack(Offset(1), Offset(4));
  EXPECT_EQ(ack1.verdict, SettleVerdict::kAccepted);
  EXPECT_FALSE(ack1.cursor_moved);
  EXPECT_EQ(g.position(), Offset(0));  // 0 is still outstanding
  auto ack3 = g.Ack(Offset(3), Offset(4));
  EXPECT_FALSE(ack3.cursor_moved);
  EXPECT_EQ(g.position(), Offset(0));
  auto ack0 = g.Ack(Offset(0), Offset(4));
  EXPECT_TRUE(ack0.cursor_moved);
  EXPECT_EQ(g.position(), Offset(2));  // 0 and 1 finished; 2 is not
  EXPECT_TRUE(g.Ack(Offset(2), Offset(4)).cursor_moved);
  EXPECT_EQ(g.position(), Offset(4));
  // A late or duplicate ack never moves the cursor back and is harmless.
  auto again = g.Ack(Offset(1), Offset(4));
  EXPECT_EQ(again.verdict, SettleVerdict::kDuplicate);
  EXPECT_EQ(g.position(), Offset(4));
  // At or past the tail: invalid.
  EXPECT_EQ(g.Ack(Offset(4), Offset(4)).verdict, SettleVerdict::kInvalid);
}

TEST_F(ConsumerGroupTest, LapsedClaimIsRedeliveredWithTheNextAttempt) {
  ConsumerGroup g(std::nullopt, Offset(0), {});
  auto first = Poll(g, 1, Offset(2), At(0), milliseconds(100));
  ASSERT_EQ(first.size(), 1u);
  ASSERT_TRUE(g.NextDeadline());
  EXPECT_EQ(*g.NextDeadline(), At(100));
  EXPECT_FALSE(g.Expire(At(99)));
  // Before the lapse the next poll gets the next new record, not the claimed one.
  auto second = Poll(g, 1, Offset(2), At(50), milliseconds(100));
  ASSERT_EQ(second.size(), 1u);
  EXPECT_EQ(second[0].first, Offset(1));
  EXPECT_TRUE(g.Expire(At(100)));
  EXPECT_EQ(g.owed(), 1u);
  auto again = Poll(g, 5, Offset(2), At(101), milliseconds(100));
  ASSERT_EQ(again.size(), 1u);
  EXPECT_EQ(again[0], std::make_pair(Offset(0), uint32_t{2}));
}

TEST_F(ConsumerGroupTest, OwedRecordsGoOutBeforeNewOnes) {
  ConsumerGroup g(std::nullopt, Offset(0), {});
  Poll(g, 2, Offset(10), At(0), milliseconds(1000));
  EXPECT_EQ(g.Nack(Offset(1), Offset(10), 0, At(1), {}).verdict, SettleVerdict::kAccepted);
  auto got = Poll(g, 2, Offset(10), At(2), milliseconds(1000));
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0], std::make_pair(Offset(1), uint32_t{2}));
  EXPECT_EQ(got[1], std::make_pair(Offset(2), uint32_t{1}));
}

TEST_F(ConsumerGroupTest, DelayedNackCountsInFlightUntilDue) {
  ConsumerGroup g(std::nullopt, Offset(0), {});
  Poll(g, 1, Offset(1), At(0), milliseconds(1000));
  g.Nack(Offset(0), Offset(1), 0, At(10), milliseconds(500));
  EXPECT_EQ(g.in_flight(), 1u);
  EXPECT_TRUE(Poll(g, 1, Offset(1), At(20), milliseconds(1000)).empty());
  EXPECT_EQ(*g.NextDeadline(), At(510));
  EXPECT_TRUE(g.Expire(At(510)));
  auto got = Poll(g, 1, Offset(1), At(511), milliseconds(1000));
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].second, 2u);
}

TEST_F(ConsumerGroupTest, NackNamingAGoneDeliveryIsAFatalStaleClaim) {
  ConsumerGroup g(std::nullopt, Offset(0), {});
  Poll(g, 1, Offset(1), At(0), milliseconds(100));
  g.Expire(At(100));
  Poll(g, 1, Offset(1), At(101), milliseconds(100));  // attempt 2 now holds it
  auto stale = g.Nack(Offset(0), Offset(1), 1, At(102), {});
  EXPECT_EQ(stale.verdict, SettleVerdict::kStaleClaim);
  EXPECT_TRUE(stale.fatal);
  EXPECT_EQ(g.Nack(Offset(0), Offset(1), 2, At(102), {}).verdict, SettleVerdict::kAccepted);
}

TEST_F(ConsumerGroupTest, AttemptBoundDeadLettersThenFinishes) {
  ConsumerGroup g(std::nullopt, Offset(0), {.max_attempts = 3, .max_in_flight = 100});
  for (uint32_t attempt = 1; attempt <= 3; ++attempt) {
    auto got = Poll(g, 1, Offset(2), At(attempt), milliseconds(1000));
    ASSERT_EQ(got.size(), 1u);
    EXPECT_EQ(got[0], std::make_pair(Offset(0), attempt));
    g.Nack(Offset(0), Offset(2), 0, At(attempt), {});
    if (attempt < 3) {
      EXPECT_TRUE(g.TakeDeadLetterWork().empty());
    }
  }
  auto work = g.TakeDeadLetterWork();
  ASSERT_EQ(work, std::vector<Offset>{Offset(0)});
  // Until the dead-letter entry is durable the record is neither owed nor finished.
  EXPECT_EQ(g.position(), Offset(0));
  auto next = Poll(g, 5, Offset(2), At(10), milliseconds(1000));
  ASSERT_EQ(next.size(), 1u);
  EXPECT_EQ(next[0].first, Offset(1));
  g.Ack(Offset(1), Offset(2));
  EXPECT_EQ(g.position(), Offset(0));
  EXPECT_TRUE(g.FinishDeadLettered(Offset(0)));
  EXPECT_EQ(g.position(), Offset(2));  // the poison record no longer stalls the queue
  EXPECT_EQ(g.DeadLetters(), std::vector<Offset>{Offset(0)});
}

TEST_F(ConsumerGroupTest, LapsesAlsoCountTowardsTheAttemptBound) {
  ConsumerGroup g(std::nullopt, Offset(0), {.max_attempts = 2, .max_in_flight = 100});
  Poll(g, 1, Offset(1), At(0), milliseconds(10));
  g.Expire(At(10));
  Poll(g, 1, Offset(1), At(11), milliseconds(10));
  g.Expire(At(21));
  EXPECT_EQ(g.TakeDeadLetterWork(), std::vector<Offset>{Offset(0)});
}

TEST_F(ConsumerGroupTest, FailedDeadLetterWriteLeavesTheRecordOwed) {
  ConsumerGroup g(std::nullopt, Offset(0), {.max_attempts = 1, .max_in_flight = 100});
  Poll(g, 1, Offset(1), At(0), milliseconds(10));
  g.Nack(Offset(0), Offset(1), 0, At(1), {});
  ASSERT_EQ(g.TakeDeadLetterWork(), std::vector<Offset>{Offset(0)});
  g.AbortDeadLetter(Offset(0));
  EXPECT_EQ(g.owed(), 1u);
  EXPECT_EQ(g.position(), Offset(0));
}

TEST_F(ConsumerGroupTest, RedriveMakesTheOffsetOwedWithAttemptsReset) {
  ConsumerGroup g(std::nullopt, Offset(0), {.max_attempts = 1, .max_in_flight = 100});
  Poll(g, 1, Offset(3), At(0), milliseconds(10));
  g.Nack(Offset(0), Offset(3), 0, At(1), {});
  g.TakeDeadLetterWork();
  g.FinishDeadLettered(Offset(0));
  EXPECT_EQ(g.position(), Offset(1));
  ASSERT_EQ(g.DeadLetterStateOf(Offset(0)), DeadLetterState::kDeadLettered);
  g.ApplyRedrive(Offset(0));
  EXPECT_EQ(g.DeadLetterStateOf(Offset(0)), DeadLetterState::kRedriven);
  auto got = Poll(g, 1, Offset(3), At(2), milliseconds(10));
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0], std::make_pair(Offset(0), uint32_t{1}));  // owed first, attempt reset
  EXPECT_EQ(g.position(), Offset(1));                         // the cursor never moves back
  auto ack = g.Ack(Offset(0), Offset(3));
  EXPECT_EQ(ack.verdict, SettleVerdict::kAccepted);
  EXPECT_TRUE(ack.dead_letter_cleared);
  EXPECT_TRUE(g.DeadLetters().empty());
}

TEST_F(ConsumerGroupTest, RebuiltTrackerSettleRules) {
  // Restarted with cursor 5 and tail 8 (T0 = 8); the tail has since grown to 10.
  ConsumerGroup g(Offset(5), Offset(8), {});
  EXPECT_EQ(g.Ack(Offset(3), Offset(10)).verdict, SettleVerdict::kDuplicate);  // below the cursor
  EXPECT_EQ(g.Ack(Offset(6), Offset(10)).verdict, SettleVerdict::kAccepted);   // below T0: accepted
  // After T0, not handed out.
  EXPECT_EQ(g.Ack(Offset(8), Offset(10)).verdict, SettleVerdict::kStaleClaim);
  EXPECT_FALSE(g.Ack(Offset(8), Offset(10)).fatal);
  EXPECT_EQ(g.Ack(Offset(10), Offset(10)).verdict, SettleVerdict::kInvalid);  // at the tail
  // The accepted ack above the cursor is skipped when handing out.
  auto got = Poll(g, 10, Offset(10), At(0), milliseconds(10));
  std::vector<Offset> offsets;
  for (auto& [o, a] : got) offsets.push_back(o);
  EXPECT_EQ(offsets, (std::vector<Offset>{Offset(5), Offset(7), Offset(8), Offset(9)}));
  EXPECT_EQ(g.Ack(Offset(8), Offset(10)).verdict, SettleVerdict::kAccepted);  // handed out now
}

TEST_F(ConsumerGroupTest, AnOwedRecordAboveTheCursorAfterARebuildSkipsNothingBelowIt) {
  // Found by fault-run seed 43: restarted with cursor 5 (T0 = 12), the previous tracker's
  // deliveries 8..11 are settled — 8 and 10 acked, 9 nacked (owed) — before anything is polled.
  // The owed 9 goes out first; 5, 6 and 7 must still follow, or the cursor stalls at 5.
  ConsumerGroup g(Offset(5), Offset(12), {});
  EXPECT_EQ(g.Ack(Offset(8), Offset(12)).verdict, SettleVerdict::kAccepted);
  EXPECT_EQ(g.Nack(Offset(9), Offset(12), 0, At(0), milliseconds(0)).verdict,
            SettleVerdict::kAccepted);
  EXPECT_EQ(g.Ack(Offset(10), Offset(12)).verdict, SettleVerdict::kAccepted);
  auto got = Poll(g, 10, Offset(12), At(0), milliseconds(1000));
  std::vector<Offset> offsets;
  for (auto& [o, a] : got) offsets.push_back(o);
  EXPECT_EQ(offsets, (std::vector<Offset>{Offset(9), Offset(5), Offset(6), Offset(7), Offset(11)}));
  for (Offset o : offsets) EXPECT_EQ(g.Ack(o, Offset(12)).verdict, SettleVerdict::kAccepted) << o;
  EXPECT_EQ(g.position(), Offset(12));
  EXPECT_EQ(g.in_flight(), 0u);
}

TEST_F(ConsumerGroupTest, RestoredRedrivenEntryIsOwedAgain) {
  ConsumerGroup g(Offset(4), Offset(6), {});
  g.RestoreDeadLetter(Offset(1), DeadLetterState::kDeadLettered);
  g.RestoreDeadLetter(Offset(2), DeadLetterState::kRedriven);
  EXPECT_EQ(g.DeadLetters(), (std::vector<Offset>{Offset(1), Offset(2)}));
  auto got = Poll(g, 2, Offset(6), At(0), milliseconds(10));
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0].first, Offset(2));
  EXPECT_EQ(got[1].first, Offset(4));
}

TEST_F(ConsumerGroupTest, InFlightCapStopsHandOut) {
  ConsumerGroup g(std::nullopt, Offset(0), {.max_attempts = 5, .max_in_flight = 2});
  EXPECT_EQ(Poll(g, 10, Offset(10), At(0), milliseconds(10)).size(), 2u);
  EXPECT_TRUE(g.AtInFlightCap());
  g.Ack(Offset(0), Offset(10));
  EXPECT_EQ(Poll(g, 10, Offset(10), At(1), milliseconds(10)).size(), 1u);
}

TEST_F(ConsumerGroupTest, ReleaseDoesNotCountTheAttempt) {
  ConsumerGroup g(std::nullopt, Offset(0), {});
  auto got = Poll(g, 1, Offset(1), At(0), milliseconds(10));
  g.Release(Offset(0), got[0].second);
  auto again = Poll(g, 1, Offset(1), At(1), milliseconds(10));
  ASSERT_EQ(again.size(), 1u);
  EXPECT_EQ(again[0].second, 1u);
}

TEST_F(ConsumerGroupTest, SeekVoidsClaimsAndMovesTheCursor) {
  ConsumerGroup g(std::nullopt, Offset(0), {});
  Poll(g, 3, Offset(10), At(0), milliseconds(10));
  g.Seek(Offset(7));
  EXPECT_EQ(g.in_flight(), 0u);
  EXPECT_EQ(g.position(), Offset(7));
  EXPECT_EQ(g.Ack(Offset(1), Offset(10)).verdict, SettleVerdict::kDuplicate);
  EXPECT_EQ(g.Ack(Offset(7), Offset(10)).verdict, SettleVerdict::kStaleClaim);
  auto got = Poll(g, 1, Offset(10), At(1), milliseconds(10));
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].first, Offset(7));
}

TEST_F(ConsumerGroupTest, TrimmedRecordsAreSkipped) {
  ConsumerGroup g(std::nullopt, Offset(0), {});
  EXPECT_TRUE(g.SkipTrimmed(Offset(5)));
  EXPECT_EQ(g.position(), Offset(5));
  EXPECT_EQ(g.NextCandidate(Offset(8)), Offset(5));
}

TEST_F(ConsumerGroupTest, TrimmedRedrivenRecordIsNoLongerOwed) {
  ConsumerGroup g(Offset(6), Offset(8), {});
  g.RestoreDeadLetter(Offset(2), DeadLetterState::kRedriven);
  EXPECT_EQ(g.NextCandidate(Offset(8)), Offset(2));
  g.SkipTrimmed(Offset(4));  // retention removed offset 2: nothing left to deliver
  EXPECT_EQ(g.NextCandidate(Offset(8)), Offset(6));
  EXPECT_EQ(g.DeadLetters(), std::vector<Offset>{Offset(2)});
}

// Named members (consumer-groups.md §2 step 1): a newer connection of the same member
// reclaims its older claims first, with another attempt each; nobody else takes them; only the
// first reclaim per connection reserves and an older connection never takes claims back.
TEST_F(ConsumerGroupTest, ReclaimReservesTheMembersOlderClaimsForTheNewConnection) {
  ConsumerGroup g(std::nullopt, Offset(0), {});
  const GroupMember old_conn{"alice/w1", 1};
  const GroupMember new_conn{"alice/w1", 3};
  const GroupMember other{"bob/w1", 2};
  EXPECT_EQ(g.Claim(Offset(0), At(1000), old_conn), 1u);
  EXPECT_EQ(g.Claim(Offset(1), At(1000), other), 1u);
  EXPECT_EQ(g.Claim(Offset(2), At(1000), old_conn), 1u);
  EXPECT_EQ(g.Reclaim(new_conn), 2u);  // 0 and 2, not bob's 1
  EXPECT_EQ(g.NextReserved(3), Offset(0));
  EXPECT_FALSE(g.NextReserved(2).has_value());
  EXPECT_EQ(g.Claim(Offset(0), At(2000), new_conn), 2u);  // another attempt
  EXPECT_EQ(g.NextReserved(3), Offset(2));
  // A second reclaim on the same connection, or one from an older connection, reserves nothing.
  EXPECT_EQ(g.Reclaim(new_conn), 0u);
  EXPECT_EQ(g.Reclaim(GroupMember{"alice/w1", 2}), 0u);
  // A reserved claim that lapses is owed to the whole group, no longer reserved.
  g.Expire(At(1500));
  EXPECT_FALSE(g.NextReserved(3).has_value());
  // Bob's lapsed claim and alice's lapsed 2 are owed.
  EXPECT_EQ(g.NextCandidate(Offset(5)), Offset(1));
  EXPECT_EQ(g.owed(), 2u);
}

TEST_F(ConsumerGroupTest, ReservedClaimAtTheAttemptBoundIsDeadLetteredInsteadOfDelivered) {
  ConsumerGroup g(std::nullopt, Offset(0), ConsumerGroupLimits{2, 100});
  g.Claim(Offset(0), At(10), GroupMember{"m", 1});
  g.Expire(At(20));
  EXPECT_EQ(g.Claim(Offset(0), At(1000), GroupMember{"m", 1}), 2u);
  EXPECT_EQ(g.Reclaim(GroupMember{"m", 2}), 1u);
  ASSERT_EQ(g.NextReserved(2), Offset(0));
  EXPECT_TRUE(g.DeadLetterIfAtBound(Offset(0)));
  EXPECT_FALSE(g.IsClaimed(Offset(0)));
  EXPECT_FALSE(g.NextReserved(2).has_value());
  EXPECT_EQ(g.TakeDeadLetterWork(), std::vector<Offset>{Offset(0)});
}

// The claim deadlines against a model under seeded random claims, acks, extends, hand-backs and
// lapses (the deadlines are a heap whose dropped entries go stale; this checks that a stale
// entry never surfaces as a deadline or a lapse, and a live one is never lost).
TEST_F(ConsumerGroupTest, DeadlinesAndLapsesFollowEveryClaimThroughSettlesAndExtends) {
  std::mt19937_64 random(20261206);
  ConsumerGroup g(std::nullopt, Offset(0), {.max_attempts = 1000, .max_in_flight = 400});
  const Offset tail(1'000'000);
  std::map<Offset, std::pair<uint32_t, GroupTime>> claims;  // the model: attempts, deadline
  std::set<Offset> owed;
  int64_t now_ms = 0;
  for (int step = 0; step < 20000; ++step) {
    const uint64_t op = random() % 10;
    if (op < 4 && !g.AtInFlightCap()) {  // poll a few
      for (uint64_t n = 1 + random() % 8; n > 0 && !g.AtInFlightCap(); --n) {
        auto next = g.NextCandidate(tail);
        ASSERT_TRUE(next);
        if (!owed.empty()) {
          ASSERT_EQ(*next, *owed.begin());
        }
        const GroupTime until = At(now_ms + 1 + static_cast<int64_t>(random() % 500));
        const uint32_t attempts = g.Claim(*next, until);
        owed.erase(*next);
        claims[*next] = {attempts, until};
      }
    } else if (op < 7 && !claims.empty()) {  // settle or extend a random claim
      auto it = claims.begin();
      std::advance(it, static_cast<long>(random() % claims.size()));
      const Offset offset = it->first;
      if (op == 4) {
        ASSERT_EQ(g.Ack(offset, tail).verdict, SettleVerdict::kAccepted);
        claims.erase(it);
      } else if (op == 5) {
        const GroupTime until = At(now_ms + static_cast<int64_t>(random() % 800));
        ASSERT_EQ(g.Extend(offset, it->second.first, until).verdict, SettleVerdict::kAccepted);
        it->second.second = until;
      } else {
        ASSERT_EQ(g.Nack(offset, tail, it->second.first, At(now_ms), {}).verdict,
                  SettleVerdict::kAccepted);
        owed.insert(offset);
        claims.erase(it);
      }
    } else {  // time passes: the claims due lapse
      now_ms += static_cast<int64_t>(random() % 120);
      const bool due = std::any_of(claims.begin(), claims.end(),
                                   [&](const auto& c) { return c.second.second <= At(now_ms); });
      ASSERT_EQ(g.Expire(At(now_ms)), due) << "step " << step;
      std::erase_if(claims, [&](const auto& c) {
        if (c.second.second > At(now_ms)) return false;
        owed.insert(c.first);
        return true;
      });
    }
    ASSERT_EQ(g.in_flight(), claims.size()) << "step " << step;
    ASSERT_EQ(g.owed(), owed.size()) << "step " << step;
    std::optional<GroupTime> earliest;
    for (const auto& [offset, claim] : claims) {
      if (!earliest || claim.second < *earliest) earliest = claim.second;
    }
    ASSERT_EQ(g.NextDeadline(), earliest) << "step " << step;
  }
  for (const auto& [offset, claim] : claims) {
    EXPECT_TRUE(g.IsClaimed(offset));
    EXPECT_EQ(g.AttemptsOf(offset), claim.first);
  }
}

}  // namespace
}  // namespace felix::broker
