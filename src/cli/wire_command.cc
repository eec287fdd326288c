// `felix wire`: offline codec tools.
//   felix wire decode --proto flx1 HEX    one frame (hex) → canonical JSON on stdout
//   felix wire encode --proto flx1 JSON   canonical JSON → one frame as hex on stdout
// HEX / JSON may be "-" to read stdin. Exit codes: 0 ok, 1 input refused (the reason on
// stderr), 2 protocol not built into this binary.
#include <iostream>
#include <iterator>
#include <optional>
#include <string>
#include <vector>

#include "cli/command.h"
#include "wire/flx1/frame.h"

namespace felix::cli {

namespace {

constexpr int kExitRefused = 1;
constexpr int kExitNotBuilt = 2;

std::string ReadArgument(const std::string& arg) {
  if (arg != "-") return arg;
  return std::string(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>());
}

std::optional<std::vector<uint8_t>> ParseHex(const std::string& text) {
  std::vector<uint8_t> out;
  int high = -1;
  for (char c : text) {
    if (c == ' ' || c == '\n' || c == '\t' || c == '\r') continue;
    int v;
    if (c >= '0' && c <= '9') {
      v = c - '0';
    } else if (c >= 'a' && c <= 'f') {
      v = c - 'a' + 10;
    } else if (c >= 'A' && c <= 'F') {
      v = c - 'A' + 10;
    } else {
      return std::nullopt;
    }
    if (high < 0) {
      high = v;
    } else {
      out.push_back(static_cast<uint8_t>((high << 4) | v));
      high = -1;
    }
  }
  if (high >= 0) return std::nullopt;
  return out;
}

std::string ToHex(const std::vector<uint8_t>& bytes) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(bytes.size() * 2);
  for (uint8_t b : bytes) {
    out += kHex[b >> 4];
    out += kHex[b & 0xF];
  }
  return out;
}

int DecodeFlx1(const std::string& hex_text, uint32_t max_frame) {
  auto bytes = ParseHex(hex_text);
  if (!bytes) {
    std::cerr << "felix wire decode: input is not hex\n";
    return kExitRefused;
  }
  auto frame = wire::flx1::DecodeFrame(*bytes, max_frame);
  if (!frame) {
    std::cerr << "felix wire decode: " << frame.error().ToString() << "\n";
    return kExitRefused;
  }
  auto json = wire::flx1::FrameToCanonicalJson(*frame);
  if (!json) {
    std::cerr << "felix wire decode: " << json.error().message << "\n";
    return kExitRefused;
  }
  std::cout << *json << "\n";
  return 0;
}

int EncodeFlx1(const std::string& json_text) {
  auto owned = wire::flx1::FrameFromCanonicalJson(json_text);
  if (!owned) {
    std::cerr << "felix wire encode: " << owned.error().ToString() << "\n";
    return kExitRefused;
  }
  auto bytes = wire::flx1::EncodeFrame(owned->frame);
  if (!bytes) {
    std::cerr << "felix wire encode: " << bytes.error().message << "\n";
    return kExitRefused;
  }
  std::cout << ToHex(*bytes) << "\n";
  return 0;
}

// ---- Protocol dispatch: the single place a codec is wired to the command. ----
// FLXI is built on another branch; at merge, replace the kExitNotBuilt branches below with its
// decode/encode calls.
int DispatchDecode(const std::string& proto, const std::string& input, uint32_t max_frame) {
  if (proto == "flx1") return DecodeFlx1(input, max_frame);
  std::cerr << "felix wire decode: --proto " << proto << " is not built yet\n";
  return kExitNotBuilt;
}

int DispatchEncode(const std::string& proto, const std::string& input) {
  if (proto == "flx1") return EncodeFlx1(input);
  std::cerr << "felix wire encode: --proto " << proto << " is not built yet\n";
  return kExitNotBuilt;
}
// ---- end of protocol dispatch ----

struct WireOptions {
  std::string proto;
  std::string input;
  uint32_t max_frame = wire::flx1::kDefaultMaxFrameBytes;
};

void Exit(int code) {
  if (code != 0) throw CLI::RuntimeError(code);
}

}  // namespace

void RegisterWireCommand(CLI::App& app) {
  CLI::App* wire = app.add_subcommand("wire", "decode and encode protocol frames offline");
  wire->require_subcommand(1);

  auto decode_opts = std::make_shared<WireOptions>();
  CLI::App* decode = wire->add_subcommand("decode", "frame (hex) → canonical JSON");
  decode->add_option("--proto", decode_opts->proto, "protocol: flx1 or flxi")
      ->required()
      ->check(CLI::IsMember({"flx1", "flxi"}));
  decode->add_option("--max-frame", decode_opts->max_frame, "largest payload accepted (bytes)");
  decode->add_option("hex", decode_opts->input, "one whole frame as hex, or - for stdin")
      ->required();
  decode->callback([decode_opts] {
    Exit(DispatchDecode(decode_opts->proto, ReadArgument(decode_opts->input),
                        decode_opts->max_frame));
  });

  auto encode_opts = std::make_shared<WireOptions>();
  CLI::App* encode = wire->add_subcommand("encode", "canonical JSON → frame (hex)");
  encode->add_option("--proto", encode_opts->proto, "protocol: flx1 or flxi")
      ->required()
      ->check(CLI::IsMember({"flx1", "flxi"}));
  encode->add_option("json", encode_opts->input, "canonical JSON of one frame, or - for stdin")
      ->required();
  encode->callback([encode_opts] {
    Exit(DispatchEncode(encode_opts->proto, ReadArgument(encode_opts->input)));
  });
}

}  // namespace felix::cli
