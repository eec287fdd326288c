// batch_checksum (internal-protocol-bodies.md §7.3) and the frozen shard hash
// (semantics.md §4.2): every test value and golden from the spec.
#include <gtest/gtest.h>
#include <zlib.h>

#include <random>
#include <span>
#include <string>

#include "wire/flxi/flxi.h"
#include "wire/shard_hash.h"

namespace felix::wire {
namespace {

using flxi::BatchChecksum;
using flxi::Bytes;
using flxi::MarkType;
using flxi::RecordMark;

uint64_t Plain(std::vector<Bytes> payloads) {
  return BatchChecksum(payloads, {});
}

TEST(FlxiBatchChecksum, SpecTestValues) {
  EXPECT_EQ(Plain({}), 0x00000000u);
  EXPECT_EQ(Plain({"a", "bb"}), 0x7D1F2B1Cu);
  EXPECT_EQ(Plain({"ab", "c"}), 0x8CFF5E32u);
  EXPECT_EQ(Plain({"a", "bc"}), 0x0A181B8Au);  // lengths are hashed
  EXPECT_EQ(Plain({"x"}), 0x81E73F52u);
  EXPECT_EQ(Plain({"x", "y"}), 0x924E14B7u);
  std::vector<Bytes> xy = {"x", "y"};
  std::vector<RecordMark> marks = {{MarkType::kOpens, 7, 1, 2, std::nullopt},
                                   {MarkType::kContinues, 0, 0, 0, std::nullopt}};
  EXPECT_EQ(BatchChecksum(xy, marks), 0x4E0E106Bu);
  std::vector<Bytes> ab = {"a", "b"};
  std::vector<RecordMark> publishers = {{MarkType::kNone, 0, 0, 0, "alice"},
                                        {MarkType::kNone, 0, 0, 0, std::nullopt}};
  EXPECT_EQ(BatchChecksum(ab, publishers), 0xD839063Au);
}

TEST(FlxiBatchChecksum, AllNoneMarksAreNotHashedAndResultIsZeroExtended) {
  std::vector<Bytes> xy = {"x", "y"};
  std::vector<RecordMark> none(2);
  EXPECT_FALSE(flxi::HasAnyMark(none));
  EXPECT_EQ(BatchChecksum(xy, none), 0x924E14B7u);
  std::vector<RecordMark> one_set(2);
  one_set[1].type = MarkType::kAtomicCommit;
  EXPECT_TRUE(flxi::HasAnyMark(one_set));
  EXPECT_NE(BatchChecksum(xy, one_set), 0x924E14B7u);
  EXPECT_EQ(BatchChecksum(xy, one_set) >> 32, 0u);
}

// What the spec defines: zlib's CRC-32 over each payload's u32 big-endian length and bytes.
uLong ZlibOfLengthPrefixed(std::span<const std::string> payloads) {
  uLong crc = crc32(0L, Z_NULL, 0);
  for (const auto& p : payloads) {
    const auto n = static_cast<uint32_t>(p.size());
    const Bytef len_be[4] = {static_cast<Bytef>(n >> 24), static_cast<Bytef>(n >> 16),
                             static_cast<Bytef>(n >> 8), static_cast<Bytef>(n)};
    crc = crc32(crc, len_be, 4);
    crc = crc32(crc, reinterpret_cast<const Bytef*>(p.data()), static_cast<uInt>(n));
  }
  return crc;
}

// The codec computes the checksum with ISA-L; sizes around and far beyond its SIMD block widths
// (16/64/256 bytes, megabytes) compare against zlib itself, one payload at a time and chained.
TEST(FlxiBatchChecksum, IsZlibsCrc32OfTheLengthPrefixedPayloadsAtEverySize) {
  std::mt19937 rng(20261203);
  std::vector<std::string> owned;
  for (size_t size : {0, 1, 3, 15, 16, 17, 63, 64, 65, 255, 256, 257, 4095, 4096, 70000, 1 << 20}) {
    std::string s(size, '\0');
    for (auto& c : s) c = static_cast<char>(rng());
    owned.push_back(std::move(s));
  }
  for (size_t i = 0; i < owned.size(); ++i) {
    EXPECT_EQ(Plain({Bytes(owned[i])}), ZlibOfLengthPrefixed({&owned[i], 1}))
        << "payload of " << owned[i].size() << " bytes";
  }
  EXPECT_EQ(Plain(std::vector<Bytes>(owned.begin(), owned.end())), ZlibOfLengthPrefixed(owned));
}

TEST(ShardHash, IntermediateValues) {
  EXPECT_EQ(Fnv1a64(std::string_view("")), 0xcbf29ce484222325ull);
  EXPECT_EQ(FinalizeHash(Fnv1a64(std::string_view(""))), 0xf52a15e9a9b5e89bull);
  EXPECT_EQ(Fnv1a64(std::string_view("customer-0")), 0x660309ab83c6ffa4ull);
  EXPECT_EQ(FinalizeHash(Fnv1a64(std::string_view("customer-0"))), 0xe0ef692b167733d8ull);
}

TEST(ShardHash, FrozenGoldens) {
  struct Row {
    uint32_t n;
    const char* key;
    uint32_t modulo;
    int jump;  // -1: not given
  };
  const Row rows[] = {
      {8, "customer-0", 0, 3}, {8, "customer-1", 3, 0}, {8, "customer-2", 6, 5},
      {8, "customer-4", 2, 2}, {8, "customer-6", 4, 7}, {12, "k0", 6, 3},
      {12, "k1", 10, 4},       {4, "", 3, -1},
  };
  for (const auto& r : rows) {
    EXPECT_EQ(ShardModulo(r.n, std::string_view(r.key)), r.modulo) << r.key << " / " << r.n;
    if (r.jump >= 0) {
      EXPECT_EQ(ShardJump(r.n, std::string_view(r.key)), static_cast<uint32_t>(r.jump))
          << r.key << " / " << r.n;
    }
  }
}

TEST(ShardHash, NoKeyOrOneShardIsShardZero) {
  for (uint32_t n : {0u, 1u}) {
    for (const char* key : {"", "customer-0", "k1", "anything"}) {
      EXPECT_EQ(ShardModulo(n, std::string_view(key)), 0u);
      EXPECT_EQ(ShardJump(n, std::string_view(key)), 0u);
    }
  }
  EXPECT_EQ(ShardModulo(16, std::nullopt), 0u);
  EXPECT_EQ(ShardJump(16, std::nullopt), 0u);
}

TEST(ShardHash, JumpHashStaysInRangeAndMovesFewKeysWhenGrowing) {
  int moved = 0;
  const int keys = 2000;
  for (int i = 0; i < keys; ++i) {
    std::string key = "key-" + std::to_string(i);
    uint32_t a = ShardJump(10, key);
    uint32_t b = ShardJump(11, key);
    EXPECT_LT(a, 10u);
    EXPECT_LT(b, 11u);
    if (a != b) {
      ++moved;
      EXPECT_EQ(b, 10u) << key;  // a moved key only ever moves to the new bucket
    }
  }
  EXPECT_LT(moved, keys / 5);  // ~1/11 expected
  EXPECT_EQ(JumpHash(12345, 1), 0);
}

}  // namespace
}  // namespace felix::wire
