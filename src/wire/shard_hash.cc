#include "wire/shard_hash.h"

namespace felix::wire {

uint64_t Fnv1a64(std::span<const uint8_t> bytes) {
  uint64_t h = kFnvOffset;
  for (uint8_t b : bytes) {
    h ^= b;
    h *= kFnvPrime;
  }
  return h;
}

uint64_t Fnv1a64(std::string_view bytes) {
  return Fnv1a64(
      std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()));
}

uint64_t FinalizeHash(uint64_t h) {
  h ^= h >> 30;
  h *= 0xbf58476d1ce4e5b9ull;
  h ^= h >> 27;
  h *= 0x94d049bb133111ebull;
  return h ^ (h >> 31);
}

int64_t JumpHash(uint64_t key, int64_t buckets) {
  int64_t b = -1;
  int64_t j = 0;
  while (j < buckets) {
    b = j;
    key = key * 2862933555777941757ull + 1;
    j = static_cast<int64_t>(static_cast<double>(b + 1) * (static_cast<double>(int64_t{1} << 31) /
                                                           static_cast<double>((key >> 33) + 1)));
  }
  return b;
}

uint32_t ShardModulo(uint32_t shard_count, std::optional<std::string_view> key) {
  if (shard_count <= 1 || !key) return 0;
  return static_cast<uint32_t>(FinalizeHash(Fnv1a64(*key)) % shard_count);
}

uint32_t ShardJump(uint32_t shard_count, std::optional<std::string_view> key) {
  if (shard_count <= 1 || !key) return 0;
  return static_cast<uint32_t>(JumpHash(FinalizeHash(Fnv1a64(*key)), shard_count));
}

}  // namespace felix::wire
