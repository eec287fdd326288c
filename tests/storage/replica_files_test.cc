#include "storage/replica_files.h"

#include <gtest/gtest.h>

namespace felix::storage {
namespace {

std::vector<uint8_t> Hex(std::string_view hex) {
  std::vector<uint8_t> out;
  std::string digits;
  for (char c : hex) {
    if (c != ' ') digits.push_back(c);
  }
  for (size_t i = 0; i + 1 < digits.size(); i += 2) {
    out.push_back(static_cast<uint8_t>(std::stoi(digits.substr(i, 2), nullptr, 16)));
  }
  return out;
}

// Golden vectors of storage.md §7.1–§7.3.
constexpr const char* kReplicaGolden =
    "464C5253 0001 0001 0000000000000007 0000000000000064 C707672B";
constexpr const char* kBallotGolden =
    "464C424C 0001 0008 0000000000000007 62726F6B65722D62 640AEDB7";
constexpr const char* kEpochsGolden =
    "464C4550 0001 0002 060C8264 0000000000000003 0000000000000000 0000000000000004 "
    "0000000000000001";

TEST(ReplicaFile, GoldenVectorRoundTrips) {
  ReplicaState state{Generation(7), Offset(100), true};
  EXPECT_EQ(EncodeReplicaState(state), Hex(kReplicaGolden));
  auto decoded = DecodeReplicaState(Hex(kReplicaGolden));
  ASSERT_TRUE(decoded) << decoded.error().ToString();
  EXPECT_EQ(*decoded, state);
}

TEST(ReplicaFile, EveryDefectIsCorruption) {
  auto good = Hex(kReplicaGolden);
  auto expect_corrupt = [](std::vector<uint8_t> bytes, const char* what) {
    auto decoded = DecodeReplicaState(bytes);
    ASSERT_FALSE(decoded) << what;
    EXPECT_EQ(decoded.error().code, StorageErrc::kCorruption) << what;
  };
  expect_corrupt({good.begin(), good.end() - 1}, "short");
  auto longer = good;
  longer.push_back(0);
  expect_corrupt(longer, "long");
  auto magic = good;
  magic[0] ^= 1;
  expect_corrupt(magic, "magic");
  auto generation = good;
  generation[15] ^= 1;
  expect_corrupt(generation, "crc");
  auto version = good;
  version[5] = 2;
  expect_corrupt(version, "version");
}

TEST(BallotFile, GoldenVectorRoundTripsAndDefectsAreCorruption) {
  Ballot ballot{Generation(7), "broker-b"};
  auto encoded = EncodeBallot(ballot);
  ASSERT_TRUE(encoded);
  EXPECT_EQ(*encoded, Hex(kBallotGolden));
  auto decoded = DecodeBallot(Hex(kBallotGolden));
  ASSERT_TRUE(decoded);
  EXPECT_EQ(*decoded, ballot);

  auto lying_length = Hex(kBallotGolden);
  lying_length[7] = 0xff;  // leader_len 255 with 8 bytes present
  EXPECT_EQ(DecodeBallot(lying_length).error().code, StorageErrc::kCorruption);
  auto huge = Hex(kBallotGolden);
  huge[6] = 0xff;  // leader_len > 1024: refused before anything is read
  EXPECT_EQ(DecodeBallot(huge).error().code, StorageErrc::kCorruption);
  EXPECT_FALSE(DecodeBallot(std::vector<uint8_t>(10)));
  EXPECT_EQ(EncodeBallot(Ballot{Generation(1), std::string(1025, 'x')}).error().code,
            StorageErrc::kInvalidArgument);
}

TEST(EpochsFile, GoldenVectorRoundTrips) {
  GenerationHistory history;
  EXPECT_TRUE(history.Record(Generation(3), Offset(0)));
  EXPECT_TRUE(history.Record(Generation(4), Offset(1)));
  EXPECT_EQ(history.Encode(), Hex(kEpochsGolden));
  std::string defect;
  auto decoded = GenerationHistory::Decode(Hex(kEpochsGolden), &defect);
  EXPECT_TRUE(defect.empty()) << defect;
  EXPECT_EQ(decoded.entries(), history.entries());
}

TEST(EpochsFile, DefectsReadAsEmptyAndSayWhy) {
  auto good = Hex(kEpochsGolden);
  for (size_t cut : {size_t{0}, size_t{11}, good.size() - 1}) {
    std::string defect;
    auto decoded = GenerationHistory::Decode(std::span(good).first(cut), &defect);
    EXPECT_TRUE(decoded.entries().empty()) << cut;
    EXPECT_FALSE(defect.empty()) << cut;
  }
  auto count = good;
  count[7] = 0xff;  // 255 entries claimed, 2 present: no allocation from the count
  std::string defect;
  EXPECT_TRUE(GenerationHistory::Decode(count, &defect).entries().empty());
  EXPECT_EQ(defect, "entry count does not match the length");
  auto body = good;
  body.back() ^= 1;
  EXPECT_TRUE(GenerationHistory::Decode(body, &defect).entries().empty());
  EXPECT_EQ(defect, "CRC mismatch");
}

TEST(GenerationHistory, RecordTruncateAndEndOf) {
  GenerationHistory history;
  EXPECT_TRUE(history.Record(Generation(3), Offset(0)));
  EXPECT_FALSE(history.Record(Generation(3), Offset(5))) << "a re-report changes nothing";
  EXPECT_FALSE(history.Record(Generation(2), Offset(5))) << "an older generation changes nothing";
  EXPECT_TRUE(history.Record(Generation(5), Offset(10)));
  EXPECT_TRUE(history.Record(Generation(6), Offset(20)));
  EXPECT_EQ(history.EndOf(Generation(3), Offset(30)), Offset(10));
  EXPECT_EQ(history.EndOf(Generation(5), Offset(30)), Offset(20));
  EXPECT_EQ(history.EndOf(Generation(6), Offset(30)), Offset(30));
  EXPECT_EQ(history.EndOf(Generation(4), Offset(30)), std::nullopt)
      << "unknown generations are not guessed";
  EXPECT_TRUE(history.TruncateFrom(Offset(10)));
  EXPECT_EQ(history.newest_generation(), Generation(3));
  EXPECT_EQ(history.EndOf(Generation(3), Offset(12)), Offset(12));
  EXPECT_FALSE(history.TruncateFrom(Offset(10)));
}

TEST(GenerationHistory, KeepsTheNewest512Entries) {
  GenerationHistory history;
  for (uint64_t g = 1; g <= 600; ++g) history.Record(Generation(g), Offset(g * 10));
  ASSERT_EQ(history.entries().size(), kMaxEpochEntries);
  EXPECT_EQ(history.entries().front().generation, Generation(89));
  EXPECT_EQ(history.entries().back().generation, Generation(600));
  auto decoded = GenerationHistory::Decode(history.Encode());
  EXPECT_EQ(decoded.entries(), history.entries());
}

}  // namespace
}  // namespace felix::storage
