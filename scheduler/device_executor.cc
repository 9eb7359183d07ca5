#include "scheduler/device_executor.h"

#include "absl/strings/str_cat.h"

namespace infergate {

DeviceExecutor::DeviceExecutor(DeviceId device, int workers, size_t capacity, std::function<void()> init)
    : device_(device), capacity_(capacity), init_(std::move(init)) {
  if (workers < 1) workers = 1;
  workers_.reserve(workers);
  for (int i = 0; i < workers; ++i) workers_.emplace_back([this] { WorkerLoop(); });
}

DeviceExecutor::~DeviceExecutor() { Stop(); }

absl::Status DeviceExecutor::Submit(Task task) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) {
      return absl::UnavailableError(absl::StrCat("server is shutting down; device ", device_.ToString(),
                                                 " takes no new work"));
    }
    if (queue_.size() >= capacity_) {
      return absl::ResourceExhaustedError(absl::StrCat("device ", device_.ToString(), " queue is full (",
                                                       capacity_, " requests waiting)"));
    }
    queue_.push_back(std::move(task));
  }
  cv_.notify_one();
  return absl::OkStatus();
}

void DeviceExecutor::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_ && workers_.empty()) return;
    stopping_ = true;
  }
  cv_.notify_all();
  for (std::thread& t : workers_) {
    if (t.joinable()) t.join();
  }
  workers_.clear();
}

size_t DeviceExecutor::queue_depth() const {
  std::lock_guard<std::mutex> lock(mu_);
  return queue_.size();
}

void DeviceExecutor::WorkerLoop() {
  if (init_) init_();
  for (;;) {
    Task task;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping and drained
      task = std::move(queue_.front());
      queue_.pop_front();
      in_flight_.fetch_add(1, std::memory_order_relaxed);
    }
    task();
    in_flight_.fetch_sub(1, std::memory_order_relaxed);
  }
}

}  // namespace infergate
