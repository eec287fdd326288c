// Structured key=value logging on spdlog. The daemon and CLI call InitLogging once in main();
// everything else just uses spdlog's default logger (spdlog::info("event key={}", v)).
#pragma once

#include <string_view>

#include "common/result.h"

namespace felix {

// `filter` is a level name: trace, debug, info, warn, error, off (FELIX_LOG). Logs go to stderr.
Result<void> InitLogging(std::string_view filter);

}  // namespace felix
