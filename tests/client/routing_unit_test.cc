// The cluster-aware client's pure parts: the owner cache (shard_owners answers, redirects and
// owner hints, generations, forgetting), the retry decision by retry class, and the
// indeterminate outcome of a write.
#include <gtest/gtest.h>

#include "client/owner_cache.h"
#include "client/retry_policy.h"
#include "felix/errors.h"

namespace felix::client_impl {
namespace {

namespace flx1 = wire::flx1;
using namespace std::chrono_literals;

const NameKey kOrders{NameKind::kStream, "default", "orders"};

flx1::ShardOwner Owner(uint32_t shard, std::optional<std::string> node,
                       std::optional<std::string> addr, uint64_t generation) {
  flx1::ShardOwner o;
  o.shard = shard;
  o.node_id = std::move(node);
  o.addr = std::move(addr);
  o.generation = generation;
  return o;
}

TEST(OwnerCache, LearnsOwnersAndTheAnsweringBrokerServesUnnamedShards) {
  OwnerCache cache;
  EXPECT_FALSE(cache.Learned(kOrders));
  flx1::ShardOwner unavailable = Owner(3, std::nullopt, std::nullopt, 0);
  unavailable.unavailable = "not_assigned";
  cache.Learn(kOrders,
              {Owner(0, std::nullopt, std::nullopt, 4), Owner(1, "n2", "b:2", 5),
               Owner(2, "n3", std::nullopt, 6), unavailable},
              "a:1");
  EXPECT_TRUE(cache.Learned(kOrders));
  EXPECT_EQ(cache.Shards(kOrders), 4u);
  EXPECT_EQ(cache.Owner(kOrders, 0), (OwnerEntry{"", "a:1", 4}));
  EXPECT_EQ(cache.Owner(kOrders, 1), (OwnerEntry{"n2", "b:2", 5}));
  EXPECT_FALSE(cache.Owner(kOrders, 2));  // no client address: through any broker
  EXPECT_FALSE(cache.Owner(kOrders, 3));  // unassigned
  EXPECT_FALSE(cache.Learned({NameKind::kCache, "default", "orders"}));  // kinds are apart
}

TEST(OwnerCache, AnEmptyAnswerIsLearnedWithoutShards) {
  OwnerCache cache;
  cache.Learn(kOrders, {}, "a:1");
  EXPECT_TRUE(cache.Learned(kOrders));
  EXPECT_FALSE(cache.Shards(kOrders));
}

TEST(OwnerCache, RedirectsAndHintsApplyUnlessOlderThanWhatIsKnown) {
  OwnerCache cache;
  cache.Learn(kOrders, {Owner(0, "n1", "a:1", 5)}, "a:1");
  EXPECT_FALSE(cache.Update(kOrders, 0, {"n2", "b:2", 4}));  // older generation: ignored
  EXPECT_EQ(cache.Owner(kOrders, 0)->addr, "a:1");
  EXPECT_TRUE(cache.Update(kOrders, 0, {"n2", "b:2", 5}));  // same generation, newer word
  EXPECT_EQ(cache.Owner(kOrders, 0)->addr, "b:2");
  EXPECT_FALSE(cache.Update(kOrders, 0, {"n2", "b:2", 5}));  // nothing new
  EXPECT_TRUE(cache.Update(kOrders, 0, {"n3", "c:3", 6}));
  EXPECT_EQ(cache.Owner(kOrders, 0), (OwnerEntry{"n3", "c:3", 6}));
  EXPECT_FALSE(cache.Update(kOrders, 1, {"n3", "", 9}));  // a hint without an address
  EXPECT_FALSE(cache.Owner(kOrders, 1));
  // A redirect for a name never asked creates its entry without learning the name.
  NameKey other{NameKind::kStream, "default", "other"};
  EXPECT_TRUE(cache.Update(other, 2, {"n2", "b:2", 1}));
  EXPECT_EQ(cache.Owner(other, 2)->addr, "b:2");
  EXPECT_FALSE(cache.Learned(other));
  // A later answer does not undo a newer redirect it may have been read before.
  cache.Learn(kOrders, {Owner(0, "n1", "a:1", 5)}, "a:1");
  EXPECT_EQ(cache.Owner(kOrders, 0)->addr, "c:3");
}

TEST(OwnerCache, ForgettingANameOrABroker) {
  OwnerCache cache;
  cache.Learn(kOrders, {Owner(0, "n1", "a:1", 1), Owner(1, "n2", "b:2", 1)}, "a:1");
  cache.ForgetBroker("b:2");
  EXPECT_TRUE(cache.Owner(kOrders, 0));
  EXPECT_FALSE(cache.Owner(kOrders, 1));
  EXPECT_TRUE(cache.Learned(kOrders));
  cache.Forget(kOrders);
  EXPECT_FALSE(cache.Learned(kOrders));
  EXPECT_FALSE(cache.Owner(kOrders, 0));
}

ClientError WithClass(ClientErrorCode code, RetryClass retry) {
  ClientError e = MakeClientError(code, "x");
  e.retry = retry;
  return e;
}

TEST(RetryPolicy, ActsOnTheRetryClass) {
  auto retry = WithClass(ClientErrorCode::kShardUnavailable, RetryClass::kRetry);
  EXPECT_EQ(DecideRetry(retry, false, 1, 5).step, RetryStep::kRetry);
  EXPECT_EQ(DecideRetry(retry, false, 5, 5).step, RetryStep::kStop);  // budget spent
  auto after = WithClass(ClientErrorCode::kOverloaded, RetryClass::kRetryAfter);
  after.retry_after_ms = 250;
  auto d = DecideRetry(after, false, 1, 5);
  EXPECT_EQ(d.step, RetryStep::kRetry);
  EXPECT_EQ(d.delay, 250ms);  // the broker's suggestion wins
  auto fatal = WithClass(ClientErrorCode::kForbidden, RetryClass::kFatal);
  EXPECT_EQ(DecideRetry(fatal, true, 1, 5).step, RetryStep::kStop);
  // Outcome unknown: only an idempotent request is sent again.
  auto unknown = WithClass(ClientErrorCode::kUnacknowledged, RetryClass::kOutcomeUnknown);
  EXPECT_EQ(DecideRetry(unknown, false, 1, 5).step, RetryStep::kStop);
  EXPECT_EQ(DecideRetry(unknown, true, 1, 5).step, RetryStep::kRetry);
  // The class the broker sent, not the code's default, decides.
  auto sent_as_fatal = WithClass(ClientErrorCode::kShardUnavailable, RetryClass::kFatal);
  EXPECT_EQ(DecideRetry(sent_as_fatal, true, 1, 5).step, RetryStep::kStop);
}

TEST(RetryPolicy, RedirectsFollowANamedOwnerAndRetryWithoutOne) {
  auto redirect = WithClass(ClientErrorCode::kNotLeader, RetryClass::kRedirect);
  EXPECT_EQ(DecideRetry(redirect, false, 1, 5).step, RetryStep::kRetry);
  redirect.leader_addr = "b:2";
  EXPECT_EQ(DecideRetry(redirect, false, 5, 5).step, RetryStep::kRedirect);  // not an attempt
}

TEST(RetryPolicy, BackoffDoublesToACap) {
  auto e = WithClass(ClientErrorCode::kShardUnavailable, RetryClass::kRetry);
  EXPECT_EQ(RetryDelay(e, 1), 20ms);
  EXPECT_EQ(RetryDelay(e, 2), 40ms);
  EXPECT_EQ(RetryDelay(e, 3), 80ms);
  EXPECT_EQ(RetryDelay(e, 10), 400ms);
  e.retry_after_ms = 60'000;
  EXPECT_EQ(RetryDelay(e, 1), 5000ms);
}

TEST(WriteOutcome, AnUnknownOutcomeIsIndeterminateNeverFailed) {
  ClientError lost = MakeClientError(ClientErrorCode::kTimeout, "no answer");
  ClientError out = AsWriteOutcome(lost);
  EXPECT_EQ(out.code, ClientErrorCode::kIndeterminate);
  EXPECT_TRUE(out.indeterminate());
  EXPECT_EQ(out.cause, ClientErrorCode::kTimeout);
  EXPECT_EQ(out.retry, RetryClass::kOutcomeUnknown);
  EXPECT_EQ(out.code_name, "indeterminate");
  EXPECT_EQ(AsWriteOutcome(out).cause, ClientErrorCode::kTimeout);  // once
  ClientError refused = MakeClientError(ClientErrorCode::kForbidden, "no");
  EXPECT_EQ(AsWriteOutcome(refused).code, ClientErrorCode::kForbidden);
  ClientError shed = MakeClientError(ClientErrorCode::kShardUnavailable, "moving");
  EXPECT_EQ(AsWriteOutcome(shed).code, ClientErrorCode::kShardUnavailable);  // nothing applied
}

}  // namespace
}  // namespace felix::client_impl
