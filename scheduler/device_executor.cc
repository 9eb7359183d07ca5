#include "scheduler/device_executor.h"

#include "absl/strings/str_cat.h"

namespace infergate {

DeviceExecutor::DeviceExecutor(DeviceId device, int workers, size_t capacity, BatchRunner runner)
    : device_(device), capacity_(capacity), runner_(std::move(runner)) {
  if (workers < 1) workers = 1;
  workers_.reserve(workers);
  for (int i = 0; i < workers; ++i) workers_.emplace_back([this] { WorkerLoop(); });
}

DeviceExecutor::~DeviceExecutor() { Stop(); }

namespace {

// Tells the core an idle poll is in progress (x86 PAUSE, arm64 YIELD), so a
// sibling hyper-thread gets the pipeline; elsewhere a plain compiler barrier.
inline void CpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__) || defined(__arm__)
  asm volatile("yield" ::: "memory");
#else
  std::atomic_signal_fence(std::memory_order_seq_cst);
#endif
}

}  // namespace

absl::Status DeviceExecutor::Submit(std::shared_ptr<Job> job) {
  bool cancelled_already = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!accepting_) {
      return absl::UnavailableError(
          absl::StrCat("server is shutting down; device ", device_.ToString(), " takes no new work"));
    }
    if (queue_.size() >= capacity_) {
      return absl::ResourceExhaustedError(absl::StrCat("device ", device_.ToString(), " queue is full (", capacity_,
                                                       " requests waiting)"));
    }
    // A client that cancelled while the job moved here (a fallback) may have
    // looked at the executor before this one was stored. This store and the
    // load after it, both sequentially consistent, pair with Job::Cancel's
    // store of `cancelled` and load of `executor`: at least one side sees
    // the other and purges. (The load is under the lock: once unlocked, a
    // worker may run and free the job.)
    job->executor.store(this);
    cancelled_already = job->cancelled.load();
    queue_.push_back(std::move(job));
    depth_.store(queue_.size(), std::memory_order_relaxed);
    if (waiting_batchers_ > 0) batch_cv_.notify_all();
  }
  work_cv_.notify_one();
  if (cancelled_already) PurgeCancelled();
  return absl::OkStatus();
}

absl::Status DeviceExecutor::SubmitTask(std::function<void()> task) {
  auto job = std::make_shared<Job>();
  job->task = std::move(task);
  job->enqueued = Clock::now();
  return Submit(std::move(job));
}

size_t DeviceExecutor::PurgeCancelled() {
  Batch removed;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto it = queue_.begin(); it != queue_.end();) {
      if ((*it)->cancelled.load()) {
        removed.push_back(std::move(*it));
        it = queue_.erase(it);
      } else {
        ++it;
      }
    }
    depth_.store(queue_.size(), std::memory_order_relaxed);
  }
  for (auto& job : removed) job->Finish(absl::CancelledError("request cancelled by the client while queued"));
  if (!removed.empty()) {
    idle_cv_.notify_all();
    if (purge_listener_) purge_listener_(removed.size());
  }
  return removed.size();
}

bool DeviceExecutor::WaitIdle(Clock::time_point deadline) {
  std::unique_lock<std::mutex> lock(mu_);
  return idle_cv_.wait_until(lock, deadline, [this] { return queue_.empty() && running_workers_ == 0; });
}

void DeviceExecutor::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    accepting_ = false;
    if (stopping_) return;
    stopping_ = true;
  }
  work_cv_.notify_all();
  batch_cv_.notify_all();
  for (std::thread& t : workers_) {
    if (t.joinable()) t.join();
  }
}

void DeviceExecutor::Collect(const std::shared_ptr<Job>& first, int64_t* rows, Batch* batch) {
  for (auto it = queue_.begin(); it != queue_.end() && *rows < first->max_batch_rows;) {
    const Job& j = **it;
    if (!j.task && !j.cancelled.load() && j.batch_key == first->batch_key && *rows + j.rows <= first->max_batch_rows) {
      *rows += j.rows;
      batch->push_back(std::move(*it));
      it = queue_.erase(it);
    } else {
      ++it;
    }
  }
  depth_.store(queue_.size(), std::memory_order_relaxed);
}

DeviceExecutor::Batch DeviceExecutor::TakeBatch(std::unique_lock<std::mutex>& lock) {
  Batch batch;
  std::shared_ptr<Job> first = std::move(queue_.front());
  queue_.pop_front();
  depth_.store(queue_.size(), std::memory_order_relaxed);
  batch.push_back(first);
  if (first->task || first->batch_key.empty() || first->max_batch_rows <= 1) return batch;
  int64_t rows = first->rows;
  Collect(first, &rows, &batch);
  // Wait for companions only while another worker keeps the device busy: an
  // idle device runs what it has at once, so batching never adds latency
  // at low load. The delay is counted from the oldest request's arrival.
  if (rows < first->max_batch_rows && first->max_queue_delay_us > 0 && running_workers_ > 0) {
    Clock::time_point until = first->enqueued + std::chrono::microseconds(first->max_queue_delay_us);
    ++waiting_batchers_;
    while (rows < first->max_batch_rows && !stopping_ && running_workers_ > 0 &&
           batch_cv_.wait_until(lock, until) != std::cv_status::timeout) {
      Collect(first, &rows, &batch);
    }
    Collect(first, &rows, &batch);
    --waiting_batchers_;
  }
  // Run the prefix whose size goes fastest here; the rest stays at the head
  // of the queue, in order, for the next worker.
  std::vector<int64_t> job_rows;
  job_rows.reserve(batch.size());
  for (const auto& job : batch) job_rows.push_back(job->rows);
  size_t keep = batch_cost_.Choose(first->batch_key, job_rows, first->preferred_batch_rows);
  if (keep < batch.size()) {
    for (size_t i = batch.size(); i-- > keep;) queue_.push_front(std::move(batch[i]));
    batch.resize(keep);
    depth_.store(queue_.size(), std::memory_order_relaxed);
  }
  return batch;
}

void DeviceExecutor::WorkerLoop() {
  for (;;) {
    Batch batch;
    // Poll briefly before sleeping: a futex wake-up costs tens of
    // microseconds, which is most of a small model's serving overhead. Only
    // one idle worker polls at a time, and only while the device is idle:
    // when another worker is running, the cores are better left to it and
    // to the threads reading requests off the network.
    int no_spinner = 0;
    if (spin_us_ > 0 && depth_.load(std::memory_order_relaxed) == 0 &&
        running_jobs_.load(std::memory_order_relaxed) == 0 && spinning_.compare_exchange_strong(no_spinner, 1)) {
      Clock::time_point until = Clock::now() + std::chrono::microseconds(spin_us_);
      while (depth_.load(std::memory_order_relaxed) == 0 && running_jobs_.load(std::memory_order_relaxed) == 0 &&
             Clock::now() < until) {
        CpuRelax();
      }
      spinning_.store(0);
    }
    {
      std::unique_lock<std::mutex> lock(mu_);
      work_cv_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping and drained
      batch = TakeBatch(lock);
      ++running_workers_;
      running_jobs_.fetch_add(batch.size(), std::memory_order_relaxed);
    }
    // More work may be waiting for another worker.
    work_cv_.notify_one();
    Clock::time_point start = Clock::now();
    if (batch.size() == 1 && batch[0]->task) {
      batch[0]->task();
    } else {
      runner_(batch);
    }
    busy_us_.fetch_add(MicrosBetween(start, Clock::now()), std::memory_order_relaxed);
    running_jobs_.fetch_sub(batch.size(), std::memory_order_relaxed);
    batch.clear();
    {
      std::lock_guard<std::mutex> lock(mu_);
      --running_workers_;
      if (waiting_batchers_ > 0) batch_cv_.notify_all();  // "others busy" changed
    }
    idle_cv_.notify_all();
  }
}

}  // namespace infergate
