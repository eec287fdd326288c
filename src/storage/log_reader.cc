#include "storage/log_reader.h"

namespace felix::storage {

StorageResult<Record> LogReader::ReadOne(Offset offset) const {
  auto batch = Read(offset, ReadLimits{1, 1});
  if (!batch) return tl::unexpected(batch.error());
  if (batch->records.empty() || batch->records.front().offset != offset) {
    return StorageFail(
        StorageErrc::kInvalidArgument,
        "no record at offset " + to_string(offset) + " (tail " + to_string(TailOffset()) + ")");
  }
  return std::move(batch->records.front());
}

Offset TailNotifier::tail() const {
  std::lock_guard<std::mutex> l(mu_);
  return tail_;
}

void TailNotifier::Advance(Offset tail) {
  std::unique_lock<std::mutex> l(mu_);
  if (tail <= tail_) return;
  tail_ = tail;
  FireLocked(l);
}

void TailNotifier::Set(Offset tail) {
  std::unique_lock<std::mutex> l(mu_);
  tail_ = tail;
  FireLocked(l);
}

void TailNotifier::FireLocked(std::unique_lock<std::mutex>& l) {
  bool wake = blocked_ > 0;
  std::vector<TailCallback> ready;
  while (!by_offset_.empty() && by_offset_.begin()->first < tail_) {
    auto id = by_offset_.begin()->second;
    by_offset_.erase(by_offset_.begin());
    auto it = watches_.find(id);
    if (it != watches_.end()) {
      ready.push_back(std::move(it->second.cb));
      watches_.erase(it);
    }
  }
  l.unlock();
  if (wake) cv_.notify_all();
  for (auto& cb : ready) cb(WaitOutcome::kReady);
}

WaitOutcome TailNotifier::Wait(Offset offset, Deadline deadline) const {
  std::unique_lock<std::mutex> l(mu_);
  ++blocked_;
  bool ok = cv_.wait_until(l, deadline, [&] { return closed_ || tail_ > offset; });
  --blocked_;
  if (tail_ > offset) return WaitOutcome::kReady;
  if (closed_) return WaitOutcome::kClosed;
  return ok ? WaitOutcome::kReady : WaitOutcome::kTimeout;
}

uint64_t TailNotifier::Notify(Offset offset, TailCallback cb) {
  std::unique_lock<std::mutex> l(mu_);
  if (tail_ > offset || closed_) {
    WaitOutcome o = tail_ > offset ? WaitOutcome::kReady : WaitOutcome::kClosed;
    l.unlock();
    cb(o);
    return 0;
  }
  uint64_t id = next_id_++;
  watches_.emplace(id, Watch{offset, std::move(cb)});
  by_offset_.emplace(offset, id);
  return id;
}

bool TailNotifier::Cancel(uint64_t id) {
  std::lock_guard<std::mutex> l(mu_);
  auto it = watches_.find(id);
  if (it == watches_.end()) return false;
  auto range = by_offset_.equal_range(it->second.offset);
  for (auto o = range.first; o != range.second; ++o) {
    if (o->second == id) {
      by_offset_.erase(o);
      break;
    }
  }
  watches_.erase(it);
  return true;
}

void TailNotifier::Close() {
  std::vector<TailCallback> all;
  {
    std::lock_guard<std::mutex> l(mu_);
    closed_ = true;
    for (auto& [id, w] : watches_) all.push_back(std::move(w.cb));
    watches_.clear();
    by_offset_.clear();
  }
  cv_.notify_all();
  for (auto& cb : all) cb(WaitOutcome::kClosed);
}

}  // namespace felix::storage
