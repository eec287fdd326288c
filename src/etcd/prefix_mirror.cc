#include "etcd/prefix_mirror.h"

namespace felix::etcd {

PrefixMirror::PrefixMirror(EtcdClient& client, std::string prefix, MirrorCallbacks callbacks,
                           Backoff backoff)
    : client_(client),
      prefix_(std::move(prefix)),
      callbacks_(std::move(callbacks)),
      backoff_(backoff) {}

PrefixMirror::~PrefixMirror() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void PrefixMirror::Start() {
  thread_ = std::thread([this] { Run(); });
}

void PrefixMirror::Enqueue(Item item) {
  {
    std::lock_guard lock(mu_);
    if (item.watch_epoch != epoch_) return;
    queue_.push_back(std::move(item));
  }
  cv_.notify_all();
}

void PrefixMirror::Resync() {
  {
    std::lock_guard lock(mu_);
    if (stopping_) return;
    ++resyncs_asked_;
  }
  cv_.notify_all();
}

bool PrefixMirror::Snapshot() {
  watch_.reset();  // waits until the old watch's callbacks are done
  while (true) {
    {
      std::lock_guard lock(mu_);
      resyncs_served_ = resyncs_asked_;  // the read below begins after every one of them
    }
    auto range = client_.GetPrefix(prefix_);
    if (range) {
      backoff_.Reset();
      callbacks_.on_snapshot(range->kvs, range->revision);
      revision_ = range->revision;
      ++snapshots_;
      uint64_t epoch;
      {
        std::lock_guard lock(mu_);
        queue_.clear();
        epoch = ++epoch_;
      }
      WatchOptions options;
      options.key = prefix_;
      options.range_end = PrefixEnd(prefix_);
      options.start_revision = range->revision + 1;
      WatchCallbacks cb;
      cb.on_events = [this, epoch](const std::vector<Event>& events) {
        Enqueue(Item{epoch, false, events});
      };
      cb.on_compacted = [this, epoch](int64_t) { Enqueue(Item{epoch, true, {}}); };
      cb.on_broken = [this](const EtcdError& error) {
        if (callbacks_.on_error) callbacks_.on_error(error);
      };
      auto watch = client_.Watch(options, std::move(cb));
      if (watch) {
        watch_ = std::move(*watch);
        return true;
      }
      if (callbacks_.on_error) callbacks_.on_error(watch.error());
    } else if (callbacks_.on_error) {
      callbacks_.on_error(range.error());
    }
    std::unique_lock lock(mu_);
    if (cv_.wait_for(lock, backoff_.Next(), [this] { return stopping_; })) return false;
  }
}

void PrefixMirror::Run() {
  if (!Snapshot()) return;
  while (true) {
    Item item;
    {
      std::unique_lock lock(mu_);
      cv_.wait(lock, [this] {
        return stopping_ || !queue_.empty() || resyncs_asked_ != resyncs_served_;
      });
      if (stopping_) break;
      if (resyncs_asked_ != resyncs_served_) {
        lock.unlock();
        if (!Snapshot()) break;
        continue;
      }
      item = std::move(queue_.front());
      queue_.pop_front();
    }
    if (item.compacted) {
      if (!Snapshot()) break;
      continue;
    }
    callbacks_.on_events(item.events);
    revision_ = item.events.back().kv.mod_revision;
  }
  watch_.reset();
}

}  // namespace felix::etcd
