// crash_writer: appends to a DurableLog until killed and prints "ack <offset>" for every record
// once its append was acknowledged. Used by crash_test (SIGKILL mid-stream, then reopen).
//
// usage: crash_writer <dir> <mode none|periodic|on_commit> <threads> <payload bytes>
//                     [segment bytes]
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "storage/durable_log.h"

using namespace felix::storage;

// The payload names its writer thread and sequence number; "ack" lines repeat them, so the
// test can check each acknowledged offset holds exactly what was acknowledged.
static std::string PayloadFor(uint64_t thread, uint64_t seq, size_t size) {
  std::string s = "crash-" + std::to_string(thread) + "-" + std::to_string(seq) + "-";
  while (s.size() < size) s += char('A' + (seq + s.size()) % 26);
  return s;
}

int main(int argc, char** argv) {
  if (argc < 5) {
    std::fprintf(stderr,
                 "usage: crash_writer dir mode threads payload_bytes [segment_bytes "
                 "[preallocate_bytes]]\n");
    return 2;
  }
  LogOptions o;
  auto mode = ParseFsyncMode(argv[2]);
  if (!mode) return 2;
  o.fsync_mode = *mode;
  o.fsync_interval = std::chrono::milliseconds(5);
  int threads = std::atoi(argv[3]);
  size_t size = size_t(std::atoll(argv[4]));
  if (argc > 5) o.segment_bytes = uint64_t(std::atoll(argv[5]));
  if (argc > 6) o.preallocate_bytes = uint64_t(std::atoll(argv[6]));
  auto log = DurableLog::Open(argv[1], o);
  if (!log) {
    std::fprintf(stderr, "open failed: %s\n", log.error().ToString().c_str());
    return 1;
  }
  std::printf("ready tail=%llu\n", static_cast<unsigned long long>((*log)->TailOffset().value()));
  std::fflush(stdout);
  std::mutex out_mu;
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t) {
    workers.emplace_back([&, t] {
      for (uint64_t seq = 0;; ++seq) {
        std::string p = PayloadFor(uint64_t(t), seq, size);
        auto r = (*log)->Append(AppendRecord{AsBytes(p), felix::Generation(1), 0});
        if (!r) {
          std::fprintf(stderr, "append failed: %s\n", r.error().ToString().c_str());
          std::exit(1);
        }
        std::lock_guard<std::mutex> l(out_mu);
        std::printf("ack %llu %d %llu\n", static_cast<unsigned long long>(r->first_offset.value()),
                    t, static_cast<unsigned long long>(seq));
        std::fflush(stdout);
      }
    });
  }
  for (auto& w : workers) w.join();
  return 0;
}
