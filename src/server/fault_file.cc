#include "server/fault_file.h"

#if FELIX_FAULT_INJECTION

#include <climits>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>

namespace felix::server {

FaultFile::FaultFile(std::string path, std::shared_ptr<storage::FaultInjector> faults)
    : path_(std::move(path)), faults_(std::move(faults)) {
  Apply();  // before any log opens
  thread_ = std::thread([this] {
    std::unique_lock lock(mu_);
    while (!cv_.wait_for(lock, std::chrono::milliseconds(10), [this] { return stop_; })) {
      lock.unlock();
      Apply();
      lock.lock();
    }
  });
}

FaultFile::~FaultFile() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
  faults_->HoldSyncs(false);
}

void FaultFile::Apply() {
  std::ifstream in(path_);
  std::stringstream text;
  if (in) text << in.rdbuf();
  if (text.str() == applied_) return;
  applied_ = text.str();
  int write_errno = 0;
  int sync_errno = 0;
  long long clock_offset_ms = 0;
  bool hold_syncs = false;
  std::string line;
  while (std::getline(text, line)) {
    auto eq = line.find('=');
    if (eq == std::string::npos) continue;
    std::string key = line.substr(0, eq);
    int value = std::atoi(line.c_str() + eq + 1);
    if (key == "write_errno") write_errno = value;
    if (key == "hold_syncs") hold_syncs = value != 0;
    if (key == "sync_errno") sync_errno = value;
    if (key == "clock_offset_ms") clock_offset_ms = std::atoll(line.c_str() + eq + 1);
  }
  faults_->FailWrites(write_errno != 0 ? INT_MAX : 0, write_errno);
  faults_->FailSyncs(sync_errno != 0 ? INT_MAX : 0, sync_errno);
  faults_->HoldSyncs(hold_syncs);
  clock_offset_ms_.store(clock_offset_ms);
  // Machine-readable, like the listening line: tests wait for it before relying on the fault.
  std::printf(
      "felix-broker faults write_errno=%d hold_syncs=%d sync_errno=%d clock_offset_ms=%lld\n",
      write_errno, hold_syncs ? 1 : 0, sync_errno, clock_offset_ms);
  std::fflush(stdout);
}

}  // namespace felix::server

#endif
