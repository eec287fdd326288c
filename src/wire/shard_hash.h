// The frozen shard hash (semantics.md §4.2): which shard of an N-shard stream or cache a
// routing key belongs to. Every broker and client must compute it identically, so it never
// depends on a language's built-in hash. Pure functions; any thread may call them.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string_view>

namespace felix::wire {

inline constexpr uint64_t kFnvOffset = 0xcbf29ce484222325ull;
inline constexpr uint64_t kFnvPrime = 0x00000100000001b3ull;

// 64-bit FNV-1a.
uint64_t Fnv1a64(std::span<const uint8_t> bytes);
uint64_t Fnv1a64(std::string_view bytes);

// splitmix64-style finalizer.
uint64_t FinalizeHash(uint64_t h);

// Lamping & Veach jump consistent hash, exactly as published (signed 64-bit, double math).
// Returns a bucket in [0, buckets) for buckets >= 1, and -1 for buckets <= 0.
int64_t JumpHash(uint64_t key, int64_t buckets);

// The two mappings. No key (nullopt) or N <= 1 → shard 0. An empty key is a key.
uint32_t ShardModulo(uint32_t shard_count, std::optional<std::string_view> key);
uint32_t ShardJump(uint32_t shard_count, std::optional<std::string_view> key);

}  // namespace felix::wire
