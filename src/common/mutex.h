// Mutex and lock types that clang's thread-safety analysis understands (-Wthread-safety, on in
// the `clang` preset), with the annotation macros. Under g++ the macros expand to nothing and
// the types are plain std::mutex wrappers.
//
// Use: a member the mutex guards is declared `GUARDED_BY(mu_)`; a private helper that expects
// the lock held is declared `REQUIRES(mu_)`. Condition variables wait on `MutexLock::native()`.
#pragma once

#include <mutex>

#if defined(__clang__)
#define FELIX_THREAD_ANNOTATION(x) __attribute__((x))
#else
#define FELIX_THREAD_ANNOTATION(x)
#endif

#define CAPABILITY(x) FELIX_THREAD_ANNOTATION(capability(x))
#define SCOPED_CAPABILITY FELIX_THREAD_ANNOTATION(scoped_lockable)
#define GUARDED_BY(x) FELIX_THREAD_ANNOTATION(guarded_by(x))
#define PT_GUARDED_BY(x) FELIX_THREAD_ANNOTATION(pt_guarded_by(x))
#define REQUIRES(...) FELIX_THREAD_ANNOTATION(requires_capability(__VA_ARGS__))
#define EXCLUDES(...) FELIX_THREAD_ANNOTATION(locks_excluded(__VA_ARGS__))
#define ACQUIRE(...) FELIX_THREAD_ANNOTATION(acquire_capability(__VA_ARGS__))
#define RELEASE(...) FELIX_THREAD_ANNOTATION(release_capability(__VA_ARGS__))
#define NO_THREAD_SAFETY_ANALYSIS FELIX_THREAD_ANNOTATION(no_thread_safety_analysis)

namespace felix {

class CAPABILITY("mutex") Mutex {
 public:
  void lock() ACQUIRE() { mu_.lock(); }
  void unlock() RELEASE() { mu_.unlock(); }
  std::mutex& native() { return mu_; }

 private:
  std::mutex mu_;
};

// Holds `mu` for its scope; `native()` is a std::unique_lock for condition variables (a wait
// releases and retakes the same mutex, which the analysis cannot see and need not).
class SCOPED_CAPABILITY MutexLock {
 public:
  explicit MutexLock(Mutex& mu) ACQUIRE(mu) : lock_(mu.native()) {}
  ~MutexLock() RELEASE() {}
  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;
  // Releases and retakes the lock inside the scope (to run work unlocked).
  void Unlock() RELEASE() { lock_.unlock(); }
  void Lock() ACQUIRE() { lock_.lock(); }
  std::unique_lock<std::mutex>& native() { return lock_; }

 private:
  std::unique_lock<std::mutex> lock_;
};

}  // namespace felix
