// FLX1 binary payload layouts (client-protocol §5): publish batches, publish acknowledgements
// and event batches. The frame flag word selects the layout and its optional blocks; here the
// optional blocks are std::optional members and the flag word is derived from them
// (…Flags()), so an encoded frame always carries exactly the bits its content needs.
//
// Decoded values are views (std::string_view) into the payload bytes: the input buffer must
// outlive them. Decoders bound every count by the bytes that remain before allocating, check
// UTF-8 of text fields and refuse trailing bytes. Encoders refuse values the layout cannot
// carry (a string over its u16/u8 length, an ack mode the layout has no byte for, ...).
// Stateless; safe from any thread.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "common/result.h"
#include "wire/decode_error.h"
#include "wire/flx1/messages.h"

namespace felix::wire::flx1 {

// Raw bytes viewed in place (not necessarily UTF-8).
using ByteView = std::string_view;

// §5.1 publish batch (flag 0x0001 plus 0x0008 / 0x0100 / 0x0040).
struct BinaryPublishBatch {
  struct Acked {  // flag 0x0008
    uint64_t request_id = 0;
    AckMode ack_mode = AckMode::kPerBatch;  // kPerMessage (1) or kPerBatch (2)
    bool operator==(const Acked&) const = default;
  };
  struct Idempotent {  // flag 0x0100 (requires acked, ack mode per_batch)
    uint64_t producer_id = 0;
    uint64_t sequence = 0;
    bool operator==(const Idempotent&) const = default;
  };
  std::optional<Acked> acked;
  std::optional<Idempotent> idempotent;
  std::optional<ByteView> key;  // flag 0x0040; an empty key is a key
  std::string_view tenant_id;
  std::string_view namespace_;
  std::string_view stream;
  std::vector<ByteView> payloads;
  bool operator==(const BinaryPublishBatch&) const = default;
};

// §5.2 publish acknowledgement (flag 0x0010 plus 0x0200 / 0x0400 / 0x0080 / 0x1000).
struct BinaryPublishAck {
  enum class Status : uint8_t { kOk = 0, kError = 1 };
  struct Code {         // flag 0x0200
    uint16_t code = 0;  // §8.2 number; unknown numbers kept
    uint8_t retry = 0;  // §8.1 byte; unknown bytes kept (read as fatal: RetryClassFromByte)
    bool operator==(const Code&) const = default;
  };
  struct Detail {                 // flag 0x0400 (requires code)
    std::string_view reason;      // empty = not said
    uint64_t retry_after_ms = 0;  // 0 = no suggestion
    bool operator==(const Detail&) const = default;
  };
  struct Owner {  // flag 0x0080
    std::string_view node_id;
    std::optional<std::string_view> addr;  // written as length 0 when absent
    uint64_t generation = 0;
    bool operator==(const Owner&) const = default;
  };
  Status status = Status::kOk;
  uint64_t request_id = 0;
  std::string_view message;  // empty when ok
  std::optional<Code> code;
  std::optional<Detail> detail;
  std::optional<Owner> owner;
  std::optional<uint64_t> offset;  // flag 0x1000; successful acks only
  bool operator==(const BinaryPublishAck&) const = default;
};

// §5.3 event batch: per-subscriber (0x0002, with subscription_id) or shared (0x0004), plus
// 0x0020 / 0x0800 / 0x2000 / 0x4000.
struct BinaryEventBatch {
  struct Item {
    uint64_t timestamp_micros = 0;  // only on the wire when has_timestamps
    ByteView payload;
    bool operator==(const Item&) const = default;
  };
  std::optional<uint64_t> subscription_id;    // present = per-subscriber form (0x0002)
  std::optional<uint64_t> base_offset;        // 0x0020
  std::optional<uint64_t> skipped_before;     // 0x0800, requires base_offset
  std::optional<std::string_view> publisher;  // 0x2000, ≤ 255 bytes
  bool has_timestamps = false;                // 0x4000
  std::vector<Item> events;
  bool operator==(const BinaryEventBatch&) const = default;
};

uint16_t PublishBatchFlags(const BinaryPublishBatch& batch);
uint16_t PublishAckFlags(const BinaryPublishAck& ack);
uint16_t EventBatchFlags(const BinaryEventBatch& batch);

// Decoders take the frame's flag word (already checked by CheckFlags) and the whole payload.
DecodeResult<BinaryPublishBatch> DecodePublishBatch(uint16_t flags,
                                                    std::span<const uint8_t> payload);
DecodeResult<BinaryPublishAck> DecodePublishAck(uint16_t flags, std::span<const uint8_t> payload);
DecodeResult<BinaryEventBatch> DecodeEventBatch(uint16_t flags, std::span<const uint8_t> payload);

// Encoders append the payload (no header) to `out`.
Result<void> EncodePublishBatch(const BinaryPublishBatch& batch, std::vector<uint8_t>& out);
Result<void> EncodePublishAck(const BinaryPublishAck& ack, std::vector<uint8_t>& out);
Result<void> EncodeEventBatch(const BinaryEventBatch& batch, std::vector<uint8_t>& out);

}  // namespace felix::wire::flx1
