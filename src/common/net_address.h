// Parsing of `host:port` settings and DNS-name checks shared by config, transport and CLI.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "common/result.h"

namespace felix {

struct HostPort {
  std::string host;  // IPv4 literal, IPv6 literal without brackets, or a DNS name
  uint16_t port = 0;

  // "host:port", with brackets around IPv6 literals.
  std::string ToString() const;
  bool operator==(const HostPort&) const = default;
};

// Accepts "1.2.3.4:5000", "[::1]:5000", "localhost:5000". Port 0 means "any free port".
Result<HostPort> ParseHostPort(std::string_view text);

// RFC 1123 host name: labels of 1-63 letters, digits and hyphens, not starting or ending with
// a hyphen, joined by dots, 253 characters at most. Node ids must be such names because peer
// certificates carry them as DNS SANs.
bool IsValidDnsName(std::string_view name);

}  // namespace felix
