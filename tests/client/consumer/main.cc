// Uses only the installed public headers; links the whole client (Connect pulls in the
// transport) and checks a refusal that needs no broker.
#include <felix/client.h>

#include <cstdio>

int main() {
  auto start = felix::StartPosition::Parse("earliest");
  if (!start || start->kind() != felix::StartPosition::Kind::kEarliest) return 1;
  felix::ClientOptions options;  // no ca_file: refused before dialling
  auto client = felix::Client::Connect(options);
  if (client || client.error().code != felix::ClientErrorCode::kInvalidArgument) return 2;
  std::printf("ok: %s\n", client.error().ToString().c_str());
  return 0;
}
