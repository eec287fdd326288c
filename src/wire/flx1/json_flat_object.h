// FlatJsonObject: a JSON object whose members are all plain scalars, scanned in place.
//
// Most requests on the hot path — auth, group and cache requests and their answers — are one
// object of strings and integers. The full parser (nlohmann) builds a document of them first,
// copying every string character by character; this scanner only finds where each member's
// key and value lie in the text. It accepts a strict subset of JSON and refuses (nullopt)
// everything else, so whatever it accepts the full parser reads the same way:
//   - one object, whitespace around tokens, at most kMaxMembers members, no key twice;
//   - keys and string values without escapes or control characters (valid UTF-8 is the
//     caller's check, done on the whole payload before);
//   - numbers that are non-negative integers without a leading zero, fraction or exponent,
//     within u64;
//   - true, false, null.
// Nested objects and arrays, escapes, negative or non-integer numbers: refused, and the caller
// parses the text fully. Views point into the scanned text, which must outlive the object.
// Stateless apart from the object itself; thread-compatible.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace felix::wire::flx1 {

struct FlatJsonValue {
  enum class Kind : uint8_t { kString, kUnsigned, kTrue, kFalse, kNull };
  Kind kind = Kind::kNull;
  std::string_view text;  // kString: the characters between the quotes
  uint64_t number = 0;    // kUnsigned
};

class FlatJsonObject {
 public:
  static constexpr size_t kMaxMembers = 24;

  static std::optional<FlatJsonObject> Scan(std::string_view text);

  // The member named `key`, or nullptr.
  const FlatJsonValue* Find(std::string_view key) const;
  size_t size() const { return size_; }

 private:
  struct Member {
    std::string_view key;
    FlatJsonValue value;
  };
  std::array<Member, kMaxMembers> members_{};
  size_t size_ = 0;
};

}  // namespace felix::wire::flx1
