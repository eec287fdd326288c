// FrameReader (stream splitting on the wire library's envelope) and the peer frame helpers.
#include "cluster/frame_reader.h"

#include <gtest/gtest.h>

#include "cluster/peer_frames.h"
#include "wire/flxi/flxi.h"

namespace felix::cluster {
namespace {

namespace flxi = wire::flxi;

TEST(FrameReaderTest, SplitsAcrossAnyChunking) {
  std::vector<uint8_t> stream;
  for (uint16_t k = 1; k <= 20; ++k) {
    std::vector<uint8_t> rest(k * 37, uint8_t(k));
    auto f = RawFrame(k, k, rest);
    stream.insert(stream.end(), f.begin(), f.end());
  }
  // An empty body (header only) and an unknown kind are still frames.
  const uint8_t empty[] = {'F', 'L', 'X', 'I', 0, 1, 0, 7, 0, 0, 0, 0};
  stream.insert(stream.end(), std::begin(empty), std::end(empty));
  auto unknown = RawFrame(4000, 99, std::vector<uint8_t>{1, 2, 3});
  stream.insert(stream.end(), unknown.begin(), unknown.end());
  for (size_t chunk : {size_t(1), size_t(5), size_t(12), size_t(13), size_t(100), stream.size()}) {
    FrameReader reader;
    std::vector<std::pair<uint16_t, size_t>> got;
    for (size_t off = 0; off < stream.size(); off += chunk) {
      auto part =
          std::span<const uint8_t>(stream).subspan(off, std::min(chunk, stream.size() - off));
      auto err = reader.Feed(part, [&](uint16_t kind, std::span<const uint8_t> body) {
        got.emplace_back(kind, body.size());
        if (kind <= 20 && !body.empty()) {
          EXPECT_EQ(flxi::CorrelationIdOfBody(body), kind);
        }
      });
      ASSERT_FALSE(err.has_value()) << err->ToString();
    }
    ASSERT_EQ(got.size(), 22u) << chunk;
    EXPECT_EQ(got[4], std::make_pair(uint16_t(5), size_t(8 + 5 * 37)));
    EXPECT_EQ(got[20], std::make_pair(uint16_t(7), size_t(0)));
    EXPECT_EQ(got[21], std::make_pair(uint16_t(4000), size_t(11)));
    EXPECT_EQ(reader.buffered(), 0u);
  }
}

TEST(FrameReaderTest, FatalHeadersAreTheEnvelopeDecodersErrors) {
  using wire::DecodeErrorCode;
  auto feed = [](std::vector<uint8_t> bytes) -> std::optional<DecodeErrorCode> {
    FrameReader r;
    auto err = r.Feed(bytes, [](uint16_t, std::span<const uint8_t>) {});
    if (!err) return std::nullopt;
    return err->code;
  };
  EXPECT_EQ(feed({'F', 'L', 'X', '1', 0, 1, 0, 1, 0, 0, 0, 0}), DecodeErrorCode::kBadMagic);
  EXPECT_EQ(feed({'F', 'L', 'X', 'I', 0, 2, 0, 1, 0, 0, 0, 0}), DecodeErrorCode::kBadVersion);
  EXPECT_EQ(feed({'F', 'L', 'X', 'I', 0, 1, 0, 1, 0x04, 0, 0, 1}), DecodeErrorCode::kFrameTooLarge);
  // 64 MiB exactly is allowed (waits for the body).
  EXPECT_EQ(feed({'F', 'L', 'X', 'I', 0, 1, 0, 1, 0x04, 0, 0, 0}), std::nullopt);
  // Sticky.
  FrameReader r;
  std::vector<uint8_t> bad = {'X', 'L', 'X', 'I', 0, 1, 0, 1, 0, 0, 0, 0};
  EXPECT_TRUE(r.Feed(bad, [](uint16_t, std::span<const uint8_t>) {}).has_value());
  auto good = RawFrame(1, 1, {});
  EXPECT_TRUE(r.Feed(good, [](uint16_t, std::span<const uint8_t>) { FAIL(); }).has_value());
}

TEST(PeerFramesTest, RefusalsTakeTheShapeOfTheRequest) {
  EXPECT_EQ(RefusalKind(uint16_t(flxi::Kind::kForwardPublish)), flxi::Kind::kForwardPublishError);
  EXPECT_EQ(RefusalKind(uint16_t(flxi::Kind::kAuthorizedForwardCacheOp)),
            flxi::Kind::kForwardCacheError);
  EXPECT_EQ(RefusalKind(uint16_t(flxi::Kind::kConditionalForwardCacheOp)),
            flxi::Kind::kForwardCacheError);
  EXPECT_EQ(RefusalKind(uint16_t(flxi::Kind::kReplicateTimedRecords)), flxi::Kind::kReplicateError);
  EXPECT_EQ(RefusalKind(uint16_t(flxi::Kind::kFence)), flxi::Kind::kReplicateError);
  EXPECT_EQ(RefusalKind(uint16_t(flxi::Kind::kPing)), flxi::Kind::kForwardPublishError);
  EXPECT_EQ(RefusalKind(4000), flxi::Kind::kForwardPublishError);

  auto r = Refusal(uint16_t(flxi::Kind::kReplicateRecords), 42, flxi::ErrorCode::kMalformed, "x");
  EXPECT_EQ(r.kind, flxi::Kind::kReplicateError);
  EXPECT_EQ(std::get<flxi::ReplicateError>(r.body).expected_offset, 0u);
}

TEST(PeerFramesTest, UnsupportedKindRefusalIsTheSpecFrame) {
  auto ours = EncodeWithCorrelation(
      Refusal(40, 0, flxi::ErrorCode::kUnsupportedKind, flxi::UnsupportedKindDetail(40)), 42);
  ASSERT_TRUE(ours.has_value());
  std::vector<uint8_t> body(8, 0);
  body[7] = 42;
  EXPECT_EQ(*ours, flxi::EncodeUnsupportedKindAnswer(40, body));
  auto text = DescribeRefusal(3, std::span<const uint8_t>(*ours).subspan(flxi::kHeaderBytes));
  EXPECT_EQ(text, "UnsupportedKind (code 11): this broker does not know frame kind 40");
}

TEST(PeerFramesTest, LongDetailIsCutAtACharacterBoundaryAndStillEncodes) {
  std::string detail(flxi::kMaxIdentBytes - 1, 'a');
  detail += "\xC3\xA9 and more";  // "é" straddles the 512-byte limit
  auto bytes = EncodeWithCorrelation(Refusal(1, 7, flxi::ErrorCode::kUnavailable, detail), 7);
  ASSERT_TRUE(bytes.has_value()) << bytes.error().message;
  auto back = flxi::DecodeFrame(*bytes);
  ASSERT_TRUE(back.has_value());
  const auto& e = std::get<flxi::ErrorAnswer>(back->body);
  EXPECT_EQ(e.detail, std::string(flxi::kMaxIdentBytes - 1, 'a'));
  EXPECT_EQ(e.correlation_id, 7u);
}

TEST(PeerFramesTest, TheCorrelationIdIsTheFirstEightBodyBytes) {
  auto bytes = EncodeWithCorrelation(flxi::Frame{flxi::Kind::kPing, flxi::PingPong{}}, 0);
  ASSERT_TRUE(bytes.has_value());
  SetCorrelationId(*bytes, 0x0102030405060708ull);
  auto back = flxi::DecodeFrame(*bytes);
  ASSERT_TRUE(back.has_value());
  EXPECT_EQ(flxi::CorrelationId(*back), 0x0102030405060708ull);
  EXPECT_EQ(DescribeRefusal(uint16_t(flxi::Kind::kPing),
                            std::span<const uint8_t>(*bytes).subspan(flxi::kHeaderBytes)),
            std::nullopt);
}

}  // namespace
}  // namespace felix::cluster
