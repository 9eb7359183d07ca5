#pragma once
// A fixed set of interchangeable model instances, each lent to one thread
// at a time: the way a model that can run only one call at a time per
// instance (an AOTInductor package under LibTorch 2.6) runs on several
// workers at once.
//
//   InstancePool<Runner> pool(std::move(runners));
//   { InstancePool<Runner>::Loan loan = pool.Borrow(); loan->run(...); }
//
// Borrow hands out a free instance, the one returned most recently first
// (its memory is the likeliest still in cache), and waits while all are
// lent. A Loan returns its instance when destroyed.
//
// Threading: Borrow and the Loan destructor may run on any thread. Loans
// must not outlive the pool. The pool never runs a caller's code under its
// lock.

#include <condition_variable>
#include <cstddef>
#include <memory>
#include <utility>
#include <vector>

#include "common/mutex.h"

namespace infergate {

template <typename T>
class InstancePool {
 public:
  // `instances` must not be empty nor hold a null pointer.
  explicit InstancePool(std::vector<std::unique_ptr<T>> instances) : instances_(std::move(instances)) {
    free_.reserve(instances_.size());
    for (size_t i = instances_.size(); i-- > 0;) free_.push_back(i);
  }
  InstancePool(const InstancePool&) = delete;
  InstancePool& operator=(const InstancePool&) = delete;

  class Loan {
   public:
    Loan(Loan&& other) noexcept : pool_(std::exchange(other.pool_, nullptr)), index_(other.index_) {}
    Loan& operator=(Loan&&) = delete;
    ~Loan() {
      if (pool_) pool_->Return(index_);
    }
    T& operator*() const { return *pool_->instances_[index_]; }
    T* operator->() const { return pool_->instances_[index_].get(); }
    // Which instance this is, 0 to size() - 1.
    size_t index() const { return index_; }

   private:
    friend class InstancePool;
    Loan(InstancePool* pool, size_t index) : pool_(pool), index_(index) {}
    InstancePool* pool_;
    size_t index_;
  };

  Loan Borrow() {
    UniqueMutexLock lock(mu_);
    while (free_.empty()) returned_.wait(lock.native());
    const size_t index = free_.back();
    free_.pop_back();
    return Loan(this, index);
  }

  size_t size() const { return instances_.size(); }
  // The instances, for what every one of them must be told (constants to
  // load) while none is lent, or to read what they all share.
  const std::vector<std::unique_ptr<T>>& instances() const { return instances_; }

 private:
  void Return(size_t index) {
    {
      MutexLock lock(mu_);
      free_.push_back(index);
    }
    returned_.notify_one();
  }

  const std::vector<std::unique_ptr<T>> instances_;
  Mutex mu_;
  std::condition_variable returned_;
  std::vector<size_t> free_ ABSL_GUARDED_BY(mu_);  // a stack: the last returned is lent first
};

}  // namespace infergate
