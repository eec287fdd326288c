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

uint64_t AppendAndWait(RecordLog& log, const PayloadBatch& batch) {
  std::promise<Result<uint64_t>> done;
  log.Append(batch, [&](Result<uint64_t> r) { done.set_value(std::move(r)); });
  auto result = done.get_future().get();
  EXPECT_TRUE(result) << (result ? "" : result.error().message);
  return result ? *result : UINT64_MAX;
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
              0u);
    EXPECT_EQ(AppendAndWait(log, Batch({"plain"}, nullptr)), 2u);
  }
  DurableRecordLog reopened(OpenStreamLog(), fence);  // from the files alone
  auto read = reopened.Read(0, 10, 1 << 20);
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
  EXPECT_EQ(AppendAndWait(log, Batch({"fine"}, nullptr)), 0u);
  // Written that way (the checksum covers it): a length byte claiming 9 bytes of 2.
  std::vector<uint8_t> lying{'x', 'y', 9};
  storage::AppendRecord record{lying, 0, 0, storage::kRecordFlagPublisher};
  ASSERT_TRUE(store->log(storage::LogKind::kStream).Append(record));
  auto from_start = log.Read(0, 10, 1 << 20);  // the good record first, the next read fails
  ASSERT_TRUE(std::holds_alternative<RecordRead>(from_start));
  EXPECT_EQ(std::get<RecordRead>(from_start).records.size(), 1u);
  auto damaged = log.Read(1, 10, 1 << 20);
  auto* error = std::get_if<Error>(&damaged);
  ASSERT_NE(error, nullptr);
  EXPECT_EQ(error->code, ErrorCode::kCorruption);
  EXPECT_NE(error->message.find("offset 1"), std::string::npos) << error->message;
}

TEST(RingAdapter, AnInMemoryLogStoresNoPublisher) {
  RingRecordLog log(storage::RingOptions{});
  EXPECT_EQ(AppendAndWait(log, Batch({"m"}, std::make_shared<const std::string>("alice"))), 0u);
  auto read = log.Read(0, 10, 1 << 20);
  auto* records = std::get_if<RecordRead>(&read);
  ASSERT_NE(records, nullptr);
  ASSERT_EQ(records->records.size(), 1u);
  EXPECT_EQ(Text(records->records[0].payload), "m");
  EXPECT_TRUE(records->records[0].publisher.empty());
}

}  // namespace
}  // namespace felix::broker
