// Canonical JSON for FLXI frames, for `felix wire decode/encode --proto flxi`.
//
// A frame renders as one JSON object: "kind" (the kind's name, e.g. "ForwardPublish") then
// every field of the body in wire order. Strings are JSON strings; raw bytes (payloads,
// values) are lowercase hex strings; enums are their names; absent optional values are null;
// kind-specific parts (credential, capabilities, marks, log, commit_offset, generations,
// times, condition) appear exactly when the kind carries them. The reverse accepts exactly
// that shape (unknown or missing keys are refused), so encode(json(decode(x))) == x.
// Pure functions; nlohmann exceptions are caught inside, never thrown out.
#pragma once

#include <string>
#include <string_view>

#include "common/result.h"
#include "wire/decode_error.h"
#include "wire/flxi/flxi.h"

namespace felix::wire::flxi {

// Hex (upper or lower case; spaces and newlines between bytes ignored) of one whole frame →
// canonical JSON. Bad hex → kInvalidValue; otherwise DecodeFrame's error.
DecodeResult<std::string> FlxiHexToCanonicalJson(std::string_view hex);

// Canonical JSON → lowercase hex of the encoded frame. Refuses malformed JSON, a wrong shape
// or a frame EncodeFrame refuses (kInvalidArgument, naming the field).
Result<std::string> FlxiCanonicalJsonToHex(std::string_view json);

// The canonical JSON text of a decoded (or built) frame.
Result<std::string> FrameToCanonicalJson(const Frame& frame);

}  // namespace felix::wire::flxi
