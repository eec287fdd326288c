#include "common/logging.h"

#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

namespace felix {

Result<void> InitLogging(std::string_view filter) {
  auto level = spdlog::level::from_str(std::string(filter));
  if (level == spdlog::level::off && filter != "off") {
    return Fail(ErrorCode::kInvalidArgument,
                "FELIX_LOG: unknown level '" + std::string(filter) +
                    "' (expected trace, debug, info, warn, error or off)");
  }
  auto logger = spdlog::stderr_color_mt("felix");
  logger->set_pattern("%Y-%m-%dT%H:%M:%S.%fZ %^%l%$ %v", spdlog::pattern_time_type::utc);
  logger->set_level(level);
  spdlog::set_default_logger(logger);
  return Ok();
}

}  // namespace felix
