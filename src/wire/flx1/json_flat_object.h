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
//   - a member's value may also be an array of such objects (one level: their members are
//     scalars), the shape of every answer that carries records (`group_records`,
//     `stream_records`); FlatJsonArrayReader walks its elements.
// Other nesting, escapes, negative or non-integer numbers: refused, and the caller parses the
// text fully. Views point into the scanned text, which must outlive the object.
// Stateless apart from the object itself; thread-compatible.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <new>
#include <optional>
#include <string_view>

namespace felix::wire::flx1 {

struct FlatJsonValue {
  enum class Kind : uint8_t { kString, kUnsigned, kTrue, kFalse, kNull, kArray };
  Kind kind = Kind::kNull;
  std::string_view text;  // kString: the characters between the quotes; kArray: "[ … ]"
  uint64_t number = 0;    // kUnsigned; kArray: how many objects it holds
};

class FlatJsonObject {
 public:
  static constexpr size_t kMaxMembers = 24;

  // User-provided, so that value-initialisation (`std::optional`'s in-place construction) does
  // not zero the member slots first (see MemberSlot).
  FlatJsonObject() {}  // NOLINT(modernize-use-equals-default)

  static std::optional<FlatJsonObject> Scan(std::string_view text);

  // The member named `key`, or nullptr.
  const FlatJsonValue* Find(std::string_view key) const;
  size_t size() const { return size_; }

 private:
  friend class FlatJsonArrayReader;
  // Scans one object at `at` in `text` into *this (array members only when allow_arrays) and
  // moves `at` past it; false when the text there is not in the subset. `checked`: the text
  // was accepted by a scan before (an array's element read again), so string bodies are not
  // checked for escapes and control bytes a second time.
  bool ScanAt(std::string_view text, size_t& at, bool allow_arrays, bool checked = false);

  struct Member {
    std::string_view key;
    FlatJsonValue value;
  };
  // Left uninitialised until ScanAt constructs a member there: zeroing all 24 (over a
  // kilobyte) for the handful a request has was a tenth of its decode. Only the first size_
  // are ever read.
  union MemberSlot {
    MemberSlot() {}  // NOLINT(modernize-use-equals-default): must not initialise `member`
    Member member;
  };
  std::array<MemberSlot, kMaxMembers> members_;
  size_t size_ = 0;
};

// The elements of an array value Scan accepted (FlatJsonValue::Kind::kArray), in order. The
// value must come from Scan: its elements were checked there and are not checked again (each
// is scanned twice — for the count that bounds the caller's allocation, then to be read — and
// the second check of every payload's characters was an eighth of a poll answer's decode).
class FlatJsonArrayReader {
 public:
  explicit FlatJsonArrayReader(const FlatJsonValue& array) : text_(array.text) {}
  // Scans the next element into `out`; false after the last one.
  bool Next(FlatJsonObject& out);

 private:
  std::string_view text_;
  size_t at_ = 0;
};

}  // namespace felix::wire::flx1
