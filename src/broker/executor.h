// Executor: one thread that runs posted tasks in order, and timers by deadline.
//
// Shard state is owned by exactly one Executor: every read or write of that state runs as a
// task on it, so the state needs no lock. Other threads (QUIC loop, storage flusher) hand work
// over with Post(). Post/PostAfter/Cancel are thread-safe. Tasks must not block for long (no
// fsync, no network waits): they start I/O and finish in a later task.
//
// RunOrPost() lets a caller run a task on its own thread when the executor is idle (nothing
// running, nothing queued): the caller then holds the executor exactly as its thread would —
// no other task starts until it is done, and tasks posted meanwhile run after it — so a
// request from the QUIC loop skips two thread wakeups without giving up the one-owner rule.
//
// Stop() runs every task already posted, drops pending timers, waits for an inline run, and
// joins the thread; it must not be called from the executor's own thread. The destructor
// calls Stop().
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <queue>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "common/mutex.h"

namespace felix::broker {

// Names `thread` (at most 15 characters are kept) so it shows in top and perf.
void NameThread(std::thread& thread, const std::string& name);

class Executor {
 public:
  using Task = std::function<void()>;
  using Clock = std::chrono::steady_clock;
  using TimerId = uint64_t;

  explicit Executor(std::string name);
  ~Executor();
  Executor(const Executor&) = delete;
  Executor& operator=(const Executor&) = delete;

  // False (and the task is dropped) once Stop() has begun.
  bool Post(Task task);
  // Runs `task` now on the calling thread if the executor is idle — then also the few tasks
  // it posted to this executor (a continuation), in order, before handing the executor back
  // — else posts it. False (dropped) once Stop() has begun. Tasks run this way must not wait
  // for the calling thread's own work (they never block anyway, see above).
  bool RunOrPost(Task task);
  // RunOrPost without the continuations: only `task` runs inline; whatever was posted
  // meanwhile runs on the executor's own thread. For a log's flusher thread, which must not
  // run other shard work (a queued close would join the flusher from itself, and a long task
  // would hold back the next fsync).
  bool RunAloneOrPost(Task task);
  // RunOrPost's inline half: runs `task` (and its continuations) now on the calling thread if
  // the executor is idle; otherwise runs nothing and says why. For a caller whose task borrows
  // what lives only during the call (a received frame's views): it makes an owned copy to
  // Post only when the executor is busy.
  enum class InlineRun { kRan, kBusy, kStopped };
  InlineRun TryRunInline(const std::function<void()>& task);
  // Runs `task` at or after `delay` from now, unless cancelled first. 0 when stopped.
  TimerId PostAfter(Clock::duration delay, Task task);
  // True if the timer had not fired yet and now never will.
  bool Cancel(TimerId id);

  void Stop();

  // True when called from this executor's thread, or from a task RunOrPost runs inline (for
  // assertions in owned state).
  bool InExecutorThread() const {
    auto me = std::this_thread::get_id();
    return me == thread_.get_id() || me == inline_thread_.load(std::memory_order_acquire);
  }
  const std::string& name() const { return name_; }

 private:
  struct Timer {
    Clock::time_point deadline;
    TimerId id;
    bool operator>(const Timer& o) const {
      return deadline != o.deadline ? deadline > o.deadline : id > o.id;
    }
  };
  void Run();
  // RunOrPost (`continuations`) and RunAloneOrPost.
  bool RunInlineOrPost(Task task, bool continuations);
  // After an inline run: the continuations (if asked), then the executor is handed back.
  void FinishInlineRun(bool continuations);
  // Queues `task`; true when the thread must be notified.
  bool Enqueue(Task task) REQUIRES(mu_);
  // Pops the next queued task (there is one).
  Task PopTask() REQUIRES(mu_);

  std::string name_;
  Mutex mu_;
  std::condition_variable wake_;
  std::deque<Task> tasks_ GUARDED_BY(mu_);
  std::priority_queue<Timer, std::vector<Timer>, std::greater<>> timers_ GUARDED_BY(mu_);
  std::unordered_map<TimerId, Task> timer_tasks_ GUARDED_BY(mu_);
  TimerId next_timer_id_ GUARDED_BY(mu_) = 1;
  bool stopping_ GUARDED_BY(mu_) = false;
  bool busy_ GUARDED_BY(mu_) = false;          // a task runs (here or inline)
  bool inline_run_ GUARDED_BY(mu_) = false;    // ... and it was RunOrPost's caller
  bool thread_waits_ GUARDED_BY(mu_) = false;  // the thread waits for an inline run to end
  std::atomic<std::thread::id> inline_thread_{};
  std::thread thread_;
};

}  // namespace felix::broker
