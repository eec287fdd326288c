// FLX1 frames (client-protocol §2–3): the 12-byte envelope, flag checking, and the single entry
// points the broker, the client and the CLI use:
//
//   DecodeFrame(bytes, max_payload)  one complete frame → Flx1Frame (JSON message or binary)
//   EncodeFrame(frame)               Flx1Frame → header + payload, flags derived from content
//   FrameToCanonicalJson / FrameFromCanonicalJson   a complete, stable JSON rendering for tools
//
// Stream readers use DecodeEnvelope (magic, version, length bound — enough to know how many
// bytes to read or skip, as §2 rule 4 requires) and then DecodePayload, which refuses unknown
// flag bits (never masks them) and impossible combinations.
//
// Binary frames decode to views into the input (see binary.h); JSON messages own their data.
// Stateless, no exceptions; safe from any thread.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "common/result.h"
#include "wire/decode_error.h"
#include "wire/flx1/binary.h"
#include "wire/flx1/constants.h"
#include "wire/flx1/messages.h"

namespace felix::wire::flx1 {

using Flx1Frame = std::variant<Message, BinaryPublishBatch, BinaryPublishAck, BinaryEventBatch>;

struct FrameHeader {
  uint16_t flags = 0;
  uint32_t length = 0;  // payload bytes after the header
  bool operator==(const FrameHeader&) const = default;
};

// Magic, version and `length <= max_payload` (kIncomplete under 12 bytes, kBadMagic,
// kBadVersion, kFrameTooLarge). Does not judge the flags, so a reader can skip the payload of a
// frame it then refuses.
DecodeResult<FrameHeader> DecodeEnvelope(std::span<const uint8_t> bytes, uint32_t max_payload);

// kUnknownFlags for a bit outside kKnownFlags; kInvalidValue for a combination no layout has
// (modifier without its base, two layouts at once, 0x0100 without 0x0008, 0x0800 without
// 0x0020, 0x0400 without 0x0200).
DecodeResult<void> CheckFlags(uint16_t flags);

// DecodeEnvelope + CheckFlags.
DecodeResult<FrameHeader> DecodeHeader(std::span<const uint8_t> bytes, uint32_t max_payload);

// The payload of a frame with flag word `flags` (exactly the payload: trailing bytes refused).
DecodeResult<Flx1Frame> DecodePayload(uint16_t flags, std::span<const uint8_t> payload);

// Exactly one frame: header + payload, nothing more (kIncomplete if short, kTrailingBytes if
// longer).
DecodeResult<Flx1Frame> DecodeFrame(std::span<const uint8_t> bytes, uint32_t max_payload);

uint16_t FrameFlags(const Flx1Frame& frame);

// Header + payload appended to `out`; fails (kInvalidArgument) for content the wire cannot
// carry (see binary.h, json_codec.h) or a payload over u32 max.
Result<void> AppendFrame(const Flx1Frame& frame, std::vector<uint8_t>& out);
Result<std::vector<uint8_t>> EncodeFrame(const Flx1Frame& frame);

// Adds `payloads` to the publish batch frame (§5.1; header included) that starts at
// `frame_start` in `out` and runs to its end, when that frame is a plain one — no acked,
// idempotent or keyed block — for `tenant_id` / `namespace_` / `stream`: the payloads are
// appended and the frame's count and length grow, so that the frame reads as one batch of all
// its payloads, in order. False, `out` untouched, when the bytes there are not such a frame.
// Fails, `out` untouched, when a payload or the grown frame cannot be carried. How a
// fire-and-forget publisher sends a run of publishes to one stream as one frame.
Result<bool> AppendToPublishBatchFrame(std::vector<uint8_t>& out, size_t frame_start,
                                       std::string_view tenant_id, std::string_view namespace_,
                                       std::string_view stream,
                                       std::span<const std::string> payloads);
// The same in two steps, for a writer that appends to one frame many times: OpenPublishBatchFrame
// checks the frame once (as above; nullopt when it is not such a frame) and notes where its
// count is; AppendToOpenPublishBatch then appends without reading the frame again. `open`
// describes `out` only while nothing but these appends is written after the frame.
struct OpenPublishBatch {
  size_t frame_start = 0;
  size_t count_at = 0;  // offset of the u32 payload count in `out`
  uint32_t count = 0;   // payloads in the frame now
  uint32_t length = 0;  // the frame's body length now
};
std::optional<OpenPublishBatch> OpenPublishBatchFrame(std::span<const uint8_t> out,
                                                      size_t frame_start,
                                                      std::string_view tenant_id,
                                                      std::string_view namespace_,
                                                      std::string_view stream);
// Fails, `out` and `open` untouched, when a payload or the grown frame cannot be carried.
Result<void> AppendToOpenPublishBatch(std::vector<uint8_t>& out, OpenPublishBatch& open,
                                      std::span<const std::string> payloads);
// Convenience for the common case of a JSON message.
Result<std::vector<uint8_t>> EncodeMessageFrame(const Message& message);
// The same frame appended to `out` (untouched on failure), the JSON rendered in place after
// the header: one buffer and no copy of the text, for a writer that sends the bytes at once.
Result<void> AppendMessageFrame(const Message& message, std::string& out);
// A group_records answer's frame from views (json_codec.h AppendGroupRecordsJson): the bytes
// AppendMessageFrame writes for the GroupRecords holding the same records.
Result<void> AppendGroupRecordsFrame(const GroupRecordsView& answer, std::string& out);

// Canonical JSON: {"frame":"json","flags":0,"message":{every field, absent ones null}} or
// {"frame":"publish_batch"|"publish_ack"|"event_batch","flags":N, every field ...}; byte
// fields as base64. Deterministic, so it doubles as a diffable test rendering.
Result<std::string> FrameToCanonicalJson(const Flx1Frame& frame);

// A frame together with the bytes its views point into (for frames built from canonical JSON).
struct OwnedFrame {
  Flx1Frame frame;
  std::vector<std::unique_ptr<std::string>> storage;
};
// Reads the canonical rendering back. "flags", when present, must equal the flags the content
// implies. Names alongside numbers (an ack's code name) are informative and ignored.
DecodeResult<OwnedFrame> FrameFromCanonicalJson(std::string_view text);

}  // namespace felix::wire::flx1
