// `felix log inspect|verify|dump` against real shard directories.
#include <gtest/gtest.h>

#include "storage/record_format.h"
#include "storage/shard_store.h"
#include "support/child_process.h"
#include "test_util.h"

namespace felix::storage {
namespace {

using felix::testing::BuiltProgram;
using felix::testing::RunProgram;

std::string MakeShard() {
  auto dir = test::TempDir("cli-shard");
  auto store = ShardStore::Open(dir, ShardStoreOptions::Uniform(test::Opts()));
  EXPECT_TRUE(store);
  test::AppendN((*store)->log(LogKind::kStream), Offset(0), 20, 30);
  test::AppendN((*store)->log(LogKind::kCounters), Offset(0), 3);
  EXPECT_TRUE((*store)->Close());
  return dir;
}

TEST(CliLog, InspectVerifyAndDumpAShard) {
  auto dir = MakeShard();
  auto [code, out] = RunProgram(BuiltProgram("src/cli/felix"), {"log", "inspect", dir});
  EXPECT_EQ(code, 0) << out;
  EXPECT_NE(out.find("log stream"), std::string::npos) << out;
  EXPECT_NE(out.find("base 0  tail 20"), std::string::npos) << out;
  EXPECT_NE(out.find("log dead_letters"), std::string::npos) << out;

  std::tie(code, out) = RunProgram(BuiltProgram("src/cli/felix"), {"log", "verify", dir});
  EXPECT_EQ(code, 0) << out;
  EXPECT_NE(out.find("verified 20 records"), std::string::npos) << out;

  std::tie(code, out) = RunProgram(BuiltProgram("src/cli/felix"),
                                   {"log", "dump", dir, "--log", "stream", "--from", "18"});
  EXPECT_EQ(code, 0) << out;
  EXPECT_NE(out.find("offset=18 generation=1"), std::string::npos) << out;
  EXPECT_NE(out.find("payload=" + test::Payload(19, 30)), std::string::npos) << out;
  EXPECT_EQ(out.find("offset=17"), std::string::npos) << out;
}

// A generation-start record (flag 0x4) is named with the generation its payload carries.
TEST(CliLog, DumpNamesAGenerationStartRecord) {
  auto dir = test::TempDir("cli-start");
  {
    auto store = ShardStore::Open(dir, ShardStoreOptions::Uniform(test::Opts()));
    ASSERT_TRUE(store);
    test::AppendN((*store)->log(LogKind::kStream), Offset(0), 2, 10);
    const auto payload = GenerationStartPayload(7);
    ASSERT_TRUE((*store)
                    ->log(LogKind::kStream)
                    .Append(AppendRecord{payload, Generation(7), 0, kRecordFlagGenerationStart})
                    .has_value());
    ASSERT_TRUE((*store)->Close());
  }
  auto [code, out] = RunProgram(BuiltProgram("src/cli/felix"),
                                {"log", "dump", dir, "--log", "stream", "--from", "2"});
  EXPECT_EQ(code, 0) << out;
  EXPECT_NE(out.find("offset=2 generation=7"), std::string::npos) << out;
  EXPECT_NE(out.find("flags=4 generation-start=7"), std::string::npos) << out;
}

TEST(CliLog, VerifyNamesTheCorruptFileAndPosition) {
  auto dir = MakeShard();
  auto seg = test::SegmentFiles(dir + "/stream").front();
  auto bytes = test::ReadFileBytes(seg);
  auto positions = test::RecordPositions(bytes);
  bytes[positions[5] + kRecordHeaderBytes + 1] ^= 0x20;
  test::WriteFileBytes(seg, bytes);
  auto [code, out] = RunProgram(BuiltProgram("src/cli/felix"), {"log", "verify", dir + "/stream"});
  EXPECT_EQ(code, 1) << out;
  EXPECT_NE(out.find(seg), std::string::npos) << out;
  EXPECT_NE(out.find("position=" + std::to_string(positions[5])), std::string::npos) << out;
}

}  // namespace
}  // namespace felix::storage
