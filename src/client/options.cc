// Parsing helpers of the public API (StreamRef, AckMode, StartPosition).
#include <charconv>

#include "felix/client.h"

namespace felix {

ClientResult<StreamRef> StreamRef::Parse(std::string_view text) {
  StreamRef ref;
  size_t slash = text.find('/');
  if (slash == std::string_view::npos) {
    ref.stream = std::string(text);
  } else {
    ref.namespace_name = std::string(text.substr(0, slash));
    ref.stream = std::string(text.substr(slash + 1));
    if (ref.stream.find('/') != std::string::npos || ref.namespace_name.empty())
      return tl::unexpected(MakeClientError(
          ClientErrorCode::kInvalidArgument,
          "stream '" + std::string(text) + "': expected STREAM or NAMESPACE/STREAM"));
  }
  if (ref.stream.empty())
    return tl::unexpected(MakeClientError(ClientErrorCode::kInvalidArgument,
                                          "stream '" + std::string(text) + "': empty name"));
  return ref;
}

std::string StreamRef::ToString() const {
  return namespace_name + "/" + stream;
}

ClientResult<AckMode> ParseAckMode(std::string_view text) {
  if (text == "none") return AckMode::kNone;
  if (text == "per_message" || text == "per-message") return AckMode::kPerMessage;
  if (text == "per_batch" || text == "per-batch") return AckMode::kPerBatch;
  return tl::unexpected(MakeClientError(
      ClientErrorCode::kInvalidArgument,
      "ack mode '" + std::string(text) + "': expected none, per_message or per_batch"));
}

ClientResult<StartPosition> StartPosition::Parse(std::string_view text) {
  if (text == "latest") return Latest();
  if (text == "earliest") return Earliest();
  uint64_t offset = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), offset);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size())
    return tl::unexpected(MakeClientError(
        ClientErrorCode::kInvalidArgument,
        "start position '" + std::string(text) + "': expected earliest, latest or an offset"));
  return Offset(offset);
}

}  // namespace felix
