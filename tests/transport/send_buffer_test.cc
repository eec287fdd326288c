#include "transport/send_buffer.h"

#include <gtest/gtest.h>

#include <array>
#include <cstdint>
#include <numeric>
#include <vector>

namespace felix::transport {
namespace {

std::vector<uint8_t> Pattern(size_t n, uint8_t seed) {
  std::vector<uint8_t> bytes(n);
  std::iota(bytes.begin(), bytes.end(), seed);
  return bytes;
}

// Every unsent byte, in order, as Peek hands them out (up to 16 spans, as the endpoint asks).
std::vector<uint8_t> Unsent(const SendBuffer& buffer) {
  std::array<std::span<const uint8_t>, 16> spans;
  const size_t count = buffer.Peek(spans);
  std::vector<uint8_t> out;
  for (size_t i = 0; i < count; ++i) out.insert(out.end(), spans[i].begin(), spans[i].end());
  return out;
}

TEST(SendBuffer, AShortStreamHoldsOneSmallChunkAndNoneOnceAcknowledged) {
  SendBuffer buffer;
  const std::vector<uint8_t> request = Pattern(300, 7);  // an auth and one group request
  buffer.Append(request.data(), request.size());
  EXPECT_EQ(buffer.chunk_count(), 1u);
  EXPECT_EQ(buffer.capacity(), SendBuffer::kMinChunk);
  EXPECT_EQ(Unsent(buffer), request);

  buffer.Sent(request.size());
  EXPECT_EQ(buffer.unsent(), 0u);
  EXPECT_EQ(buffer.unacked(), request.size());
  buffer.Acked(request.size());
  EXPECT_EQ(buffer.unacked(), 0u);
  EXPECT_EQ(buffer.capacity(), 0u);
}

TEST(SendBuffer, AFirstWriteUnderOneKilobyteGetsAChunkOfItsOwnSize) {
  SendBuffer buffer;
  const std::vector<uint8_t> request = Pattern(900, 3);  // a long token's `auth` and a request
  buffer.Append(request.data(), request.size());
  EXPECT_EQ(buffer.chunk_count(), 1u);
  EXPECT_EQ(buffer.capacity(), request.size());  // not rounded up to 1 KiB (a large-bin size)
  EXPECT_EQ(Unsent(buffer), request);
}

TEST(SendBuffer, ChunksGrowWithTheBurstUpToTheMaximumAndKeepEveryByteInOrder) {
  SendBuffer buffer;
  std::vector<uint8_t> written;
  // Frames of assorted sizes, some larger than a chunk, none acknowledged yet.
  for (size_t i = 0; i < 40; ++i) {
    const std::vector<uint8_t> frame = Pattern(i % 7 == 0 ? 70000 : 900 + 37 * i, uint8_t(i));
    buffer.Append(frame.data(), frame.size());
    written.insert(written.end(), frame.begin(), frame.end());
  }
  EXPECT_EQ(buffer.unsent(), written.size());
  // Capacity stays within twice what is held plus the smallest chunk: growth is geometric.
  EXPECT_LE(buffer.capacity(), 2 * written.size() + SendBuffer::kMinChunk);

  // Send it in pieces that end inside chunks; what Peek returns always continues the stream.
  std::vector<uint8_t> sent;
  while (buffer.unsent() > 0) {
    std::vector<uint8_t> next = Unsent(buffer);
    ASSERT_FALSE(next.empty());
    const size_t n = std::min<size_t>(next.size(), 5000);
    sent.insert(sent.end(), next.begin(), next.begin() + long(n));
    buffer.Sent(n);
  }
  EXPECT_EQ(sent, written);

  // Acknowledgements free whole chunks from the front; a lower one than before changes nothing.
  const size_t before = buffer.chunk_count();
  buffer.Acked(written.size() / 2);
  EXPECT_LT(buffer.chunk_count(), before);
  EXPECT_EQ(buffer.unacked(), written.size() - written.size() / 2);
  buffer.Acked(10);
  EXPECT_EQ(buffer.unacked(), written.size() - written.size() / 2);
  buffer.Acked(written.size());
  EXPECT_EQ(buffer.chunk_count(), 0u);
}

TEST(SendBuffer, WritesAfterItDrainedContinueTheStreamFromASmallChunk) {
  SendBuffer buffer;
  const std::vector<uint8_t> first = Pattern(100000, 1);
  buffer.Append(first.data(), first.size());
  buffer.Sent(first.size());
  buffer.Acked(first.size());

  const std::vector<uint8_t> second = Pattern(200, 9);
  buffer.Append(second.data(), second.size());
  EXPECT_EQ(buffer.capacity(), SendBuffer::kMinChunk);
  EXPECT_EQ(Unsent(buffer), second);
  buffer.Sent(second.size());
  buffer.Acked(first.size() + 100);  // stream offsets continue across the drain
  EXPECT_EQ(buffer.unacked(), 100u);
}

// Largest chunks freed on acknowledgement go to the endpoint's pool and come back for the next
// burst with their bytes rewritten in order (change 56); so do the smallest, a short stream's
// one chunk (change 66); sizes between are freed as before. The pool keeps at most kMaxChunks
// large and kMaxSmallChunks small ones, and frees them all once an idle period passed with none
// taken.
TEST(SendBuffer, LargestChunksGoBackToThePoolAndServeTheNextBurst) {
  static uint64_t now;  // the pool's clock: a plain function pointer, so not a capture
  now = 0;              // each run from zero (gtest_repeat)
  ChunkPool pool([] { return now; });
  SendBuffer buffer;
  const std::vector<uint8_t> request = Pattern(300, 5);  // a first chunk of kMinChunk
  const std::vector<uint8_t> burst = Pattern(5 * SendBuffer::kMaxChunk, 3);
  buffer.Append(request.data(), request.size(), &pool);
  buffer.Append(burst.data(), burst.size(), &pool);
  const size_t largest = buffer.chunk_count() - 1;
  EXPECT_EQ(largest, 5u);
  EXPECT_EQ(pool.size(), 0u);
  buffer.Sent(request.size() + burst.size());
  buffer.Acked(request.size() + burst.size(), &pool);
  EXPECT_EQ(buffer.chunk_count(), 0u);
  EXPECT_EQ(pool.size(), largest);
  EXPECT_EQ(pool.small_size(), 1u);  // the request's chunk
  EXPECT_EQ(pool.ReleaseAt(), ChunkPool::kIdleNs);

  const std::vector<uint8_t> next = Pattern(3 * SendBuffer::kMaxChunk + 100, 11);
  buffer.Append(next.data(), next.size(), &pool);
  EXPECT_EQ(Unsent(buffer), next);
  EXPECT_LT(pool.size(), largest);   // taken, not allocated anew
  EXPECT_EQ(pool.small_size(), 1u);  // a burst starts with a chunk of its size, not a small one

  // Taken within the idle period: kept another one; then freed once none is taken.
  now = pool.ReleaseAt();
  pool.Expire(now);
  EXPECT_GT(pool.size(), 0u);
  now = pool.ReleaseAt();
  pool.Expire(now);
  EXPECT_EQ(pool.size(), 0u);
  EXPECT_EQ(pool.ReleaseAt(), UINT64_MAX);

  for (size_t i = 0; i < ChunkPool::kMaxChunks + 5; ++i)
    pool.Give(std::make_unique<uint8_t[]>(SendBuffer::kMaxChunk), SendBuffer::kMaxChunk);
  EXPECT_EQ(pool.size(), ChunkPool::kMaxChunks);
  for (size_t i = 0; i < ChunkPool::kMaxSmallChunks + 5; ++i)
    pool.Give(std::make_unique<uint8_t[]>(SendBuffer::kMinChunk), SendBuffer::kMinChunk);
  EXPECT_EQ(pool.small_size(), ChunkPool::kMaxSmallChunks);
  pool.Give(std::make_unique<uint8_t[]>(1000), 1000);  // a size not kept
  EXPECT_EQ(pool.size() + pool.small_size(), ChunkPool::kMaxChunks + ChunkPool::kMaxSmallChunks);
  EXPECT_EQ(pool.Take(1000), nullptr);
}

// Short streams, one after another, each write their answer into a small chunk the last one
// gave back: after the first, no chunk is allocated (the same block serves every stream).
TEST(SendBuffer, ShortStreamsReuseOneSmallChunk) {
  static uint64_t now = 0;
  ChunkPool pool([] { return now; });
  const std::vector<uint8_t> answer = Pattern(200, 9);
  const uint8_t* first_block = nullptr;
  for (int stream = 0; stream < 5; ++stream) {
    SendBuffer buffer;
    buffer.Append(answer.data(), answer.size(), &pool);
    std::array<std::span<const uint8_t>, 4> spans;
    ASSERT_EQ(buffer.Peek(spans), 1u);
    ASSERT_EQ(std::vector<uint8_t>(spans[0].begin(), spans[0].end()), answer);
    if (stream == 0) first_block = spans[0].data();
    EXPECT_EQ(spans[0].data(), first_block);
    buffer.Sent(answer.size());
    buffer.Acked(answer.size(), &pool);
    EXPECT_EQ(pool.small_size(), 1u);
  }
}

// Adopted buffers (Stream::WriteOwned, change 61) take their place in the stream between copied
// bytes without a copy: a partly filled chunk before one ends there, bytes appended after one
// start a new chunk, and each goes back through `returned` — as written — only once every byte
// of it is acknowledged, oldest first; never into the chunk pool.
TEST(SendBuffer, AdoptedBuffersKeepTheirPlaceAndComeBackOnceAcknowledged) {
  static uint64_t now = 0;
  ChunkPool pool([] { return now; });
  SendBuffer buffer;
  std::vector<uint8_t> written;
  auto append = [&](size_t n, uint8_t seed) {
    const std::vector<uint8_t> bytes = Pattern(n, seed);
    buffer.Append(bytes.data(), bytes.size(), &pool);
    written.insert(written.end(), bytes.begin(), bytes.end());
  };
  std::vector<std::vector<uint8_t>> adopted;
  auto adopt = [&](size_t n, uint8_t seed) {
    std::vector<uint8_t> bytes = Pattern(n, seed);
    bytes.reserve(2 * n);
    written.insert(written.end(), bytes.begin(), bytes.end());
    adopted.push_back(bytes);
    const uint8_t* at = bytes.data();
    buffer.Adopt(std::move(bytes));
    return at;
  };
  append(300, 1);  // a chunk of kMinChunk, partly filled
  const uint8_t* first = adopt(5000, 2);
  append(100, 3);  // after an adopted buffer: a chunk of its own
  adopt(SendBuffer::kMaxChunk, 4);
  adopt(7, 5);  // two adopted in a row
  append(70000, 6);
  EXPECT_EQ(buffer.unsent(), written.size());

  std::vector<uint8_t> sent;
  bool saw_first = false;
  while (buffer.unsent() > 0) {
    std::array<std::span<const uint8_t>, 16> spans;
    const size_t count = buffer.Peek(spans);
    ASSERT_GT(count, 0u);
    saw_first = saw_first || spans[0].data() == first;  // the adopted bytes themselves, sent
    const size_t n = std::min<size_t>(spans[0].size(), 3000);
    sent.insert(sent.end(), spans[0].begin(), spans[0].begin() + long(n));
    buffer.Sent(n);
  }
  EXPECT_EQ(sent, written);
  EXPECT_TRUE(saw_first);

  std::vector<std::vector<uint8_t>> back;
  const SendBuffer::Returned returned = [&](std::vector<uint8_t> b) { back.push_back(b); };
  buffer.Acked(300 + 4999, &pool, &returned);  // all but the first adopted buffer's last byte
  EXPECT_TRUE(back.empty());
  buffer.Acked(300 + 5000, &pool, &returned);
  ASSERT_EQ(back.size(), 1u);
  EXPECT_EQ(back[0], adopted[0]);
  buffer.Acked(written.size() - 1, &pool, &returned);
  ASSERT_EQ(back.size(), 3u);
  EXPECT_EQ(back[1], adopted[1]);
  EXPECT_EQ(back[2], adopted[2]);
  buffer.Acked(written.size(), &pool, &returned);
  EXPECT_EQ(back.size(), 3u);
  EXPECT_EQ(buffer.chunk_count(), 0u);
  EXPECT_EQ(pool.size(), 2u);  // the two 64 KiB chunks the 70,000 bytes took; no adopted buffer

  // Without `returned` an acknowledged adopted buffer is freed.
  adopt(1000, 7);
  buffer.Sent(1000);
  buffer.Acked(written.size(), &pool, nullptr);
  EXPECT_EQ(buffer.chunk_count(), 0u);
}

}  // namespace
}  // namespace felix::transport
