#include "wire/flx1/json_flat_object.h"

namespace felix::wire::flx1 {

namespace {

// Reads the JSON text left to right; every method returns false on anything outside the
// subset the header names.
class FlatScanner {
 public:
  explicit FlatScanner(std::string_view text) : text_(text) {}

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
    size_t start = at_;
    while (at_ < text_.size()) {
      auto c = static_cast<unsigned char>(text_[at_]);
      if (c == '"') {
        out = text_.substr(start, at_ - start);
        ++at_;
        return true;
      }
      if (c == '\\' || c < 0x20) return false;  // escapes and control characters: full parser
      ++at_;
    }
    return false;
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
  size_t at_ = 0;
};

}  // namespace

std::optional<FlatJsonObject> FlatJsonObject::Scan(std::string_view text) {
  FlatScanner in(text);
  FlatJsonObject object;
  if (!in.Take('{')) return std::nullopt;
  if (!in.Take('}')) {
    do {
      if (object.size_ == kMaxMembers) return std::nullopt;
      Member& member = object.members_[object.size_];
      if (!in.String(member.key) || !in.Take(':') || !in.Value(member.value)) return std::nullopt;
      if (object.Find(member.key) != nullptr) return std::nullopt;  // a key twice: full parser
      ++object.size_;
    } while (in.Take(','));
    if (!in.Take('}')) return std::nullopt;
  }
  if (!in.AtEnd()) return std::nullopt;
  return object;
}

const FlatJsonValue* FlatJsonObject::Find(std::string_view key) const {
  for (size_t i = 0; i < size_; ++i) {
    if (members_[i].key == key) return &members_[i].value;
  }
  return nullptr;
}

}  // namespace felix::wire::flx1
