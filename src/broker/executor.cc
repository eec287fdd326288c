#include "broker/executor.h"

#include <pthread.h>

namespace felix::broker {

void NameThread(std::thread& thread, const std::string& name) {
  pthread_setname_np(thread.native_handle(), name.substr(0, 15).c_str());
}

Executor::Executor(std::string name) : name_(std::move(name)) {
  thread_ = std::thread([this] { Run(); });
  NameThread(thread_, name_);
}

Executor::~Executor() {
  Stop();
}

bool Executor::Post(Task task) {
  bool wake;
  {
    MutexLock lock(mu_);
    if (stopping_) return false;
    wake = Enqueue(std::move(task));
  }
  if (wake) wake_.notify_one();
  return true;
}

bool Executor::Enqueue(Task task) {
  tasks_.push_back(std::move(task));
  // During an inline run the thread is woken when the executor is handed back.
  return !inline_run_;
}

bool Executor::RunOrPost(Task task) {
  return RunInlineOrPost(std::move(task), true);
}

bool Executor::RunAloneOrPost(Task task) {
  return RunInlineOrPost(std::move(task), false);
}

bool Executor::RunInlineOrPost(Task task, bool continuations) {
  {
    MutexLock lock(mu_);
    if (stopping_) return false;
    if (busy_ || !tasks_.empty()) {
      bool wake = Enqueue(std::move(task));
      lock.Unlock();
      if (wake) wake_.notify_one();
      return true;
    }
    busy_ = inline_run_ = true;
  }
  inline_thread_.store(std::this_thread::get_id(), std::memory_order_release);
  task();
  FinishInlineRun(continuations);
  return true;
}

Executor::InlineRun Executor::TryRunInline(const std::function<void()>& task) {
  {
    MutexLock lock(mu_);
    if (stopping_) return InlineRun::kStopped;
    if (busy_ || !tasks_.empty()) return InlineRun::kBusy;
    busy_ = inline_run_ = true;
  }
  inline_thread_.store(std::this_thread::get_id(), std::memory_order_release);
  task();
  FinishInlineRun(true);
  return InlineRun::kRan;
}

void Executor::FinishInlineRun(bool continuations) {
  // Continuations the task posted (a shard answering itself on its executor) run here too,
  // but only as many as were queued when it ended: a task that keeps re-posting itself (a
  // replay yielding) goes back to the executor's own thread.
  MutexLock lock(mu_);
  for (size_t n = continuations ? tasks_.size() : 0; n > 0 && !tasks_.empty(); --n) {
    Task next = PopTask();
    lock.Unlock();
    next();
    lock.Lock();
  }
  inline_thread_.store(std::thread::id(), std::memory_order_release);
  busy_ = inline_run_ = false;
  bool wake = thread_waits_ || !tasks_.empty();
  thread_waits_ = false;
  lock.Unlock();
  if (wake) wake_.notify_one();
}

Executor::Task Executor::PopTask() {
  Task task = std::move(tasks_.front());
  tasks_.pop_front();
  return task;
}

Executor::TimerId Executor::PostAfter(Clock::duration delay, Task task) {
  TimerId id;
  {
    MutexLock lock(mu_);
    if (stopping_) return 0;
    id = next_timer_id_++;
    timers_.push(Timer{Clock::now() + delay, id});
    timer_tasks_.emplace(id, std::move(task));
  }
  wake_.notify_one();
  return id;
}

bool Executor::Cancel(TimerId id) {
  MutexLock lock(mu_);
  // The heap entry stays until it surfaces; without its task it is skipped.
  return timer_tasks_.erase(id) > 0;
}

void Executor::Stop() {
  {
    MutexLock lock(mu_);
    if (stopping_ && !thread_.joinable()) return;
    stopping_ = true;
  }
  wake_.notify_one();
  if (thread_.joinable()) thread_.join();
}

void Executor::Run() {
  MutexLock lock(mu_);
  while (true) {
    if (inline_run_) {
      // RunOrPost's caller holds the executor; it wakes us when it hands it back.
      thread_waits_ = true;
      wake_.wait(lock.native());
      continue;
    }
    // Due timers first, so a steady stream of posts cannot starve them.
    auto now = Clock::now();
    while (!timers_.empty() && timers_.top().deadline <= now && !stopping_) {
      TimerId id = timers_.top().id;
      timers_.pop();
      auto it = timer_tasks_.find(id);
      if (it == timer_tasks_.end()) continue;  // cancelled
      Task task = std::move(it->second);
      timer_tasks_.erase(it);
      busy_ = true;
      lock.Unlock();
      task();
      lock.Lock();
      busy_ = false;
    }
    if (!tasks_.empty()) {
      Task task = PopTask();
      busy_ = true;
      lock.Unlock();
      task();
      lock.Lock();
      busy_ = false;
      continue;
    }
    if (stopping_) break;
    if (timers_.empty()) {
      wake_.wait(lock.native());
    } else {
      // A copy: the heap may reallocate while the lock is released inside wait_until.
      Clock::time_point next = timers_.top().deadline;
      wake_.wait_until(lock.native(), next);
    }
  }
  timer_tasks_.clear();
}

}  // namespace felix::broker
