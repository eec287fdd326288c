// TaskPool: a few threads taking tasks from one shared queue, for slow work that must not
// wait behind other slow work of its kind (opening shard logs: one large shard's replay must
// not hold up the open of the next shard).
//
// Threading: Post is thread-safe. Stop() runs what is already queued, then joins every thread;
// it must not be called from a pool thread. The destructor calls Stop().
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "common/mutex.h"

namespace felix::broker {

class TaskPool {
 public:
  using Task = std::function<void()>;

  TaskPool(std::string name, size_t threads);
  ~TaskPool();
  TaskPool(const TaskPool&) = delete;
  TaskPool& operator=(const TaskPool&) = delete;

  // False (and the task is dropped) once Stop() has begun.
  bool Post(Task task);
  void Stop();

 private:
  void Run();

  Mutex mu_;
  std::condition_variable wake_;
  std::deque<Task> tasks_ GUARDED_BY(mu_);
  bool stopping_ GUARDED_BY(mu_) = false;
  std::vector<std::thread> threads_;
};

}  // namespace felix::broker
