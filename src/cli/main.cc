// felix: the command-line client and operator tool.
#include "cli/command.h"

int main(int argc, char** argv) {
  CLI::App app{"felix: command-line client for Felix brokers"};
  app.require_subcommand(1);
  felix::cli::RegisterVersionCommand(app);
  felix::cli::RegisterAdminCommands(app);
  felix::cli::RegisterWireCommand(app);
  felix::cli::RegisterLogCommand(app);
  felix::cli::RegisterClientCommands(app);
  felix::cli::RegisterCacheCommands(app);
  felix::cli::RegisterGroupCommands(app);
  felix::cli::RegisterCertCommands(app);
  felix::cli::RegisterClusterCommands(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  return 0;
}
