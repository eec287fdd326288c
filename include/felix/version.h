// Felix C++ version, shared by the broker, the client library and the CLI.
#pragma once

namespace felix {

inline constexpr const char* kVersion = "0.1.0";

}  // namespace felix
