#include "broker/subscriber_queue.h"

#include <thread>

#include <gtest/gtest.h>

namespace felix::broker {
namespace {

EventBatchRef Batch(Offset base, uint32_t count) {
  auto b = std::make_shared<EventBatch>();
  b->base_offset = base;
  b->record_count = count;
  return b;
}

TEST(SubscriberQueue, LiveOffersDropNewWhenFullAndCountIt) {
  int ready = 0;
  SubscriberQueue q(2, [&] { ++ready; });
  EXPECT_TRUE(q.OfferLive(Batch(Offset(0), 1)));
  EXPECT_TRUE(q.OfferLive(Batch(Offset(1), 2)));
  EXPECT_FALSE(q.OfferLive(Batch(Offset(3), 5)));  // full: dropped for this subscriber only
  EXPECT_FALSE(q.OfferLive(Batch(Offset(8), 1)));
  EXPECT_EQ(ready, 1);  // only the empty -> non-empty transition wakes the writer
  EXPECT_EQ(q.dropped_batches(), 2u);
  EXPECT_EQ(q.dropped_records(), 6u);
  EXPECT_EQ(q.first_dropped_offset(), Offset(3));
  EXPECT_EQ((*q.Pop())->base_offset, Offset(0));
  EXPECT_EQ((*q.Pop())->base_offset, Offset(1));
  EXPECT_FALSE(q.Pop());
  EXPECT_TRUE(q.OfferLive(Batch(Offset(9), 1)));  // the gap 3..8 is visible in the offsets
  EXPECT_EQ(ready, 2);
}

TEST(SubscriberQueue, GrowsToItsCapacityKeepingOrderAcrossTheWrapAndNoFurther) {
  SubscriberQueue q(37, [] {});
  EXPECT_EQ(q.capacity(), 37u);
  // Wrap the small initial ring first, so growing has to unroll it.
  for (Offset o(0); o < Offset(5); ++o) ASSERT_TRUE(q.OfferLive(Batch(o, 1)));
  for (Offset o(0); o < Offset(5); ++o) EXPECT_EQ((*q.Pop())->base_offset, o);
  for (Offset o(5); o < Offset(5 + 37); ++o) ASSERT_TRUE(q.OfferLive(Batch(o, 1))) << o;
  EXPECT_EQ(q.size(), 37u);
  EXPECT_FALSE(q.OfferLive(Batch(Offset(42), 1)));  // the capacity still bounds it
  EXPECT_FALSE(q.OfferReplay(Batch(Offset(42), 1)));
  EXPECT_EQ(q.dropped_batches(), 1u);
  for (Offset o(5); o < Offset(5 + 37); ++o) EXPECT_EQ((*q.Pop())->base_offset, o);
  EXPECT_FALSE(q.Pop());
}

TEST(SubscriberQueue, ReplayNeverDropsAndResumesOnRoom) {
  int room = 0;
  SubscriberQueue q(
      1, [] {}, [&] { ++room; });
  EXPECT_TRUE(q.OfferReplay(Batch(Offset(0), 1)));
  EXPECT_FALSE(q.OfferReplay(Batch(Offset(1), 1)));
  EXPECT_EQ(q.dropped_batches(), 0u);
  EXPECT_EQ(room, 0);
  ASSERT_TRUE(q.Pop());
  EXPECT_EQ(room, 1);
  EXPECT_TRUE(q.OfferReplay(Batch(Offset(1), 1)));
  ASSERT_TRUE(q.Pop());
  EXPECT_EQ(room, 1);  // no refused replay pending: no callback
}

TEST(SubscriberQueue, SharedBatchIsNotCopiedPerSubscriber) {
  SubscriberQueue a(4, [] {});
  SubscriberQueue b(4, [] {});
  EventBatchRef batch = Batch(Offset(0), 1);
  a.OfferLive(batch);
  b.OfferLive(batch);
  EXPECT_EQ(a.Pop()->get(), batch.get());
  EXPECT_EQ(b.Pop()->get(), batch.get());
}

TEST(SubscriberQueue, ProducerAndConsumerOnDifferentThreadsLoseNothingThatWasAccepted) {
  SubscriberQueue q(64, [] {});
  constexpr uint64_t kBatches = 20000;
  uint64_t accepted_sum = 0;
  std::thread producer([&] {
    for (uint64_t i = 0; i < kBatches; ++i) {
      if (q.OfferLive(Batch(Offset(i), 1))) accepted_sum += i;
    }
  });
  uint64_t received_sum = 0;
  uint64_t received = 0;
  Offset last;
  bool first = true;
  while (received + q.dropped_batches() < kBatches || q.size() > 0) {
    if (auto b = q.Pop()) {
      if (!first) {
        EXPECT_GT((*b)->base_offset, last);  // order kept
      }
      last = (*b)->base_offset;
      first = false;
      received_sum += (*b)->base_offset.value();
      ++received;
    } else {
      std::this_thread::yield();
    }
  }
  producer.join();
  EXPECT_EQ(received + q.dropped_batches(), kBatches);
  EXPECT_EQ(received_sum, accepted_sum);
}

TEST(SubscriberQueue, EndIsTakenOnlyAfterWhatWasQueuedBefore) {
  int ready = 0;
  SubscriberQueue q(4, [&] { ++ready; });
  EXPECT_TRUE(q.OfferLive(Batch(Offset(0), 1)));
  q.End(QueueEnd{QueueEnd::Kind::kLagged, Offset(1), 0, {}});
  EXPECT_EQ(ready, 2);                             // End wakes the writer even with items queued
  EXPECT_FALSE(q.OfferLive(Batch(Offset(1), 1)));  // nothing after the end
  EXPECT_FALSE(q.TakeEnd());                       // the queued batch comes first
  ASSERT_TRUE(q.Pop());
  auto end = q.TakeEnd();
  ASSERT_TRUE(end);
  EXPECT_EQ(end->resume_from, Offset(1));
  EXPECT_FALSE(q.TakeEnd());  // once
}

}  // namespace
}  // namespace felix::broker
