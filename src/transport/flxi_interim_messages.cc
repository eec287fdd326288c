#include "transport/flxi_interim_messages.h"

#include <algorithm>

namespace felix::transport::flxi_interim {
namespace {

void Put(std::vector<uint8_t>& out, uint64_t v, int bytes) {
  for (int i = bytes - 1; i >= 0; --i) out.push_back(uint8_t(v >> (8 * i)));
}

class Reader {
 public:
  explicit Reader(std::span<const uint8_t> d) : d_(d) {}
  bool Get(uint64_t* v, size_t bytes) {
    if (d_.size() - pos_ < bytes) return false;
    *v = 0;
    for (size_t i = 0; i < bytes; ++i) *v = *v << 8 | d_[pos_ + i];
    pos_ += bytes;
    return true;
  }
  bool GetStr(std::string* s) {
    uint64_t len = 0;
    if (!Get(&len, 4) || len > kMaxStrBytes || d_.size() - pos_ < len) return false;
    s->assign(reinterpret_cast<const char*>(d_.data() + pos_), size_t(len));
    pos_ += size_t(len);
    return true;
  }
  bool AtEnd() const { return pos_ == d_.size(); }

 private:
  std::span<const uint8_t> d_;
  size_t pos_ = 0;
};

}  // namespace

Result<std::vector<uint8_t>> EncodeHello(const HelloBody& body) {
  if (body.node_id.size() > kMaxStrBytes)
    return Fail(ErrorCode::kInvalidArgument, "node id longer than 512 bytes");
  std::vector<uint8_t> out;
  Put(out, body.correlation_id, 8);
  Put(out, body.node_id.size(), 4);
  out.insert(out.end(), body.node_id.begin(), body.node_id.end());
  return out;
}

std::vector<uint8_t> EncodeError(const ErrorBody& body) {
  std::vector<uint8_t> out;
  size_t n = std::min(body.detail.size(), kMaxStrBytes);
  Put(out, body.correlation_id, 8);
  Put(out, body.code, 2);
  Put(out, n, 4);
  out.insert(out.end(), body.detail.begin(), body.detail.begin() + long(n));
  return out;
}

Result<HelloBody> DecodeHello(std::span<const uint8_t> body) {
  Reader r(body);
  HelloBody h;
  if (!r.Get(&h.correlation_id, 8) || !r.GetStr(&h.node_id) || !r.AtEnd())
    return Fail(ErrorCode::kInvalidArgument, "malformed Hello body");
  return h;
}

Result<ErrorBody> DecodeError(std::span<const uint8_t> body) {
  Reader r(body);
  ErrorBody e;
  uint64_t code = 0;
  if (!r.Get(&e.correlation_id, 8) || !r.Get(&code, 2) || !r.GetStr(&e.detail) || !r.AtEnd())
    return Fail(ErrorCode::kInvalidArgument, "malformed error body");
  e.code = uint16_t(code);
  return e;
}

}  // namespace felix::transport::flxi_interim
