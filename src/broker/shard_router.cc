#include "broker/shard_router.h"

#include <algorithm>
#include <charconv>

namespace felix::broker {

int ShardId::CompareKey(std::string_view key) const {
  char digits[10];  // a uint32_t's decimal digits
  const char* end = std::to_chars(digits, digits + sizeof(digits), shard).ptr;
  const std::string_view pieces[] = {
      kind == ShardKind::kCache ? "cache:" : "",     tenant, "/", name_space, "/", name, "#",
      std::string_view(digits, size_t(end - digits))};
  size_t pos = 0;
  for (std::string_view piece : pieces) {
    const size_t n = std::min(piece.size(), key.size() - pos);
    if (int r = key.substr(pos, n).compare(piece.substr(0, n)); r != 0) return r;
    if (n < piece.size()) return -1;  // the key ends inside this piece
    pos += n;
  }
  return pos == key.size() ? 0 : 1;
}

std::string ShardId::ToString() const {
  return std::string(kind == ShardKind::kCache ? "cache:" : "") + tenant + "/" + name_space + "/" +
         name + "#" + std::to_string(shard);
}

}  // namespace felix::broker
