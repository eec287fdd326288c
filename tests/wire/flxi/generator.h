// Seeded generator of valid FLXI frames of every kind, for property tests. The generated
// frames view strings owned by the generator: keep it alive while the frames are used.
#pragma once

#include <algorithm>
#include <deque>
#include <random>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "wire/flxi/flxi.h"

namespace felix::wire::flxi::testing {

inline std::span<const uint8_t> AsSpan(const std::vector<uint8_t>& v) {
  return {v.data(), v.size()};
}

inline std::vector<uint8_t> FromHex(std::string_view hex) {
  std::vector<uint8_t> out;
  int high = -1;
  for (char c : hex) {
    int v = (c >= '0' && c <= '9')   ? c - '0'
            : (c >= 'a' && c <= 'f') ? c - 'a' + 10
            : (c >= 'A' && c <= 'F') ? c - 'A' + 10
                                     : -1;
    if (v < 0) continue;
    if (high < 0) {
      high = v;
    } else {
      out.push_back(static_cast<uint8_t>(high << 4 | v));
      high = -1;
    }
  }
  return out;
}

class FrameGenerator {
 public:
  // `large` lets fields reach their limits (512-byte strings, 16 KiB credentials, 512
  // generations); without it every frame stays small (for quadratic tests).
  explicit FrameGenerator(uint64_t seed, bool large = true) : rng_(seed), large_(large) {}

  uint64_t Below(uint64_t n) { return n == 0 ? 0 : rng_() % n; }
  bool Coin() { return rng_() & 1; }

  // Edge values often, random values otherwise.
  uint64_t U64() {
    switch (Below(6)) {
      case 0:
        return 0;
      case 1:
        return 1;
      case 2:
        return UINT64_MAX;
      case 3:
        return Below(1000);
      default:
        return rng_();
    }
  }
  uint32_t U32() { return static_cast<uint32_t>(Coin() ? Below(1000) : rng_()); }

  // Valid UTF-8 of at most `max` bytes: ASCII mixed with 2-, 3- and 4-byte characters.
  std::string_view Str(size_t max = kMaxIdentBytes) {
    static constexpr std::string_view kPieces[] = {"a", "Z", "-", ":", "0", "é", "世", "😀"};
    size_t target = large_ && Below(8) == 0 ? max : std::min<size_t>(max, Below(24));
    std::string s;
    while (s.size() < target) {
      auto piece = kPieces[Below(std::size(kPieces))];
      if (s.size() + piece.size() > target) {
        s.push_back('x');
        continue;
      }
      s.append(piece);
    }
    return Keep(std::move(s));
  }
  std::string_view Cred() {
    std::string_view s = Below(10) == 0 ? Str(kMaxCredentialBytes) : Str(64);
    return s.empty() ? Keep("tok") : s;
  }
  Bytes Blob() {
    std::string s(Below(4) == 0 ? 0 : Below(48), '\0');
    for (auto& c : s) c = static_cast<char>(rng_());
    return Keep(std::move(s));
  }
  std::vector<Bytes> Payloads() {
    std::vector<Bytes> out(Below(6));
    for (auto& p : out) p = Blob();
    return out;
  }
  ShardRef Shard() { return {Str(), Str(), Str(), U32(), U64()}; }
  ErrorCode Code() { return static_cast<ErrorCode>(1 + Below(11)); }
  ReplicaLog Log() { return static_cast<ReplicaLog>(1 + Below(5)); }

  RecordMark Mark() {
    RecordMark m;
    m.type = static_cast<MarkType>(Below(5));
    if (m.type == MarkType::kOpens) {
      m.producer_id = U64();
      m.sequence = U64();
      m.batch_len = U32();
    }
    if (Below(3) == 0) m.publisher = Str(Below(4) == 0 ? kMaxPublisherBytes : 16);
    return m;
  }

  Records MakeRecords(Kind kind) {
    Records m;
    m.correlation_id = U64();
    m.shard = Shard();
    m.first_offset = U64();
    m.payloads = Payloads();
    bool marks = kind == Kind::kReplicateMarkedRecords ||
                 kind == Kind::kReplicateCommittedRecords ||
                 kind == Kind::kReplicateLabelledRecords || kind == Kind::kReplicateTimedRecords;
    bool labelled = kind == Kind::kReplicateLabelledRecords || kind == Kind::kReplicateTimedRecords;
    if (marks) {
      for (size_t i = 0; i < m.payloads.size(); ++i) m.marks.push_back(Mark());
    }
    if (kind == Kind::kReplicateCommittedRecords || labelled) m.log = Log();
    if (kind == Kind::kReplicateCommittedRecords || (labelled && Coin())) m.commit_offset = U64();
    if (labelled) {
      m.generations.resize(large_ && Below(4) == 0 ? kMaxGenerations : Below(4));
      for (auto& g : m.generations) g = {U64(), U64()};
    }
    if (kind == Kind::kReplicateTimedRecords) {
      for (size_t i = 0; i < m.payloads.size(); ++i) m.times.push_back(U64());
    }
    m.checksum = Coin() ? BatchChecksum(m.payloads, m.marks) : U64();
    return m;
  }

  CacheOp MakeCacheOp(Kind kind) {
    CacheOp m;
    m.correlation_id = U64();
    m.shard = Shard();
    m.op = static_cast<CacheOpKind>(1 + Below(5));
    m.key = Str();
    m.ttl_ms = U64();
    m.value = m.op == CacheOpKind::kCounterAdd
                  ? Keep(EncodeCounterValue(static_cast<int64_t>(U64())))
                  : Blob();
    if (kind == Kind::kAuthorizedForwardCacheOp) m.credential = Cred();
    if (kind == Kind::kConditionalForwardCacheOp) {
      m.credential = Coin() ? std::string_view() : Cred();
      Condition c;
      c.type = static_cast<CacheCondition>(Below(3));
      if (c.type == CacheCondition::kVersion) c.version = U64();
      m.condition = c;
    }
    return m;
  }

  std::optional<Bytes> OptBlob() {
    if (Coin()) return std::nullopt;
    return Blob();
  }

  Frame Make(Kind kind) {
    Frame f;
    f.kind = kind;
    switch (kind) {
      case Kind::kForwardPublish:
      case Kind::kAuthorizedForwardPublish: {
        ForwardPublish m{U64(), Shard(), static_cast<AckMode>(Below(3)), Payloads(), {}};
        if (kind == Kind::kAuthorizedForwardPublish) m.credential = Cred();
        f.body = m;
        break;
      }
      case Kind::kForwardPublishOk:
        f.body = ForwardPublishOk{U64(), U64(), U64()};
        break;
      case Kind::kForwardPublishError:
      case Kind::kForwardCacheError:
        f.body = ErrorAnswer{U64(), Code(), Str()};
        break;
      case Kind::kNotLeader:
        f.body = NotLeader{U64(), Str(), Str(), U64()};
        break;
      case Kind::kHello:
      case Kind::kHelloOk:
        f.body = Hello{U64(), Str(), std::nullopt};
        break;
      case Kind::kHelloCapable:
      case Kind::kHelloCapableOk:
        f.body = Hello{U64(), Str(), U64()};
        break;
      case Kind::kReplicateRecords:
      case Kind::kReplicateCacheRecords:
      case Kind::kReplicateGroupRecords:
      case Kind::kReplicateDeadLetterRecords:
      case Kind::kReplicateCounterRecords:
      case Kind::kReplicateMarkedRecords:
      case Kind::kReplicateCommittedRecords:
      case Kind::kReplicateLabelledRecords:
      case Kind::kReplicateTimedRecords:
        f.body = MakeRecords(kind);
        break;
      case Kind::kReplicateOk:
        f.body = ReplicateOk{U64(), U64()};
        break;
      case Kind::kReplicateError:
        f.body = ReplicateError{U64(), Code(), U64(), Str()};
        break;
      case Kind::kReplicateBootstrap:
      case Kind::kReplicateCacheBootstrap:
      case Kind::kReplicateGroupBootstrap:
      case Kind::kReplicateDeadLetterBootstrap:
      case Kind::kReplicateCounterBootstrap:
        f.body = Bootstrap{U64(), Shard(), U64()};
        break;
      case Kind::kForwardCacheOp:
      case Kind::kAuthorizedForwardCacheOp:
      case Kind::kConditionalForwardCacheOp:
        f.body = MakeCacheOp(kind);
        break;
      case Kind::kForwardCacheOk:
        f.body = ForwardCacheOk{U64(), OptBlob()};
        break;
      case Kind::kReplicateRebuild:
        f.body = Rebuild{U64(), Shard(), Log(), U64()};
        break;
      case Kind::kFence:
        f.body = Fence{U64(), Shard(), Log()};
        break;
      case Kind::kFenceOk:
        f.body = FenceOk{U64(), U64(), U64(), U64()};
        break;
      case Kind::kReplicateFetch:
      case Kind::kReplicateLabelledFetch:
      case Kind::kReplicateTimedFetch:
        f.body = Fetch{U64(), Shard(), Log(), U64(), U32()};
        break;
      case Kind::kConditionalForwardCacheOk: {
        ConditionalCacheOk m{U64(), Coin(), std::nullopt, OptBlob()};
        if (Coin()) m.version = U64();
        f.body = m;
        break;
      }
      case Kind::kPing:
      case Kind::kPong:
        f.body = PingPong{U64()};
        break;
    }
    return f;
  }

 private:
  std::string_view Keep(std::string s) {
    arena_.push_back(std::move(s));
    return arena_.back();
  }

  std::mt19937_64 rng_;
  bool large_;
  std::deque<std::string> arena_;
};

inline std::vector<Kind> AllKinds() {
  std::vector<Kind> out;
  for (uint16_t k = 1; k <= kMaxKnownKind; ++k) out.push_back(static_cast<Kind>(k));
  return out;
}

}  // namespace felix::wire::flxi::testing
