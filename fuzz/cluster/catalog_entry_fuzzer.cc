// EtcdCatalog's decoder of catalog/ entries on arbitrary keys and values (both come from etcd,
// which anyone with write access to it can fill): never crash; an entity that decodes
// re-encodes (the value the catalog itself writes) to one that decodes to the same thing.
// Input: the key below catalog/, a newline, then the value.
#include <cstdlib>
#include <string_view>

#include "cluster/etcd_catalog.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace felix;
  static const auto keys = *cluster::ClusterKeys::Create("felix");
  std::string_view text(reinterpret_cast<const char*>(data), size);
  size_t nl = text.find('\n');
  if (nl == std::string_view::npos) return 0;
  etcd::KeyValue kv;
  kv.key = keys.CatalogPrefix() + std::string(text.substr(0, nl));
  kv.value = std::string(text.substr(nl + 1));
  auto first = cluster::DecodeCatalogEntry(keys, kv);
  if (!first) return 0;
  std::visit(
      [&](const auto& e) {
        using T = std::decay_t<decltype(e)>;
        if constexpr (!std::is_same_v<T, cluster::EtcdCatalog::StoredKey>) {
          kv.value = catalog::ToJson(e).dump();
          auto again = cluster::DecodeCatalogEntry(keys, kv);
          if (!again || !(std::get<T>(*again) == e)) std::abort();
        }
      },
      *first);
  return 0;
}
