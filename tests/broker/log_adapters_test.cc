// The storage bindings of the RecordLog port (log_adapters.h): a batch's publisher
// (FELIX_RECORD_PUBLISHERS) is stored as each record's trailer by the durable adapter and
// handed back apart from the payload; a damaged trailer is a read error naming the offset; a
// ring stores none.
#include "broker/log_adapters.h"

#include <gtest/gtest.h>

#include <future>

#include "storage/record_format.h"
#include "storage/shard_store.h"
#include "support/child_process.h"

namespace felix::broker {
namespace {

std::string Text(std::span<const uint8_t> bytes) {
  return std::string(bytes.begin(), bytes.end());
}

PayloadBatch Batch(const std::vector<std::string>& payloads,
                   std::shared_ptr<const std::string> publisher) {
  auto owner = std::make_shared<std::vector<std::string>>(payloads);
  PayloadBatch batch;
  for (const auto& p : *owner) batch.payloads.push_back(storage::AsBytes(p));
  batch.owner = owner;
  batch.timestamp_micros = 1'700'000'000'000'000;
  batch.publisher = std::move(publisher);
  return batch;
}

Offset AppendAndWait(RecordLog& log, const PayloadBatch& batch) {
  std::promise<Result<Offset>> done;
  log.Append(batch, [&](Result<Offset> r) { done.set_value(std::move(r)); });
  auto result = done.get_future().get();
  EXPECT_TRUE(result) << (result ? "" : result.error().message);
  return result ? *result : Offset(UINT64_MAX);
}

struct DurableAdapter : ::testing::Test {
  std::string dir = felix::testing::MakeTempDir("log-adapters");
  ShardFence fence;
  std::unique_ptr<storage::ShardStore> store;

  storage::DurableLog& OpenStreamLog() {
    store.reset();
    storage::LogOptions log;
    log.fsync_mode = storage::FsyncMode::kOnCommit;
    auto opened = storage::ShardStore::Open(dir, storage::ShardStoreOptions::Uniform(log));
    EXPECT_TRUE(opened) << (opened ? "" : opened.error().message);
    store = std::move(*opened);
    return store->log(storage::LogKind::kStream);
  }
};

TEST_F(DurableAdapter, APublisherIsStoredWithEachRecordAndReadBackApart) {
  {
    DurableRecordLog log(OpenStreamLog(), fence);
    EXPECT_EQ(AppendAndWait(log, Batch({"a", ""}, std::make_shared<const std::string>("alice"))),
              Offset(0));
    EXPECT_EQ(AppendAndWait(log, Batch({"plain"}, nullptr)), Offset(2));
  }
  DurableRecordLog reopened(OpenStreamLog(), fence);  // from the files alone
  auto read = reopened.Read(Offset(0), 10, 1 << 20);
  auto* records = std::get_if<RecordRead>(&read);
  ASSERT_NE(records, nullptr);
  ASSERT_EQ(records->records.size(), 3u);
  EXPECT_EQ(Text(records->records[0].payload), "a");
  EXPECT_EQ(Text(records->records[0].publisher), "alice");
  EXPECT_EQ(Text(records->records[1].payload), "");  // an empty payload stays empty
  EXPECT_EQ(Text(records->records[1].publisher), "alice");
  EXPECT_EQ(Text(records->records[2].payload), "plain");
  EXPECT_TRUE(records->records[2].publisher.empty());
}

TEST_F(DurableAdapter, ATrailerLongerThanItsRecordIsCorruptionNamingTheOffset) {
  DurableRecordLog log(OpenStreamLog(), fence);
  EXPECT_EQ(AppendAndWait(log, Batch({"fine"}, nullptr)), Offset(0));
  // Written that way (the checksum covers it): a length byte claiming 9 bytes of 2.
  std::vector<uint8_t> lying{'x', 'y', 9};
  storage::AppendRecord record{lying, Generation(0), 0, storage::kRecordFlagPublisher};
  ASSERT_TRUE(store->log(storage::LogKind::kStream).Append(record));
  auto from_start = log.Read(Offset(0), 10, 1 << 20);  // the good record first, the next read fails
  ASSERT_TRUE(std::holds_alternative<RecordRead>(from_start));
  EXPECT_EQ(std::get<RecordRead>(from_start).records.size(), 1u);
  auto damaged = log.Read(Offset(1), 10, 1 << 20);
  auto* error = std::get_if<Error>(&damaged);
  ASSERT_NE(error, nullptr);
  EXPECT_EQ(error->code, ErrorCode::kCorruption);
  EXPECT_NE(error->message.find("offset 1"), std::string::npos) << error->message;
}

// Generation-start records (replication.md §17) hold no event: a read passes over them,
// counting them in passed_over, never returns one and never spans one (what it returns stays
// contiguous); a read of nothing but start records goes on past them, and one that reaches the
// tail returns no records.
TEST_F(DurableAdapter, GenerationStartRecordsArePassedOverAndCounted) {
  storage::DurableLog& raw = OpenStreamLog();
  const auto start2 = storage::GenerationStartPayload(2);
  const auto start3 = storage::GenerationStartPayload(3);
  const std::string a = "a", b = "b", c = "c";
  // 0 a, 1 start(2), 2 b, 3 start(3), 4 start(3), 5 c, 6 start(3)
  const std::vector<storage::AppendRecord> records = {
      {storage::AsBytes(a), Generation(1), 0},
      {start2, Generation(2), 0, storage::kRecordFlagGenerationStart},
      {storage::AsBytes(b), Generation(2), 0},
      {start3, Generation(3), 0, storage::kRecordFlagGenerationStart},
      {start3, Generation(3), 0, storage::kRecordFlagGenerationStart},
      {storage::AsBytes(c), Generation(3), 0},
      {start3, Generation(3), 0, storage::kRecordFlagGenerationStart},
  };
  ASSERT_TRUE(raw.Append(records).has_value());
  DurableRecordLog log(raw, fence);
  auto read = [&](Offset from) {
    auto outcome = log.Read(from, 100, 1 << 20);
    EXPECT_TRUE(std::holds_alternative<RecordRead>(outcome));
    std::vector<std::pair<Offset, std::string>> got;
    uint64_t passed = 0;
    if (auto* r = std::get_if<RecordRead>(&outcome)) {
      for (const auto& v : r->records) got.emplace_back(v.offset, Text(v.payload));
      passed = r->passed_over;
    }
    return std::make_pair(got, passed);
  };
  using Got = std::vector<std::pair<Offset, std::string>>;
  EXPECT_EQ(read(Offset(0)), std::make_pair(Got{{Offset(0), "a"}}, uint64_t{0}))
      << "ends before a start record";
  EXPECT_EQ(read(Offset(1)), std::make_pair(Got{{Offset(2), "b"}}, uint64_t{1}));
  EXPECT_EQ(read(Offset(3)), std::make_pair(Got{{Offset(5), "c"}}, uint64_t{2}));
  EXPECT_EQ(read(Offset(6)), std::make_pair(Got{}, uint64_t{1})) << "a trailing start record";
}

TEST(RingAdapter, AnInMemoryLogStoresNoPublisher) {
  RingRecordLog log(storage::RingOptions{});
  EXPECT_EQ(AppendAndWait(log, Batch({"m"}, std::make_shared<const std::string>("alice"))),
            Offset(0));
  auto read = log.Read(Offset(0), 10, 1 << 20);
  auto* records = std::get_if<RecordRead>(&read);
  ASSERT_NE(records, nullptr);
  ASSERT_EQ(records->records.size(), 1u);
  EXPECT_EQ(Text(records->records[0].payload), "m");
  EXPECT_TRUE(records->records[0].publisher.empty());
}

}  // namespace
}  // namespace felix::broker
