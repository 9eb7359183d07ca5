#pragma once
// A device's bounded work queue and the worker threads that drain it.

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "devices/device_id.h"

namespace infergate {

class DeviceExecutor {
 public:
  using Task = std::function<void()>;

  // `init` runs once on each worker thread before it takes work.
  DeviceExecutor(DeviceId device, int workers, size_t capacity, std::function<void()> init = {});
  ~DeviceExecutor();

  // Queues `task`. RESOURCE_EXHAUSTED when the queue is full, UNAVAILABLE
  // once Stop() has begun.
  absl::Status Submit(Task task);

  // Refuses new work, runs what is queued, joins the workers.
  void Stop();

  size_t queue_depth() const;
  size_t in_flight() const { return in_flight_.load(std::memory_order_relaxed); }
  const DeviceId& device() const { return device_; }
  size_t capacity() const { return capacity_; }

 private:
  void WorkerLoop();

  DeviceId device_;
  size_t capacity_;
  std::function<void()> init_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Task> queue_;
  bool stopping_ = false;
  std::atomic<size_t> in_flight_{0};
  std::vector<std::thread> workers_;
};

}  // namespace infergate
