// The pure codecs: CRC-32C, record frames, segment headers, index files, the scanner and the
// torn-vs-corrupt verdict.
#include <gtest/gtest.h>

#include "storage/log_reader.h"
#include "storage/record_format.h"
#include "test_util.h"

namespace felix::storage {
namespace {

[[maybe_unused]] const auto* const kCleanup =
    ::testing::AddGlobalTestEnvironment(new test::CleanupEnvironment);

std::vector<uint8_t> Segment(int records, size_t payload = 10, uint64_t base = 0) {
  std::vector<uint8_t> out(kSegmentHeaderBytes);
  EncodeSegmentHeader(SegmentHeader{base, 1}, out.data());
  for (int i = 0; i < records; ++i) {
    std::string p(payload, char('a' + i % 26));
    size_t at = out.size();
    out.resize(at + RecordBytes(p.size()));
    EncodeRecord(out.data() + at, base + uint64_t(i), 7, 1000 + uint64_t(i), AsBytes(p));
  }
  return out;
}

TEST(RecordFormat, Crc32cCheckValue) {
  EXPECT_EQ(Crc32c("123456789", 9), 0xE3069283u);
  uint32_t chained = Crc32c("6789", 4, Crc32c("12345", 5));
  EXPECT_EQ(chained, 0xE3069283u);
}

TEST(RecordFormat, RecordRoundTripsAndHeaderBitFlipsAreDetected) {
  std::vector<uint8_t> buf(RecordBytes(5));
  EncodeRecord(buf.data(), 42, 3, 99, AsBytes("hello"));
  RecordHeader h;
  ASSERT_TRUE(DecodeRecordHeader(buf.data(), &h));
  EXPECT_EQ(h.payload_len, 5u);
  EXPECT_EQ(h.offset, 42u);
  EXPECT_EQ(h.generation, 3u);
  EXPECT_EQ(h.timestamp_ms, 99u);
  EXPECT_TRUE(PayloadCrcMatches(h, buf.data() + kRecordHeaderBytes));
  for (size_t bit = 0; bit < kRecordHeaderBytes * 8; ++bit) {
    auto copy = buf;
    copy[bit / 8] ^= uint8_t(1u << (bit % 8));
    RecordHeader h2;
    EXPECT_FALSE(DecodeRecordHeader(copy.data(), &h2)) << "bit " << bit;
  }
  auto copy = buf;
  copy[kRecordHeaderBytes + 2] ^= 1;
  ASSERT_TRUE(DecodeRecordHeader(copy.data(), &h));
  EXPECT_FALSE(PayloadCrcMatches(h, copy.data() + kRecordHeaderBytes));
}

TEST(RecordFormat, SegmentHeaderRoundTripAndRejects) {
  uint8_t b[kSegmentHeaderBytes];
  EncodeSegmentHeader(SegmentHeader{17, 5}, b);
  std::string why;
  auto h = DecodeSegmentHeader({b, sizeof(b)}, &why);
  ASSERT_TRUE(h);
  EXPECT_EQ(h->base_offset, 17u);
  b[9] ^= 1;
  EXPECT_FALSE(DecodeSegmentHeader({b, sizeof(b)}, &why));
  EXPECT_NE(why.find("checksum"), std::string::npos);
  EXPECT_FALSE(DecodeSegmentHeader({b, 10}, &why));
}

TEST(RecordFormat, IndexFileRoundTripAndDistrust) {
  std::vector<IndexEntry> e = {{10, 32}, {20, 4000}, {30, 9000}};
  auto bytes = EncodeIndexFile(10, e);
  auto back = DecodeIndexFile(bytes, 10);
  ASSERT_TRUE(back);
  ASSERT_EQ(back->size(), 3u);
  EXPECT_EQ((*back)[2].position, 9000u);
  EXPECT_FALSE(DecodeIndexFile(bytes, 11));  // wrong base
  bytes.resize(bytes.size() - 3);            // torn last entry
  EXPECT_EQ(DecodeIndexFile(bytes, 10)->size(), 2u);
  std::vector<IndexEntry> bad = {{10, 32}, {9, 40}, {30, 9000}};
  EXPECT_EQ(DecodeIndexFile(EncodeIndexFile(10, bad), 10)->size(), 1u);
  std::vector<IndexEntry> into_header = {{10, 8}};
  EXPECT_EQ(DecodeIndexFile(EncodeIndexFile(10, into_header), 10)->size(), 0u);
}

TEST(RecordFormat, DurableMarkRoundTrip) {
  uint8_t b[kMarkBytes];
  EncodeDurableMark(DurableMark{5, 4096}, b);
  auto m = DecodeDurableMark({b, sizeof(b)});
  ASSERT_TRUE(m);
  EXPECT_EQ(m->segment_base, 5u);
  EXPECT_EQ(m->synced_bytes, 4096u);
  b[17] ^= 4;
  EXPECT_FALSE(DecodeDurableMark({b, sizeof(b)}));
}

TEST(RecordFormat, ScanCleanSegmentBuildsSparseIndex) {
  auto seg = Segment(100, 100, 50);
  IndexBuilder builder(1000);
  std::vector<IndexEntry> index;
  auto s = ScanRecords(seg, kSegmentHeaderBytes, 50, &builder, &index);
  EXPECT_EQ(s.stop, ScanStop::kEnd);
  EXPECT_EQ(s.records, 100u);
  EXPECT_EQ(s.next_offset, 150u);
  EXPECT_EQ(s.valid_end, seg.size());
  EXPECT_EQ(s.last_timestamp_ms, 1099u);
  ASSERT_FALSE(index.empty());
  EXPECT_EQ(index.front().offset, 50u);
  EXPECT_EQ(index.front().position, kSegmentHeaderBytes);
  EXPECT_GT(index.size(), 10u);
  EXPECT_LT(index.size(), 20u);
  EXPECT_EQ(ClassifyTail(seg, s, std::nullopt).verdict, TailVerdict::kClean);
}

TEST(RecordFormat, EveryTruncationIsTorn) {
  auto seg = Segment(3, 30);
  for (size_t cut = kSegmentHeaderBytes; cut < seg.size(); ++cut) {
    std::span<const uint8_t> part(seg.data(), cut);
    auto s = ScanRecords(part, kSegmentHeaderBytes, 0, nullptr, nullptr);
    auto d = ClassifyTail(part, s, uint64_t(seg.size()));
    EXPECT_NE(d.verdict, TailVerdict::kCorrupt) << "cut " << cut;
    EXPECT_LE(s.valid_end, cut);
  }
}

TEST(RecordFormat, InteriorDamageIsCorruptLastRecordDamageDependsOnMark) {
  auto seg = Segment(5, 20);
  uint64_t rec = RecordBytes(20);
  // Flip a payload bit of record 2 (interior).
  auto interior = seg;
  interior[kSegmentHeaderBytes + 2 * rec + kRecordHeaderBytes + 3] ^= 0x10;
  auto s = ScanRecords(interior, kSegmentHeaderBytes, 0, nullptr, nullptr);
  EXPECT_EQ(s.stop, ScanStop::kDamaged);
  EXPECT_EQ(s.valid_end, kSegmentHeaderBytes + 2 * rec);
  EXPECT_EQ(ClassifyTail(interior, s, std::nullopt).verdict, TailVerdict::kCorrupt);
  EXPECT_EQ(ClassifyTail(interior, s, uint64_t(seg.size())).verdict, TailVerdict::kCorrupt);
  // Past the durable mark it was never acknowledged durable: torn.
  EXPECT_EQ(ClassifyTail(interior, s, kSegmentHeaderBytes + 2 * rec).verdict, TailVerdict::kTorn);
  // The last record: torn without a mark, corrupt below the mark.
  auto last = seg;
  last[kSegmentHeaderBytes + 4 * rec + kRecordHeaderBytes + 1] ^= 1;
  s = ScanRecords(last, kSegmentHeaderBytes, 0, nullptr, nullptr);
  EXPECT_EQ(ClassifyTail(last, s, std::nullopt).verdict, TailVerdict::kTorn);
  EXPECT_EQ(ClassifyTail(last, s, uint64_t(seg.size())).verdict, TailVerdict::kCorrupt);
}

TEST(RecordFormat, ZerosAfterTheLastRecordArePreallocatedAndZerosInsideOneAreTorn) {
  auto seg = Segment(3, 20);
  auto zeros = seg;
  zeros.resize(seg.size() + 700, 0);
  auto s = ScanRecords(zeros, kSegmentHeaderBytes, 0, nullptr, nullptr);
  EXPECT_EQ(s.valid_end, seg.size());
  // From the record boundary at the mark (or past it, or with no mark): the log's end.
  auto d = ClassifyTail(zeros, s, uint64_t(seg.size()));
  EXPECT_EQ(d.verdict, TailVerdict::kPreallocated) << d.reason;
  EXPECT_EQ(ClassifyTail(zeros, s, std::nullopt).verdict, TailVerdict::kPreallocated);
  // Fewer zeros than a record header after the last record: the same.
  auto few = seg;
  few.resize(seg.size() + 7, 0);
  s = ScanRecords(few, kSegmentHeaderBytes, 0, nullptr, nullptr);
  EXPECT_EQ(ClassifyTail(few, s, uint64_t(seg.size())).verdict, TailVerdict::kPreallocated);
  // Zeros where the mark vouches for synced bytes: torn (as before preallocation existed).
  s = ScanRecords(zeros, kSegmentHeaderBytes, 0, nullptr, nullptr);
  d = ClassifyTail(zeros, s, uint64_t(seg.size() + 100));
  EXPECT_EQ(d.verdict, TailVerdict::kTorn) << d.reason;
  // Zeros from a 512-byte boundary inside a complete last record.
  auto big = Segment(1, 1500);
  for (size_t i = 1024; i < big.size(); ++i) big[i] = 0;
  s = ScanRecords(big, kSegmentHeaderBytes, 0, nullptr, nullptr);
  d = ClassifyTail(big, s, uint64_t(big.size()));
  EXPECT_EQ(d.verdict, TailVerdict::kTorn) << d.reason;
  // Zeros followed by garbage stay corrupt below the mark.
  auto garbage = zeros;
  garbage.back() = 1;
  s = ScanRecords(garbage, kSegmentHeaderBytes, 0, nullptr, nullptr);
  EXPECT_EQ(ClassifyTail(garbage, s, uint64_t(garbage.size())).verdict, TailVerdict::kCorrupt);
}

// The commit and publisher flags are the known record flags: they survive the header CRC and
// the scanner; any other bit is damage.
TEST(RecordFormat, CommitPublisherAndGenerationStartFlagsAreKnownAndOtherFlagsAreDamage) {
  for (uint32_t flags : {kRecordFlagCommit, kRecordFlagPublisher,
                         kRecordFlagCommit | kRecordFlagPublisher, kRecordFlagGenerationStart}) {
    auto seg = Segment(1);
    size_t at = seg.size();
    seg.resize(at + RecordBytes(3));
    EncodeRecord(seg.data() + at, 1, 7, 5, AsBytes("ab\001"), flags);
    RecordHeader h;
    ASSERT_TRUE(DecodeRecordHeader(seg.data() + at, &h));
    EXPECT_EQ(h.flags, flags);
    auto clean = ScanRecords(seg, kSegmentHeaderBytes, 0, nullptr, nullptr);
    EXPECT_EQ(clean.stop, ScanStop::kEnd) << flags;
    EXPECT_EQ(clean.records, 2u);
    EncodeRecord(seg.data() + at, 1, 7, 5, AsBytes("ab\001"), flags | 0x8);
    auto damaged = ScanRecords(seg, kSegmentHeaderBytes, 0, nullptr, nullptr);
    EXPECT_EQ(damaged.stop, ScanStop::kDamaged);
    EXPECT_EQ(damaged.records, 1u);
  }
}

// replication.md §17: the payload is the generation, u64 big-endian.
TEST(RecordFormat, GenerationStartPayloadIsTheGenerationBigEndian) {
  auto p = GenerationStartPayload(0x0102030405060708);
  EXPECT_EQ(std::vector<uint8_t>(p.begin(), p.end()),
            (std::vector<uint8_t>{1, 2, 3, 4, 5, 6, 7, 8}));
  EXPECT_EQ(GenerationStartOf(p), 0x0102030405060708u);
  EXPECT_EQ(GenerationStartOf(AsBytes("short")), std::nullopt);
}

std::string Text(std::span<const uint8_t> bytes) {
  return std::string(bytes.begin(), bytes.end());
}

// storage.md §3 bit 27: `payload ‖ publisher ‖ u8 len`; the payload is what readers see.
TEST(RecordFormat, PublisherTrailerRoundTripsAndEmptyPartsAreKept) {
  auto stored = WithPublisher(AsBytes("hi"), AsBytes("al"));
  EXPECT_EQ(Text(stored), std::string("hial\002"));  // the spec's golden body
  auto split = SplitPublisher(stored);
  ASSERT_TRUE(split);
  EXPECT_EQ(Text(split->payload), "hi");
  EXPECT_EQ(Text(split->publisher), "al");

  auto only_publisher = WithPublisher({}, AsBytes("p"));  // the spans view it
  auto empty_payload = SplitPublisher(only_publisher);
  ASSERT_TRUE(empty_payload);
  EXPECT_TRUE(empty_payload->payload.empty());
  EXPECT_EQ(Text(empty_payload->publisher), "p");

  std::string longest(kMaxPublisherBytes + 10, 'x');  // cut at 255
  auto cut_stored = WithPublisher(AsBytes("v"), AsBytes(longest));
  auto cut = SplitPublisher(cut_stored);
  ASSERT_TRUE(cut);
  EXPECT_EQ(Text(cut->payload), "v");
  EXPECT_EQ(cut->publisher.size(), kMaxPublisherBytes);
}

// A trailing length byte that claims more than the record holds is damage (RecordPublisher),
// never a shorter payload.
TEST(RecordFormat, PublisherTrailerLongerThanTheRecordIsRefused) {
  EXPECT_FALSE(SplitPublisher({}));
  std::vector<uint8_t> lying{'a', 'b', 3};  // says 3 publisher bytes, holds 2
  EXPECT_FALSE(SplitPublisher(lying));
  std::vector<uint8_t> exact{'a', 'b', 2};  // everything before the byte is the publisher
  auto split = SplitPublisher(exact);
  ASSERT_TRUE(split);
  EXPECT_TRUE(split->payload.empty());
  EXPECT_EQ(Text(split->publisher), "ab");
}

}  // namespace
}  // namespace felix::storage
