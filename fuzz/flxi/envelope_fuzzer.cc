// DecodeEnvelope / DecodeTypedHeader on arbitrary bytes: never crash; an envelope that
// decodes has the FLXI magic and version 1; a frame of an unknown kind gets a refusal that
// itself decodes as kind 3 UnsupportedKind carrying the body's correlation id.
#include <cstdlib>
#include <span>

#include "wire/flxi/flxi.h"

using namespace felix::wire::flxi;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::span<const uint8_t> bytes(data, size);
  auto env = DecodeEnvelope(bytes);
  auto typed = DecodeTypedHeader(bytes);
  if (!env) {
    if (typed) std::abort();
    return 0;
  }
  if (size < kHeaderBytes || data[0] != 'F' || data[1] != 'L' || data[2] != 'X' || data[3] != 'I')
    std::abort();
  if (typed.has_value() != (IsKnownKind(env->kind) && env->length <= kMaxBodyBytes)) std::abort();
  if (!IsKnownKind(env->kind)) {
    auto body = bytes.subspan(kHeaderBytes);
    if (body.size() > env->length) body = body.first(env->length);
    auto answer = EncodeUnsupportedKindAnswer(env->kind, body);
    auto f = DecodeFrame(answer);
    if (!f || f->kind != Kind::kForwardPublishError) std::abort();
    const auto& e = std::get<ErrorAnswer>(f->body);
    if (e.code != ErrorCode::kUnsupportedKind) std::abort();
    if (e.correlation_id != CorrelationIdOfBody(body)) std::abort();
    if (e.detail != UnsupportedKindDetail(env->kind)) std::abort();
  }
  return 0;
}
