#include <iostream>

#include "cli/command.h"
#include "felix/version.h"

namespace felix::cli {

void RegisterVersionCommand(CLI::App& app) {
  CLI::App* cmd = app.add_subcommand("version", "print the Felix version");
  cmd->callback([] { std::cout << "felix " << felix::kVersion << "\n"; });
}

}  // namespace felix::cli
