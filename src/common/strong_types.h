// Strong types for the numbers that must never be mixed up across subsystem interfaces: a
// shard's leadership generation and a log offset are both u64 on the wire and on disk, but
// passing one where the other is expected is a bug the compiler should catch (the style of
// Redpanda's model::term_id / model::offset).
//
// Value types, any thread. `value()` is the escape hatch for encoders and arithmetic at the
// edges (wire, storage formats, metrics, logs).
#pragma once

#include <compare>
#include <cstdint>
#include <functional>
#include <optional>
#include <ostream>
#include <string>

#include <fmt/format.h>

namespace felix {

template <typename Tag>
class StrongU64 {
 public:
  constexpr StrongU64() = default;
  constexpr explicit StrongU64(uint64_t value) : value_(value) {}
  constexpr uint64_t value() const { return value_; }
  constexpr auto operator<=>(const StrongU64&) const = default;
  // The next one (generations rise by exactly 1; offsets by one record).
  constexpr StrongU64 next() const { return StrongU64(value_ + 1); }

 private:
  uint64_t value_ = 0;
};

template <typename Tag>
std::ostream& operator<<(std::ostream& out, StrongU64<Tag> v) {
  return out << v.value();
}

// Decimal, as messages and logs print the plain number.
template <typename Tag>
std::string to_string(StrongU64<Tag> v) {
  return std::to_string(v.value());
}

// The plain number of an optional one (wire structs carry optional u64s).
template <typename Tag>
std::optional<uint64_t> ValueOf(const std::optional<StrongU64<Tag>>& v) {
  return v ? std::optional<uint64_t>(v->value()) : std::nullopt;
}

// A shard's leadership generation (cluster-etcd.md D2): raised by exactly 1 per assignment
// write; 0 on a single node.
using Generation = StrongU64<struct GenerationTag>;
// A record's position in a shard log. Unlike generations, offsets count: an offset moves by a
// number of records, and two offsets of one log are a number of records apart. Nothing else
// mixes (no Offset + Offset, no Offset + Generation).
using Offset = StrongU64<struct OffsetTag>;

constexpr Offset operator+(Offset at, uint64_t records) {
  return Offset(at.value() + records);
}
constexpr Offset operator-(Offset at, uint64_t records) {
  return Offset(at.value() - records);
}
// Records from `from` up to (not including) `to`; `to` must not be below `from`.
constexpr uint64_t operator-(Offset to, Offset from) {
  return to.value() - from.value();
}
constexpr Offset& operator+=(Offset& at, uint64_t records) {
  return at = at + records;
}
constexpr Offset& operator-=(Offset& at, uint64_t records) {
  return at = at - records;
}
constexpr Offset& operator++(Offset& at) {
  return at += 1;
}
constexpr Offset operator++(Offset& at, int) {
  const Offset before = at;
  at += 1;
  return before;
}

}  // namespace felix

template <typename Tag>
struct fmt::formatter<felix::StrongU64<Tag>> : fmt::formatter<uint64_t> {
  template <typename FormatContext>
  auto format(felix::StrongU64<Tag> v, FormatContext& ctx) const {
    return fmt::formatter<uint64_t>::format(v.value(), ctx);
  }
};

template <typename Tag>
struct std::hash<felix::StrongU64<Tag>> {
  size_t operator()(felix::StrongU64<Tag> v) const noexcept {
    return std::hash<uint64_t>{}(v.value());
  }
};
