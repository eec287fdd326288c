// ShardStore opens the five logs of a shard in one call, each in its own subdirectory.
#include <filesystem>

#include <gtest/gtest.h>

#include "common/metrics.h"
#include "storage/shard_store.h"
#include "test_util.h"

namespace felix::storage {
namespace {

TEST(ShardStore, OpensFiveLogsAndReopens) {
  auto dir = test::TempDir("shard");
  MetricsRegistry registry;
  LogOptions o = test::Opts(FsyncMode::kOnCommit);
  o.metrics = &registry;
  {
    auto store = ShardStore::Open(dir, ShardStoreOptions::Uniform(o));
    ASSERT_TRUE(store) << store.error().ToString();
    for (size_t i = 0; i < kLogKindCount; ++i) {
      LogKind k = LogKind(i);
      EXPECT_TRUE(std::filesystem::is_directory(dir + "/" + LogKindName(k)));
      test::AppendN((*store)->log(k), 0, i + 1);
    }
    ASSERT_TRUE((*store)->Close());
  }
  auto store = ShardStore::Open(dir, ShardStoreOptions::Uniform(o));
  ASSERT_TRUE(store);
  for (size_t i = 0; i < kLogKindCount; ++i) {
    EXPECT_EQ((*store)->log(LogKind(i)).TailOffset(), i + 1);
  }
  EXPECT_EQ(ParseLogKind("dead_letters"), LogKind::kDeadLetters);
  EXPECT_NE(registry.RenderPrometheus().find("log=\"counters\""), std::string::npos);
}

}  // namespace
}  // namespace felix::storage
