#pragma once
// std::mutex and std::shared_mutex with clang's thread-safety annotations,
// so the rule "this member is only touched under that lock" is checked by
// the compiler (-Wthread-safety, in the ThreadSanitizer build) instead of
// kept in comments. They behave exactly as the standard types (the same
// lock underneath, no extra work), and the standard condition variables
// wait on them through UniqueMutexLock::native().
//
//   Mutex mu_;
//   int count_ ABSL_GUARDED_BY(mu_);
//   void Bump() { MutexLock lock(mu_); ++count_; }
//   void BumpLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { ++count_; }
//
// libstdc++'s own lock types carry no annotations, so code that guards an
// annotated member takes these guards, not std::lock_guard.

#include <mutex>
#include <shared_mutex>

#include "absl/base/thread_annotations.h"

namespace infergate {

class ABSL_LOCKABLE Mutex {
 public:
  void lock() ABSL_EXCLUSIVE_LOCK_FUNCTION() { mu_.lock(); }
  void unlock() ABSL_UNLOCK_FUNCTION() { mu_.unlock(); }
  // Tells the analysis the caller holds the lock (where it cannot see it,
  // such as a callback run under it); checks nothing at run time.
  void AssertHeld() const ABSL_ASSERT_EXCLUSIVE_LOCK() {}

 private:
  friend class UniqueMutexLock;
  std::mutex mu_;
};

// std::lock_guard for Mutex.
class ABSL_SCOPED_LOCKABLE MutexLock {
 public:
  explicit MutexLock(Mutex& mu) ABSL_EXCLUSIVE_LOCK_FUNCTION(mu) : mu_(mu) { mu_.lock(); }
  ~MutexLock() ABSL_UNLOCK_FUNCTION() { mu_.unlock(); }
  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;

 private:
  Mutex& mu_;
};

// std::unique_lock for Mutex: unlocks and locks again on the way, and lends
// the standard lock to a std::condition_variable (whose wait returns with
// the lock held, as the analysis assumes).
class ABSL_SCOPED_LOCKABLE UniqueMutexLock {
 public:
  explicit UniqueMutexLock(Mutex& mu) ABSL_EXCLUSIVE_LOCK_FUNCTION(mu) : lock_(mu.mu_) {}
  ~UniqueMutexLock() ABSL_UNLOCK_FUNCTION() {}
  UniqueMutexLock(const UniqueMutexLock&) = delete;
  UniqueMutexLock& operator=(const UniqueMutexLock&) = delete;

  void Unlock() ABSL_UNLOCK_FUNCTION() { lock_.unlock(); }
  void Lock() ABSL_EXCLUSIVE_LOCK_FUNCTION() { lock_.lock(); }
  std::unique_lock<std::mutex>& native() { return lock_; }

 private:
  std::unique_lock<std::mutex> lock_;
};

class ABSL_LOCKABLE SharedMutex {
 public:
  void lock() ABSL_EXCLUSIVE_LOCK_FUNCTION() { mu_.lock(); }
  void unlock() ABSL_UNLOCK_FUNCTION() { mu_.unlock(); }
  void lock_shared() ABSL_SHARED_LOCK_FUNCTION() { mu_.lock_shared(); }
  void unlock_shared() ABSL_UNLOCK_FUNCTION() { mu_.unlock_shared(); }

 private:
  std::shared_mutex mu_;
};

// std::shared_lock for SharedMutex.
class ABSL_SCOPED_LOCKABLE ReaderLock {
 public:
  explicit ReaderLock(SharedMutex& mu) ABSL_SHARED_LOCK_FUNCTION(mu) : mu_(mu) { mu_.lock_shared(); }
  ~ReaderLock() ABSL_UNLOCK_FUNCTION() { mu_.unlock_shared(); }
  ReaderLock(const ReaderLock&) = delete;
  ReaderLock& operator=(const ReaderLock&) = delete;

 private:
  SharedMutex& mu_;
};

// std::lock_guard for SharedMutex.
class ABSL_SCOPED_LOCKABLE WriterLock {
 public:
  explicit WriterLock(SharedMutex& mu) ABSL_EXCLUSIVE_LOCK_FUNCTION(mu) : mu_(mu) { mu_.lock(); }
  ~WriterLock() ABSL_UNLOCK_FUNCTION() { mu_.unlock(); }
  WriterLock(const WriterLock&) = delete;
  WriterLock& operator=(const WriterLock&) = delete;

 private:
  SharedMutex& mu_;
};

}  // namespace infergate
