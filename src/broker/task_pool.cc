#include "broker/task_pool.h"

#include "broker/executor.h"

namespace felix::broker {

TaskPool::TaskPool(std::string name, size_t threads) {
  for (size_t i = 0; i < threads; ++i) {
    threads_.emplace_back([this] { Run(); });
    NameThread(threads_.back(), name + "-" + std::to_string(i));
  }
}

TaskPool::~TaskPool() {
  Stop();
}

bool TaskPool::Post(Task task) {
  {
    MutexLock lock(mu_);
    if (stopping_) return false;
    tasks_.push_back(std::move(task));
  }
  wake_.notify_one();
  return true;
}

void TaskPool::Stop() {
  {
    MutexLock lock(mu_);
    stopping_ = true;
  }
  wake_.notify_all();
  for (auto& thread : threads_) {
    if (thread.joinable()) thread.join();
  }
}

void TaskPool::Run() {
  MutexLock lock(mu_);
  while (true) {
    if (!tasks_.empty()) {
      Task task = std::move(tasks_.front());
      tasks_.pop_front();
      lock.Unlock();
      task();
      lock.Lock();
      continue;
    }
    if (stopping_) return;
    wake_.wait(lock.native());
  }
}

}  // namespace felix::broker
