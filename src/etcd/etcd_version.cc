#include "etcd/etcd_version.h"

#include <charconv>
#include <string>

namespace felix::etcd {
namespace {

bool ParseNumber(std::string_view& text, int& out) {
  const char* begin = text.data();
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(begin, end, out);
  if (ec != std::errc() || ptr == begin || out < 0) return false;
  text.remove_prefix(static_cast<size_t>(ptr - begin));
  return true;
}

}  // namespace

EtcdResult<EtcdVersion> ParseEtcdVersion(std::string_view text) {
  std::string_view rest = text;
  EtcdVersion v;
  auto bad = [&] {
    return EtcdFail(EtcdErrc::kInvalidArgument,
                    "etcd version '" + std::string(text) + "' is not MAJOR.MINOR.PATCH");
  };
  if (!ParseNumber(rest, v.major) || rest.empty() || rest.front() != '.') return bad();
  rest.remove_prefix(1);
  if (!ParseNumber(rest, v.minor) || rest.empty() || rest.front() != '.') return bad();
  rest.remove_prefix(1);
  if (!ParseNumber(rest, v.patch)) return bad();
  if (!rest.empty() && rest.front() != '-' && rest.front() != '+') return bad();
  return v;
}

EtcdResult<EtcdVersion> CheckEtcdVersion(std::string_view version) {
  auto parsed = ParseEtcdVersion(version);
  if (!parsed) return parsed;
  if (*parsed < kMinimumEtcdVersion) {
    return EtcdFail(EtcdErrc::kVersionTooOld,
                    "etcd " + std::string(version) +
                        " is older than 3.4.20 (lease renewal is not linearizable before it); "
                        "upgrade etcd");
  }
  return parsed;
}

EtcdResult<EtcdVersion> VerifyServerVersion(EtcdClient& client) {
  auto status = client.Status();
  if (!status) return tl::unexpected(status.error());
  return CheckEtcdVersion(status->version);
}

}  // namespace felix::etcd
