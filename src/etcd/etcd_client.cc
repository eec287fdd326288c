#include "etcd/etcd_client.h"

namespace felix::etcd {

std::string PrefixEnd(std::string_view prefix) {
  std::string end(prefix);
  while (!end.empty()) {
    auto last = static_cast<unsigned char>(end.back());
    if (last < 0xff) {
      end.back() = static_cast<char>(last + 1);
      return end;
    }
    end.pop_back();
  }
  // Every byte was 0xff (or the prefix was empty): etcd's "to the end of the keyspace".
  return std::string(1, '\0');
}

EtcdResult<RangeResult> EtcdClient::GetPrefix(std::string_view prefix, int64_t revision) {
  RangeOptions options;
  options.range_end = PrefixEnd(prefix);
  options.revision = revision;
  return Range(prefix, options);
}

EtcdResult<std::pair<std::optional<KeyValue>, int64_t>> EtcdClient::Get(std::string_view key) {
  auto range = Range(key, RangeOptions{});
  if (!range) return tl::unexpected(range.error());
  std::optional<KeyValue> kv;
  if (!range->kvs.empty()) kv = std::move(range->kvs.front());
  return std::make_pair(std::move(kv), range->revision);
}

}  // namespace felix::etcd
