// Every kind's body decoder on arbitrary bytes. Input: one byte choosing the kind (1–39),
// then the body; and, separately, the whole input as a frame. Never crash; whatever decodes
// re-encodes, renders as canonical JSON, and that JSON encodes back to the same bytes; a
// records frame rebuilt by MakeRecordsFrame keeps its kind.
#include <cstdlib>
#include <span>
#include <string>

#include "wire/flxi/cli_json.h"
#include "wire/flxi/flxi.h"

using namespace felix::wire::flxi;

namespace {

std::string Hex(const std::vector<uint8_t>& bytes) {
  static const char* d = "0123456789abcdef";
  std::string out;
  for (uint8_t b : bytes) {
    out.push_back(d[b >> 4]);
    out.push_back(d[b & 15]);
  }
  return out;
}

void Check(const Frame& f) {
  auto bytes = EncodeFrame(f);
  if (!bytes) std::abort();
  auto json = FrameToCanonicalJson(f);
  if (!json) std::abort();
  auto hex = FlxiCanonicalJsonToHex(*json);
  if (!hex || *hex != Hex(*bytes)) std::abort();
  // A decoded records frame, rebuilt by the sender-side selection for its own log, picks the
  // same kind (a kind-25 batch whose marks are all `none` becomes plain kind 7) and encodes.
  if (const auto* records = std::get_if<Records>(&f.body)) {
    auto log = TargetLog(f);
    if (!log) std::abort();
    bool labelled =
        f.kind == Kind::kReplicateLabelledRecords || f.kind == Kind::kReplicateTimedRecords;
    auto rebuilt =
        MakeRecordsFrame(*log, *records, labelled, f.kind == Kind::kReplicateTimedRecords);
    if (!rebuilt || !EncodeFrame(*rebuilt)) std::abort();
    bool demoted = f.kind == Kind::kReplicateMarkedRecords && !HasAnyMark(records->marks) &&
                   rebuilt->kind == Kind::kReplicateRecords;
    if (rebuilt->kind != f.kind && !demoted) std::abort();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  auto kind = static_cast<Kind>(data[0] % kMaxKnownKind + 1);
  auto body = DecodeBody(kind, std::span<const uint8_t>(data + 1, size - 1));
  if (body) {
    if (body->kind != kind) std::abort();
    Check(*body);
  }
  auto frame = DecodeFrame(std::span<const uint8_t>(data, size));
  if (frame) Check(*frame);
  return 0;
}
