// JSON encoding of FLX1 messages (client-protocol §4, §6): the payload of a frame whose flag
// word is 0.
//
// Encoding reproduces the reference bytes: compact, `type` first, fields in §6 order, absent
// optionals omitted except the always-emitted ones, u64 written exactly, byte fields as padded
// standard base64, strings escaped as serde_json does. Decoding ignores key order and unknown
// keys, treats null as absent, refuses a missing required field, a wrong JSON type, an integer
// out of its range (never read through a double), bad base64 and invalid UTF-8. An unknown
// `type` decodes to UnknownMessage. Nesting deeper than 128 levels is refused (the reference
// parser's limit). No exceptions leave these functions; all are thread-safe (no shared state).
#pragma once

#include <string>
#include <string_view>

#include "common/result.h"
#include "wire/decode_error.h"
#include "wire/flx1/messages.h"

namespace felix::wire::flx1 {

// Compact wire JSON. Fails (kInvalidArgument) only on a string that is not valid UTF-8 or an
// opaque JsonValue of the wrong shape.
Result<std::string> EncodeMessageJson(const Message& message);
// The same JSON appended to `out` (untouched on failure): for a writer that renders a frame's
// header and body into one buffer.
Result<void> AppendMessageJson(const Message& message, std::string& out);
// A group_records answer from views: byte for byte the JSON of the GroupRecords holding the
// same records (tested so), appended to `out` (untouched on failure).
Result<void> AppendGroupRecordsJson(const GroupRecordsView& answer, std::string& out);

// A flat object of plain scalars (json_flat_object.h: most requests and answers) is read in
// place; anything else, and anything the flat read cannot take whole, through
// DecodeMessageJsonFully — the result is the same either way.
DecodeResult<Message> DecodeMessageJson(std::string_view payload);
// The full parser alone (tests and the fuzzer compare DecodeMessageJson with it).
DecodeResult<Message> DecodeMessageJsonFully(std::string_view payload);

// Canonical rendering for tools: like the wire JSON, but every field is present (absent
// optionals as null, omitted-when-false booleans as false). DecodeMessageObject reads it back.
Result<std::string> MessageToCanonicalJson(const Message& message);

// Decodes an already parsed JSON object (as from the canonical rendering). `raw_json` is kept
// for an unknown `type`; pass the text the object came from.
DecodeResult<Message> DecodeMessageObject(const JsonValue& object, std::string_view raw_json);

// Nesting depth of JSON text (brackets outside strings); used to refuse deep input before
// parsing it.
size_t JsonNestingDepth(std::string_view text);
inline constexpr size_t kMaxJsonDepth = 128;

}  // namespace felix::wire::flx1
