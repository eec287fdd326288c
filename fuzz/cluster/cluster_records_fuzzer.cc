// The cluster's etcd value decoders and key parsers on arbitrary bytes (values and keys come
// from etcd, which anyone with write access to it can fill): never crash; whatever decodes
// re-encodes to a value that decodes to the same thing.
#include <cstdlib>
#include <string_view>

#include "cluster/etcd_keys.h"
#include "cluster/etcd_records.h"

namespace {

template <typename T, typename Decode, typename Encode>
void RoundTrip(std::string_view text, Decode decode, Encode encode) {
  auto first = decode(text);
  if (!first) return;
  auto again = decode(encode(*first));
  if (!again || !(*again == *first)) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace felix::cluster;
  std::string_view text(reinterpret_cast<const char*>(data), size);
  RoundTrip<Assignment>(text, DecodeAssignment, EncodeAssignment);
  RoundTrip<NodeRecord>(text, DecodeNodeRecord, EncodeNodeRecord);
  RoundTrip<ControllerRecord>(text, DecodeControllerRecord, EncodeControllerRecord);
  RoundTrip<Report>(text, DecodeReport, EncodeReport);
  static const auto keys = *ClusterKeys::Create("felix");
  if (auto shard = keys.ParseAssign(text); shard && keys.Assign(*shard) != text) std::abort();
  if (auto shard = keys.ParseReport(text); shard && keys.Report(*shard) != text) std::abort();
  if (auto node = keys.ParseNode(text); node && keys.Node(*node) != text) std::abort();
  (void)keys.ParseSuspect(text);
  return 0;
}
