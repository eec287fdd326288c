#include "wire/flx1/json_flat_object.h"

#include <cstdint>
#include <cstring>

namespace felix::wire::flx1 {

namespace {

// True when none of the n bytes at p is a control character (below 0x20) or a backslash: a
// string body the scanner can hand out as it stands. Eight bytes at a time, because the byte
// loop is not vectorised at -O2 and the bodies are long (base64 payloads of `group_records`,
// tokens). Per 64-bit word w, "some byte below 0x20" is (w - 0x20…20) & ~w & 0x80…80 and "some
// byte equal to '\\'" the same test for a zero byte of w ^ 0x5c…5c; both are exact as
// existence tests (a borrow only reaches bytes above one that already matched), and bytes of
// 0x80 and above (UTF-8) match neither.
bool IsPlainStringBody(const char* p, size_t n) {
  constexpr uint64_t kOnes = 0x0101010101010101ULL;
  constexpr uint64_t kHighBits = 0x8080808080808080ULL;
  uint64_t found = 0;
  size_t i = 0;
  for (; i + sizeof(uint64_t) <= n; i += sizeof(uint64_t)) {
    uint64_t word;
    std::memcpy(&word, p + i, sizeof word);
    const uint64_t below_space = (word - kOnes * 0x20) & ~word & kHighBits;
    const uint64_t backslash_zeroed = word ^ (kOnes * '\\');
    const uint64_t backslash = (backslash_zeroed - kOnes) & ~backslash_zeroed & kHighBits;
    found |= below_space | backslash;
  }
  for (; i < n; ++i) {
    const auto c = static_cast<unsigned char>(p[i]);
    found |= static_cast<uint64_t>((c < 0x20) | (c == '\\'));
  }
  return found == 0;
}

// Reads the JSON text left to right; every method returns false on anything outside the
// subset the header names.
class FlatScanner {
 public:
  // `checked`: the text was scanned (and its string bodies checked) before — an array's
  // elements, read again by FlatJsonArrayReader — so strings need only their closing quote.
  FlatScanner(std::string_view text, size_t at, bool checked = false)
      : text_(text), at_(at), checked_(checked) {}

  size_t at() const { return at_; }
  void Seek(size_t at) { at_ = at; }

  void SkipSpace() {
    while (at_ < text_.size()) {
      char c = text_[at_];
      if (c != ' ' && c != '\t' && c != '\n' && c != '\r') return;
      ++at_;
    }
  }
  bool Take(char c) {
    SkipSpace();
    if (at_ >= text_.size() || text_[at_] != c) return false;
    ++at_;
    return true;
  }
  bool Peek(char c) {
    SkipSpace();
    return at_ < text_.size() && text_[at_] == c;
  }
  bool AtEnd() {
    SkipSpace();
    return at_ == text_.size();
  }
  bool String(std::string_view& out) {
    if (!Take('"')) return false;
    const size_t start = at_;
    const void* quote = std::memchr(text_.data() + start, '"', text_.size() - start);
    if (quote == nullptr) return false;
    const auto end = static_cast<size_t>(static_cast<const char*>(quote) - text_.data());
    if (!checked_ && !IsPlainStringBody(text_.data() + start, end - start)) {
      return false;  // escapes and control characters: full parser
    }
    out = text_.substr(start, end - start);
    at_ = end + 1;
    return true;
  }
  bool Value(FlatJsonValue& out) {
    SkipSpace();
    if (at_ >= text_.size()) return false;
    char c = text_[at_];
    if (c == '"') {
      out.kind = FlatJsonValue::Kind::kString;
      return String(out.text);
    }
    if (c >= '0' && c <= '9') return Unsigned(out);
    if (Word("true")) {
      out.kind = FlatJsonValue::Kind::kTrue;
      return true;
    }
    if (Word("false")) {
      out.kind = FlatJsonValue::Kind::kFalse;
      return true;
    }
    if (Word("null")) {
      out.kind = FlatJsonValue::Kind::kNull;
      return true;
    }
    return false;  // '{', '[', '-' and anything else
  }

 private:
  bool Word(std::string_view word) {
    if (text_.substr(at_, word.size()) != word) return false;
    at_ += word.size();
    return true;
  }
  bool Unsigned(FlatJsonValue& out) {
    size_t start = at_;
    uint64_t value = 0;
    while (at_ < text_.size() && text_[at_] >= '0' && text_[at_] <= '9') {
      auto digit = static_cast<uint64_t>(text_[at_] - '0');
      if (value > (UINT64_MAX - digit) / 10) return false;  // beyond u64: full parser
      value = value * 10 + digit;
      ++at_;
    }
    if (text_[start] == '0' && at_ - start > 1) return false;  // leading zero: not JSON
    if (at_ < text_.size() && (text_[at_] == '.' || text_[at_] == 'e' || text_[at_] == 'E')) {
      return false;
    }
    out.kind = FlatJsonValue::Kind::kUnsigned;
    out.number = value;
    return true;
  }

  std::string_view text_;
  size_t at_;
  bool checked_;
};

}  // namespace

std::optional<FlatJsonObject> FlatJsonObject::Scan(std::string_view text) {
  // Scanned where it is returned: the object is over a kilobyte, and a local copied into the
  // optional on return cost a tenth of a small request's decode.
  std::optional<FlatJsonObject> object(std::in_place);
  size_t at = 0;
  // One return statement, so that the compiler builds `object` in the caller's slot (NRVO).
  if (!object->ScanAt(text, at, /*allow_arrays=*/true) || !FlatScanner(text, at).AtEnd()) {
    object.reset();
  }
  return object;
}

bool FlatJsonObject::ScanAt(std::string_view text, size_t& at, bool allow_arrays, bool checked) {
  FlatScanner in(text, at, checked);
  size_ = 0;
  // An array of flat objects: each element is scanned here (so Scan accepts only what the
  // reader can walk) and again by FlatJsonArrayReader when it is read.
  auto array = [&](FlatJsonValue& out) {
    const size_t start = in.at();
    if (!in.Take('[')) return false;
    uint64_t count = 0;
    if (!in.Take(']')) {
      FlatJsonObject element;
      do {
        size_t element_at = in.at();
        if (!element.ScanAt(text, element_at, /*allow_arrays=*/false)) return false;
        in.Seek(element_at);
        ++count;
      } while (in.Take(','));
      if (!in.Take(']')) return false;
    }
    out.kind = FlatJsonValue::Kind::kArray;
    out.text = text.substr(start, in.at() - start);
    out.number = count;
    return true;
  };
  if (!in.Take('{')) return false;
  if (!in.Take('}')) {
    do {
      if (size_ == kMaxMembers) return false;
      Member& member = *new (&members_[size_].member) Member{};
      if (!in.String(member.key) || !in.Take(':')) return false;
      const bool scanned =
          allow_arrays && in.Peek('[') ? array(member.value) : in.Value(member.value);
      if (!scanned) return false;
      if (Find(member.key) != nullptr) return false;  // a key twice: full parser
      ++size_;
    } while (in.Take(','));
    if (!in.Take('}')) return false;
  }
  at = in.at();
  return true;
}

bool FlatJsonArrayReader::Next(FlatJsonObject& out) {
  FlatScanner in(text_, at_);
  if (!in.Take(at_ == 0 ? '[' : ',')) return false;  // past the last element: ']'
  size_t at = in.at();
  if (!out.ScanAt(text_, at, /*allow_arrays=*/false, /*checked=*/true)) return false;
  at_ = at;
  return true;
}

const FlatJsonValue* FlatJsonObject::Find(std::string_view key) const {
  for (size_t i = 0; i < size_; ++i) {
    const std::string_view name = members_[i].member.key;
    // Sizes and first characters first: most names differ there, and a call to memcmp for
    // every name of the same length cost more than the rest of the lookup.
    if (name.size() != key.size() || (!key.empty() && name[0] != key[0])) continue;
    if (name == key) return &members_[i].member.value;
  }
  return nullptr;
}

}  // namespace felix::wire::flx1
