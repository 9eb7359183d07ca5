#pragma once
// A device's bounded queue and the worker threads that drain it, forming
// batches of compatible jobs on the way out.
//
// Threading: Submit, PurgeCancelled and the figures may be called from any
// thread. The batch runner and tasks run on this executor's worker threads,
// one batch per worker at a time; they may Submit to other executors (a
// fallback) but must not wait for them. The purge listener runs on the
// thread that purged, outside the queue's lock.

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "devices/device_id.h"
#include "scheduler/batch_cost.h"
#include "scheduler/job.h"

namespace infergate {

class DeviceExecutor {
 public:
  using Batch = std::vector<std::shared_ptr<Job>>;
  // Runs an inference batch (all jobs share a batch key, or it is one job).
  using BatchRunner = std::function<void(Batch&)>;

  DeviceExecutor(DeviceId device, int workers, size_t capacity, BatchRunner runner);
  ~DeviceExecutor();

  // Queues `job`. RESOURCE_EXHAUSTED naming the device when the queue is
  // full, UNAVAILABLE once Stop has begun. (Draining refuses new requests
  // in the scheduler, so work already accepted can still move here.)
  absl::Status Submit(std::shared_ptr<Job> job);
  // Runs `task` as a job of its own (explicit loads).
  absl::Status SubmitTask(std::function<void()> task);

  // Takes cancelled jobs out of the queue and answers them CANCELLED.
  size_t PurgeCancelled();
  // Told how many jobs each purge answered CANCELLED (for metrics). Set
  // before the first Submit.
  void set_purge_listener(std::function<void(size_t)> listener) { purge_listener_ = std::move(listener); }

  // Waits until nothing is queued or running, or `deadline`; true if idle.
  bool WaitIdle(Clock::time_point deadline);
  // Refuses new work, runs what is queued, joins the workers.
  void Stop();

  size_t queue_depth() const { return depth_.load(std::memory_order_relaxed); }
  size_t in_flight() const { return running_jobs_.load(std::memory_order_relaxed); }
  int workers() const { return static_cast<int>(workers_.size()); }
  size_t capacity() const { return capacity_; }
  // How long an idle worker polls for work before it sleeps.
  void set_spin_us(int us) { spin_us_ = us; }
  uint64_t busy_us() const { return busy_us_.load(std::memory_order_relaxed); }
  const DeviceId& device() const { return device_; }
  // The batcher sizes batches by what they cost here (see BatchCostModel);
  // the runner reports each batch's compute time.
  void RecordBatchCost(const std::string& batch_key, int64_t rows, uint64_t us) {
    batch_cost_.Record(batch_key, rows, us);
  }

 private:
  void WorkerLoop();
  Batch TakeBatch(std::unique_lock<std::mutex>& lock);
  void Collect(const std::shared_ptr<Job>& first, int64_t* rows, Batch* batch);

  DeviceId device_;
  size_t capacity_;
  BatchRunner runner_;
  std::function<void(size_t)> purge_listener_;
  mutable std::mutex mu_;
  std::condition_variable work_cv_;   // workers wait for jobs
  std::condition_variable batch_cv_;  // a batcher waits for companions
  std::condition_variable idle_cv_;   // WaitIdle
  std::deque<std::shared_ptr<Job>> queue_;
  bool accepting_ = true;
  bool stopping_ = false;
  int running_workers_ = 0;  // under mu_
  int waiting_batchers_ = 0;  // under mu_
  std::atomic<size_t> depth_{0};
  std::atomic<size_t> running_jobs_{0};
  std::atomic<uint64_t> busy_us_{0};
  std::atomic<int> spin_us_{0};
  std::atomic<int> spinning_{0};
  BatchCostModel batch_cost_;
  std::vector<std::thread> workers_;
};

}  // namespace infergate
