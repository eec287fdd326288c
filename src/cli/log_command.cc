// felix log inspect|verify|dump: read-only views of durable logs. PATH is one log directory
// (holding NNNN.log segments) or a shard directory (holding stream/, cache/, cursors/,
// dead_letters/, counters/). Nothing is repaired: `inspect` prints what opening would do.
#include <filesystem>
#include <iomanip>
#include <iostream>
#include <sstream>

#include "cli/command.h"
#include "storage/io_util.h"
#include "storage/recovery.h"
#include "storage/shard_store.h"

namespace felix::cli {
namespace {

namespace fs = std::filesystem;
using storage::PlanRecovery;
using storage::RecoveryPlan;

bool IsLogDir(const std::string& dir) {
  std::error_code ec;
  for (auto& e : fs::directory_iterator(dir, ec)) {
    if (e.path().extension() == ".log") return true;
  }
  return fs::exists(fs::path(dir) / storage::kMarkFileName);
}

// The log directories named by PATH, with a display name each.
std::vector<std::pair<std::string, std::string>> LogDirs(const std::string& path) {
  std::vector<std::pair<std::string, std::string>> out;
  if (!fs::is_directory(path)) {
    std::cerr << "felix log: " << path << " is not a directory\n";
    throw CLI::RuntimeError(2);
  }
  if (IsLogDir(path)) {
    out.emplace_back(path, fs::path(path).filename().string());
    return out;
  }
  for (size_t i = 0; i < storage::kLogKindCount; ++i) {
    std::string name = storage::LogKindName(storage::LogKind(i));
    std::string dir = (fs::path(path) / name).string();
    if (fs::is_directory(dir)) out.emplace_back(dir, name);
  }
  if (out.empty()) {
    std::cerr << "felix log: " << path
              << " holds no log (no *.log segments, no log subdirectories)\n";
    throw CLI::RuntimeError(2);
  }
  return out;
}

void PrintPlan(const std::string& name, const RecoveryPlan& plan) {
  std::cout << "log " << name << "\n";
  if (plan.mark) {
    std::cout << "  durable mark: segment " << plan.mark->segment_base << ", "
              << plan.mark->synced_bytes << " bytes synced\n";
  } else {
    std::cout << "  durable mark: absent\n";
  }
  if (plan.poison) std::cout << "  POISONED by an earlier fsync failure: " << *plan.poison << "\n";
  if (plan.fresh) {
    std::cout << "  no segments (a new log would start at offset " << plan.fresh_base << ")\n";
  }
  uint64_t bytes = 0;
  for (const auto& s : plan.segments) {
    bytes += s.valid_bytes;
    std::cout << "  segment " << fs::path(s.log_path).filename().string() << "  offsets [" << s.base
              << ", " << s.end_offset << ")  records " << (s.end_offset - s.base) << "  bytes "
              << s.file_bytes
              << (s.index_rebuilt && &s != &plan.segments.back() ? "  index: rebuild" : "")
              << (s.fully_scanned ? "  verified" : "") << "\n";
  }
  if (!plan.segments.empty()) {
    std::cout << "  base " << plan.segments.front().base << "  tail "
              << plan.segments.back().end_offset << "  bytes " << bytes << "\n";
  }
  for (const auto& f : plan.files_to_delete) std::cout << "  open would delete " << f << "\n";
  if (plan.torn_tail) {
    std::cout << "  torn tail: " << plan.torn_reason << "; open would cut " << plan.truncated_bytes
              << " bytes\n";
  } else {
    std::cout << "  tail clean\n";
  }
}

int Inspect(const std::string& path, bool verify_all) {
  int code = 0;
  for (const auto& [dir, name] : LogDirs(path)) {
    auto plan = PlanRecovery(dir, 4096, verify_all);
    if (!plan) {
      std::cout << "log " << name << "\n  REFUSED: " << plan.error().ToString() << "\n";
      code = 1;
      continue;
    }
    PrintPlan(name, *plan);
    if (verify_all) {
      std::cout << "  verified " << plan->records_scanned << " records, " << plan->bytes_scanned
                << " bytes\n";
    }
  }
  return code;
}

std::string Printable(const uint8_t* p, size_t n, bool hex, size_t limit) {
  std::ostringstream out;
  size_t shown = std::min(n, limit);
  for (size_t i = 0; i < shown; ++i) {
    if (hex) {
      out << std::hex << std::setw(2) << std::setfill('0') << int(p[i]);
    } else if (p[i] >= 0x20 && p[i] < 0x7f && p[i] != '\\') {
      out << char(p[i]);
    } else {
      out << "\\x" << std::hex << std::setw(2) << std::setfill('0') << int(p[i]) << std::dec;
    }
  }
  if (shown < n) out << "...";
  return out.str();
}

int Dump(const std::string& path, const std::string& log_name, uint64_t from, uint64_t count,
         bool hex, size_t limit) {
  auto dirs = LogDirs(path);
  std::string dir;
  for (const auto& [d, name] : dirs) {
    if (dirs.size() == 1 || name == log_name) dir = d;
  }
  if (dir.empty()) {
    std::cerr << "felix log dump: choose a log with --log (stream, cache, cursors, dead_letters, "
                 "counters)\n";
    return 2;
  }
  auto plan = PlanRecovery(dir, 4096, false);
  if (!plan) {
    std::cerr << "felix log dump: " << plan.error().ToString() << "\n";
    return 1;
  }
  uint64_t printed = 0;
  for (const auto& s : plan->segments) {
    if (s.end_offset <= from || printed >= count) continue;
    auto mapped = storage::MappedFile::Open(s.log_path);
    if (!mapped) {
      std::cerr << "felix log dump: " << mapped.error().ToString() << "\n";
      return 1;
    }
    auto file = mapped->bytes();
    uint64_t pos = storage::kSegmentHeaderBytes;
    while (pos < s.valid_bytes && printed < count) {
      storage::RecordHeader h;
      if (pos + storage::kRecordHeaderBytes > file.size() ||
          !storage::DecodeRecordHeader(file.data() + pos, &h) ||
          pos + storage::RecordBytes(h.payload_len) > file.size()) {
        std::cerr << "felix log dump: damaged record at " << s.log_path << " position " << pos
                  << "\n";
        return 1;
      }
      const uint8_t* payload = file.data() + pos + storage::kRecordHeaderBytes;
      if (h.offset >= from) {
        bool ok = storage::PayloadCrcMatches(h, payload);
        std::span<const uint8_t> body{payload, h.payload_len};
        std::cout << "offset=" << h.offset << " generation=" << h.generation
                  << " timestamp_ms=" << h.timestamp_ms << " bytes=" << h.payload_len;
        if (h.flags != 0) std::cout << " flags=" << h.flags;
        if (storage::IsGenerationStart(h.flags)) {
          if (auto g = storage::GenerationStartOf(body)) {
            std::cout << " generation-start=" << *g;
          } else {
            std::cout << " GENERATION-START-DAMAGED";
          }
        }
        if ((h.flags & storage::kRecordFlagPublisher) != 0) {
          if (auto split = storage::SplitPublisher(body)) {
            body = split->payload;
            std::cout << " publisher="
                      << Printable(split->publisher.data(), split->publisher.size(), hex, limit);
          } else {
            std::cout << " PUBLISHER-DAMAGED";
          }
        }
        std::cout << (ok ? "" : " CHECKSUM-MISMATCH") << " payload=" << std::dec
                  << Printable(body.data(), body.size(), hex, limit) << std::dec << "\n";
        ++printed;
      }
      pos += storage::RecordBytes(h.payload_len);
    }
  }
  return 0;
}

}  // namespace

void RegisterLogCommand(CLI::App& app) {
  CLI::App* log = app.add_subcommand("log", "inspect, verify or dump durable storage logs");
  log->require_subcommand(1);

  struct Args {
    std::string path;
    std::string log_name;
    uint64_t from = 0;
    uint64_t count = 100;
    bool hex = false;
    size_t limit = 64;
  };
  auto args = std::make_shared<Args>();

  CLI::App* inspect = log->add_subcommand(
      "inspect", "list segments, offsets and what opening would repair (read-only)");
  inspect->add_option("path", args->path, "log directory or shard directory")->required();
  inspect->callback([args] {
    if (int code = Inspect(args->path, false); code != 0) throw CLI::RuntimeError(code);
  });

  CLI::App* verify =
      log->add_subcommand("verify", "check every record's checksums (exit 1 on corruption)");
  verify->add_option("path", args->path, "log directory or shard directory")->required();
  verify->callback([args] {
    if (int code = Inspect(args->path, true); code != 0) throw CLI::RuntimeError(code);
  });

  CLI::App* dump = log->add_subcommand("dump", "print records");
  dump->add_option("path", args->path, "log directory or shard directory")->required();
  dump->add_option("--log", args->log_name, "log kind inside a shard directory");
  dump->add_option("--from", args->from, "first offset");
  dump->add_option("--count", args->count, "records to print");
  dump->add_flag("--hex", args->hex, "payload as hex");
  dump->add_option("--max-payload", args->limit, "payload bytes shown per record");
  dump->callback([args] {
    int code = Dump(args->path, args->log_name, args->from, args->count, args->hex, args->limit);
    if (code != 0) throw CLI::RuntimeError(code);
  });
}

}  // namespace felix::cli
