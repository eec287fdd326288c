// ShardCell: a shard as request paths hold it before and after its logs are open.
//
// BrokerCore hands out a handle (the owning executor + the cell) at once, without I/O; the
// logs are opened and replayed on the core's opener thread, and the result is settled into the
// cell by a task on the owning executor. Work for the shard runs on that executor and asks
// `WhenOpen`: before the open settled, the work is deferred, and the settle runs every
// deferred piece in the order it was posted — so the per-shard order of requests is kept, and
// neither the QUIC loop thread nor other shards wait for a slow open.
//
// Threading: every method runs on the owning executor. The cell outlives the handles that
// hold it.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include "broker/executor.h"
#include "common/result.h"

namespace felix::broker {

template <typename Opened>
class ShardCell {
 public:
  using Task = std::function<void(Result<Opened*>)>;

  // Runs `task` now if the open settled (with the shard, or the error that refused it), else
  // once it does.
  //
  // Any callable taking Result<Opened*>: once settled (every request but those racing the
  // open) it is called as it is, not wrapped in a Task first — a std::function around a
  // request's lambda was an allocation per request (docs/performance.md, change 35).
  template <typename F>
  void WhenOpen(F&& task) {
    if (!settled_) {
      deferred_.emplace_back(std::forward<F>(task));
      return;
    }
    if (opened_) {
      task(Result<Opened*>(&*opened_));
      return;
    }
    task(Result<Opened*>(tl::unexpected(*error_)));
  }
  // The open shard, or nullptr (not settled yet, or refused).
  Opened* get() { return opened_ ? &*opened_ : nullptr; }
  bool settled() const { return settled_; }

  // The opener's result; runs the deferred tasks in order. Once only.
  void Settle(Result<Opened> result) {
    if (result) {
      opened_ = std::move(*result);
    } else {
      error_ = result.error();
    }
    settled_ = true;
    auto deferred = std::move(deferred_);
    deferred_.clear();
    for (auto& task : deferred) Run(task);
  }

 private:
  void Run(const Task& task) {
    if (opened_) return task(&*opened_);
    task(tl::unexpected(*error_));
  }

  bool settled_ = false;
  std::optional<Opened> opened_;
  std::optional<Error> error_;
  std::vector<Task> deferred_;
};

template <typename Opened>
struct ShardHandle {
  std::shared_ptr<ShardCell<Opened>> cell;
  Executor* executor = nullptr;
};

}  // namespace felix::broker
