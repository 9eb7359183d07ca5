#include "scheduler/execution/device_executor.h"

#include <sched.h>

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/thread_name.h"

namespace infergate {

DeviceExecutor::DeviceExecutor(DeviceId device, Options options, BatchRunner runner)
    : device_(device),
      capacity_(options.capacity),
      runner_(std::move(runner)),
      queue_(options.priority_aging, options.fair, /*model_instances=*/device.kind != DeviceKind::kCpu) {
  on_worker_start_ = std::move(options.on_worker_start);
  const int workers = std::max(1, options.workers);
  workers_per_model_.store(workers);
  running_limit_ = options.fair ? workers : 0;
  // With fair sharing, one thread more than one model may use, started
  // when first needed (StartSpareIfDue).
  spare_due_ = options.fair;
  workers_.reserve(workers + 1);
  for (int i = 0; i < workers; ++i) StartWorker();
}

int DeviceExecutor::threads() const {
  MutexLock lock(mu_);
  return static_cast<int>(workers_.size());
}

void DeviceExecutor::GrowForInstances(const Job& job) {
  if (device_.kind == DeviceKind::kCpu || !accepting_) return;
  const int wanted = std::min(static_cast<int>(job.policy().accelerator_instances), kMaxAcceleratorInstances);
  const int workers = workers_per_model_.load();
  if (wanted <= workers) return;
  for (int i = workers; i < wanted; ++i) StartWorker();
  workers_per_model_.store(wanted);
  if (running_limit_ > 0) running_limit_ = wanted;
}

void DeviceExecutor::StartSpareIfDue() {
  if (!spare_due_ || !accepting_ || running_workers_ < workers_per_model_) return;
  spare_due_ = false;
  StartWorker();
}

void DeviceExecutor::StartWorker() {
  // "cpu worker 0", "cuda:1 worker 2": what top -H and perf show.
  std::string name = absl::StrCat(device_.ToString(), " worker ", workers_.size());
  workers_.emplace_back([this, name = std::move(name)] {
    NameThisThread(name);
    WorkerLoop();
  });
}

DeviceExecutor::~DeviceExecutor() { Stop(); }

absl::Status DeviceExecutor::Submit(std::shared_ptr<Job> job, std::optional<RejectionReason>* refusal) {
  bool cancelled_already = false;
  bool wake = false;
  Batch expired;  // answered after unlocking, whatever happens to `job`
  absl::Status status = absl::OkStatus();
  {
    MutexLock lock(mu_);
    Clock::time_point now = Clock::now();
    expired = queue_.TakeExpired(now);
    // A held request's reservation ends as it is queued (or refused): a
    // worker that waited on it looks again.
    const bool unreserved = job->reservation != 0 && reservations_.erase(std::exchange(job->reservation, 0)) > 0;
    if (unreserved && sleeping_workers_ > 0) wake = true;
    if (!accepting_) {
      status = absl::UnavailableError(
          absl::StrCat("server is shutting down; device ", device_.ToString(), " takes no new work"));
    } else if (queue_.size() >= capacity_) {
      if (refusal) *refusal = RejectionReason::kQueueFull;
      status = absl::ResourceExhaustedError(
          absl::StrCat("device ", device_.ToString(), " queue is full (", capacity_, " requests waiting)"));
    } else {
      // A client that cancelled while the job moved here (a fallback) may
      // have looked at the executor before this one was stored. This store
      // and the load after it, both sequentially consistent, pair with
      // Job::Cancel's store of `cancelled` and load of `executor`: at least
      // one side sees the other and purges. (The load is under the lock:
      // once pushed and unlocked, a worker may run and free the job.)
      job->executor.store(this);
      cancelled_already = job->cancelled.load();
      if (absl::Status pushed = queue_.Push(job, now); !pushed.ok()) {
        job->executor.store(nullptr);
        cancelled_already = false;
        if (refusal) *refusal = RejectionReason::kModelQueueFull;
        status = absl::ResourceExhaustedError(absl::StrCat("device ", device_.ToString(), ": ", pushed.message()));
      } else {
        GrowForInstances(*job);
        job->counted_us = job->expected_us;
        expected_work_us_.fetch_add(job->counted_us, std::memory_order_relaxed);
        depth_.store(queue_.size(), std::memory_order_relaxed);
        if (waiting_batchers_ > 0) batch_cv_.notify_all();
        // Only a sleeping worker that may run the job is woken, and none
        // while one polls (it takes the job itself): the fair-share thread
        // sleeps while one model holds the other workers, and waking it
        // for that model's jobs cost two context switches per request.
        bool runnable = queue_.HasRunnable(running_limit_);
        wake = wake || (runnable && sleeping_workers_ > 0 && spinning_.load() == 0);
        if (runnable) StartSpareIfDue();
      }
    }
  }
  if (wake) work_cv_.notify_one();
  RejectExpired(expired);
  if (cancelled_already) PurgeCancelled();
  return status;
}

absl::Status DeviceExecutor::SubmitTask(std::function<void()> task) {
  auto job = std::make_shared<Job>();
  job->task = std::move(task);
  job->enqueued = Clock::now();
  return Submit(std::move(job));
}

uint64_t DeviceExecutor::Reserve(double due_in_us, double run_us) {
  const Clock::time_point now = Clock::now();
  const auto due_in = std::chrono::microseconds(static_cast<int64_t>(std::max(0.0, due_in_us)));
  const auto grace = std::chrono::microseconds(static_cast<int64_t>(std::max(kMinReservationGraceUs, due_in_us / 2)));
  MutexLock lock(mu_);
  const uint64_t id = next_reservation_++;
  reservations_[id] = Reservation{now, now + due_in, now + due_in + grace, std::max(0.0, run_us)};
  return id;
}

size_t DeviceExecutor::reservations() const {
  const Clock::time_point now = Clock::now();
  MutexLock lock(mu_);
  return static_cast<size_t>(std::count_if(reservations_.begin(), reservations_.end(),
                                           [now](const auto& r) { return r.second.Standing(now); }));
}

FairQueue::MayStart DeviceExecutor::StartRule(Clock::time_point now, Clock::time_point* recheck) {
  if (recheck) *recheck = Clock::time_point::max();
  std::erase_if(reservations_, [now](const auto& entry) { return !entry.second.Standing(now); });
  if (reservations_.empty() || stopping_) return {};
  // A running task (a load) holds its thread for a time not estimated.
  constexpr double kTaskUs = 1e18;
  std::vector<double> busy_us;
  busy_us.reserve(running_.size());
  for (const RunningBatch& r : running_) {
    busy_us.push_back(r.task ? kTaskUs : r.LeftUs(now));
  }
  struct Owed {
    Clock::time_point made;
    StartReservation reservation;
  };
  std::vector<Owed> owed;
  owed.reserve(reservations_.size());
  for (const auto& [id, r] : reservations_) {
    const double due_in_us =
        static_cast<double>(std::chrono::duration_cast<std::chrono::microseconds>(r.due - now).count());
    owed.push_back({r.made, {due_in_us, r.run_us}});
    if (recheck) *recheck = std::min(*recheck, r.expires);
  }
  // As LoadFor counts them: the fair-share thread, once due, is started
  // by the Submit that finds the workers busy.
  const int threads = static_cast<int>(workers_.size()) + (spare_due_ ? 1 : 0);
  return [busy_us = std::move(busy_us), owed = std::move(owed), threads](const Job& job) {
    if (job.task) return true;
    std::vector<StartReservation> binding;  // rule 1: made before the job was queued
    for (const Owed& o : owed) {
      if (o.made < job.enqueued) binding.push_back(o.reservation);
    }
    return MayStartBeforeReservations(static_cast<double>(job.expected_us), threads, busy_us, binding);
  };
}

void DeviceExecutor::WaitForStartable(UniqueMutexLock& lock) {
  for (;;) {
    if (stopping_ && queue_.empty()) return;
    Clock::time_point recheck;
    const Clock::time_point now = Clock::now();
    // Jobs of a model already running on every worker it may use wait for
    // one of those workers, which looks for work again when it finishes.
    if (queue_.HasStartable(running_limit_, now, StartRule(now, &recheck))) return;
    ++sleeping_workers_;
    if (recheck == Clock::time_point::max()) {
      work_cv_.wait(lock.native());
    } else {
      work_cv_.wait_until(lock.native(), recheck);
    }
    --sleeping_workers_;
  }
}

size_t DeviceExecutor::PurgeCancelled() {
  Batch removed;
  {
    MutexLock lock(mu_);
    removed = queue_.RemoveIf([](const Job& job) { return job.cancelled.load(); });
    depth_.store(queue_.size(), std::memory_order_relaxed);
  }
  const size_t purged = removed.size();
  Reject(removed, absl::CancelledError("request cancelled by the client while queued"), RejectionReason::kCancelled);
  return purged;
}

size_t DeviceExecutor::RefuseQueued(const absl::Status& status) {
  Batch removed;
  {
    MutexLock lock(mu_);
    removed = queue_.RemoveIf([](const Job& job) { return !job.task; });
    depth_.store(queue_.size(), std::memory_order_relaxed);
  }
  const size_t refused = removed.size();
  Reject(removed, status, RejectionReason::kDraining);
  return refused;
}

int64_t DeviceExecutor::TakeCounted(const Batch& jobs) {
  int64_t us = 0;
  for (const auto& job : jobs) us += std::exchange(job->counted_us, 0);
  return us;
}

void DeviceExecutor::Uncount(int64_t us) {
  if (us != 0) expected_work_us_.fetch_sub(us, std::memory_order_relaxed);
}

void DeviceExecutor::Reject(Batch& jobs, const absl::Status& status, RejectionReason reason) {
  if (jobs.empty()) return;
  Uncount(TakeCounted(jobs));
  for (auto& job : jobs) {
    if (rejection_listener_) rejection_listener_(*job, reason);
    job->Finish(status);
  }
  jobs.clear();
  idle_cv_.notify_all();
}

void DeviceExecutor::RejectExpired(Batch& expired) {
  Clock::time_point now = Clock::now();
  Uncount(TakeCounted(expired));
  for (auto& job : expired) {
    if (rejection_listener_) rejection_listener_(*job, RejectionReason::kQueueTimeout);
    // Triton's code for a queue timeout: the request was not run, and
    // another replica may take it.
    job->Finish(absl::UnavailableError(
        absl::StrCat("model ", job->flow.ToString(), ": waited ", MicrosBetween(job->enqueued, now),
                     " us in the queue of ", device_.ToString(), ", beyond its queue timeout of ",
                     MicrosBetween(job->enqueued, job->queue_deadline), " us; the request was not run")));
  }
  if (!expired.empty()) idle_cv_.notify_all();
  expired.clear();
}

Clock::duration DeviceExecutor::OldestRunningAge() const {
  MutexLock lock(mu_);
  if (running_.empty()) return Clock::duration::zero();
  Clock::time_point oldest = running_.front().start;
  for (const RunningBatch& r : running_) oldest = std::min(oldest, r.start);
  return Clock::now() - oldest;
}

DeviceLoad DeviceExecutor::LoadFor(const FlowKey& flow) const {
  const Clock::time_point now = Clock::now();
  MutexLock lock(mu_);
  DeviceLoad load;
  load.threads = static_cast<int>(workers_.size()) + (spare_due_ ? 1 : 0);
  int64_t running_counted = 0;
  int flow_running = 0;
  for (const RunningBatch& r : running_) {
    running_counted += r.counted_us;
    // A task (a load) holds its thread for a time not estimated: not counted.
    if (r.task) continue;
    const double left = r.LeftUs(now);
    load.busy_us.push_back(left);
    if (r.flow == flow) {
      ++flow_running;
      load.flow_free_us = load.flow_free_us ? std::min(*load.flow_free_us, left) : left;
    }
  }
  if (running_limit_ <= 0 || flow_running < running_limit_) load.flow_free_us.reset();
  load.queued_us =
      static_cast<double>(std::max<int64_t>(0, expected_work_us_.load(std::memory_order_relaxed) - running_counted));
  // The requests held for their loads here run before a job queued now
  // where it would take their thread (start_reservations.h).
  for (const auto& [id, r] : reservations_) {
    if (r.Standing(now))
      load.reserved.push_back(
          {static_cast<double>(std::chrono::duration_cast<std::chrono::microseconds>(r.due - now).count()), r.run_us});
  }
  return load;
}

DeviceExecutor::QueueDepths DeviceExecutor::QueueDepthsNow() const {
  MutexLock lock(mu_);
  QueueDepths depths{queue_.size(), queue_.DepthByFlow()};
  depths.by_model.erase(FlowKey{});  // tasks (explicit loads)
  return depths;
}

bool DeviceExecutor::WaitIdle(Clock::time_point deadline) {
  UniqueMutexLock lock(mu_);
  return idle_cv_.wait_until(lock.native(), deadline, [this]() ABSL_NO_THREAD_SAFETY_ANALYSIS {
    return queue_.empty() && running_workers_ == 0;
  });
}

void DeviceExecutor::Stop() {
  {
    MutexLock lock(mu_);
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
  queue_.CollectCompanions(*first, rows, batch);
  depth_.store(queue_.size(), std::memory_order_relaxed);
}

DeviceExecutor::Batch DeviceExecutor::TakeBatch(UniqueMutexLock& lock, double* charged_us, Batch* expired) {
  Batch batch;
  Clock::time_point now = Clock::now();
  *expired = queue_.TakeExpired(now);
  std::shared_ptr<Job> first = queue_.Next(now, charged_us, running_limit_, StartRule(now));
  depth_.store(queue_.size(), std::memory_order_relaxed);
  if (!first) return batch;
  batch.push_back(first);
  const SchedulingPolicy& policy = first->policy();
  if (first->task || first->batch_key.empty() || policy.max_batch_rows <= 1) return batch;
  int64_t rows = first->rows;
  Collect(first, &rows, &batch);
  // Wait for companions only while another worker keeps the device busy (an
  // idle device runs what it has at once, so batching never adds latency
  // at low load), and only if a bigger batch has been seen to go faster
  // per row (else this worker's run beside the others is the faster way).
  // The delay is counted from the oldest request's arrival. Never on the
  // CPU: a CPU worker has cores of its own, which another worker's batch
  // does not hold, so waiting leaves them idle, and with a few clients in a
  // closed loop no companion comes until the busy worker answers.
  if (device_.kind != DeviceKind::kCpu && rows < policy.max_batch_rows && policy.max_queue_delay_us > 0 &&
      running_workers_ > 0 && batch_cost_.WorthWaiting(first->batch_key, rows, policy.max_batch_rows)) {
    Clock::time_point until = first->enqueued + std::chrono::microseconds(policy.max_queue_delay_us);
    ++waiting_batchers_;
    while (rows < policy.max_batch_rows && !stopping_ && running_workers_ > 0 &&
           batch_cv_.wait_until(lock.native(), until) != std::cv_status::timeout) {
      Collect(first, &rows, &batch);
    }
    Collect(first, &rows, &batch);
    --waiting_batchers_;
  }
  // On the CPU each worker has cores of its own: a batch takes its share of
  // the rows in flight (queued and running), so the other workers have
  // theirs. Before, at concurrency 8, a worker finishing beside a busy one
  // took all it found, the other then found nothing, and one core idled:
  // the demo CNN ran batches of 5 to 8 on one worker at a time.
  if (device_.kind == DeviceKind::kCpu) KeepShareOfWorkers(rows, &batch);
  // Run the prefix whose size goes fastest here; the rest goes back to the
  // head of its model's queue, in order, for the next worker.
  std::vector<int64_t> job_rows;
  job_rows.reserve(batch.size());
  for (const auto& job : batch) job_rows.push_back(job->rows);
  RequeueTail(batch_cost_.Choose(first->batch_key, job_rows, first->policy().preferred_batch_rows), &batch);
  KeepReservationsWithCompanions(Clock::now(), &batch);
  return batch;
}

void DeviceExecutor::KeepReservationsWithCompanions(Clock::time_point now, Batch* batch) {
  if (batch->size() <= 1 || reservations_.empty()) return;
  const FairQueue::MayStart may_start = StartRule(now);
  if (!may_start) return;
  int64_t longest_us = (*batch)[0]->expected_us;
  for (size_t i = 1; i < batch->size(); ++i) {
    const Job& companion = *(*batch)[i];
    if (companion.expected_us <= longest_us) continue;
    if (!may_start(companion)) return RequeueTail(i, batch);
    longest_us = companion.expected_us;
  }
}

void DeviceExecutor::RequeueTail(size_t keep, Batch* batch) {
  if (keep >= batch->size()) return;
  for (size_t i = batch->size(); i-- > keep;) queue_.PushFront(std::move((*batch)[i]));
  batch->resize(keep);
  depth_.store(queue_.size(), std::memory_order_relaxed);
}

void DeviceExecutor::KeepShareOfWorkers(int64_t rows, Batch* batch) {
  // Workers busy with a task (a model load) take no share.
  const int64_t sharing = workers_per_model_ - running_tasks_;
  if (sharing <= 1 || batch->size() <= 1) return;
  const int64_t share = (rows + running_rows_ + sharing - 1) / sharing;
  // Only where the rows finish clearly sooner split (as measured) does this
  // worker keep just its share; where one batch of them all is about as
  // quick (a fixed cost per forward pass amortised), it runs them all.
  // Before, the whole batch was kept if it went 25% faster per row than
  // the share's size: the demo mlp, 8 rows in 210 us against 4 in 176 (the
  // BLAS packs its weights from 3 rows up), ran all 8 on one worker while
  // 2+2 on each of two would have finished in 140.
  if (!batch_cost_.SplitFinishesSooner((*batch)[0]->batch_key, rows, share)) return;
  size_t keep = 1;
  for (int64_t kept_rows = (*batch)[0]->rows; keep < batch->size() && kept_rows + (*batch)[keep]->rows <= share;) {
    kept_rows += (*batch)[keep++]->rows;
  }
  RequeueTail(keep, batch);
}

void DeviceExecutor::WorkerLoop() {
  if (on_worker_start_) on_worker_start_();
  for (;;) {
    Batch batch;
    // Poll briefly before sleeping: a futex wake-up costs tens of
    // microseconds, which is most of a small model's serving overhead. Only
    // one idle worker polls at a time, and only while the device is idle:
    // when another worker is running, the cores are better left to it and
    // to the threads reading requests off the network. The poll yields the
    // core between looks, so a thread that has work (gRPC's, the client's)
    // runs at once instead of waiting up to the poll's end for the core:
    // with a pause instruction instead, h2load at 8 streams ran 8,098 mlp /
    // 10,436 tiny-model req/s against 8,346 / 14,044 with the yield.
    int no_spinner = 0;
    if (spin_us_ > 0 && depth_.load(std::memory_order_relaxed) == 0 &&
        running_jobs_.load(std::memory_order_relaxed) == 0 && spinning_.compare_exchange_strong(no_spinner, 1)) {
      Clock::time_point until = Clock::now() + std::chrono::microseconds(spin_us_);
      while (depth_.load(std::memory_order_relaxed) == 0 && running_jobs_.load(std::memory_order_relaxed) == 0 &&
             Clock::now() < until) {
        sched_yield();
      }
      spinning_.store(0);
    }
    double charged_us = 0;
    Batch expired;
    bool more_runnable = false;
    bool stopping = false;
    std::list<RunningBatch>::iterator running_entry;
    int64_t batch_rows = 0;
    bool is_task = false;
    {
      UniqueMutexLock lock(mu_);
      WaitForStartable(lock);
      if (queue_.empty()) return;  // stopping and drained
      batch = TakeBatch(lock, &charged_us, &expired);
      if (!batch.empty()) {
        ++running_workers_;
        is_task = batch.size() == 1 && batch[0]->task;
        if (is_task) {
          ++running_tasks_;
        } else {
          for (const auto& job : batch) batch_rows += job->rows;
          running_rows_ += batch_rows;
        }
        running_jobs_.fetch_add(batch.size(), std::memory_order_relaxed);
        running_entry = running_.insert(running_.end(), RunningBatch{});
        RunningBatch& running = *running_entry;
        running.start = Clock::now();
        running.task = is_task;
        running.flow = batch[0]->flow;
        running.first = batch[0];
        int64_t longest_us = 0;
        for (const auto& job : batch) {
          running.counted_us += job->counted_us;
          longest_us = std::max(longest_us, job->expected_us);
        }
        running.expected_end = running.start + std::chrono::microseconds(longest_us);
      }
      more_runnable = queue_.HasRunnable(running_limit_);
      if (more_runnable) StartSpareIfDue();
    }
    RejectExpired(expired);
    if (batch.empty()) continue;
    // More work may be waiting for another worker (and only then: a worker
    // woken for nothing costs a context switch).
    if (more_runnable) work_cv_.notify_one();
    const FlowKey flow = batch[0]->flow;
    Clock::time_point start = Clock::now();
    // Running jobs stay counted until the run ends; what they added is
    // taken now, as a job that falls back is submitted to another executor
    // from within the run and counted there.
    const int64_t running_us = TakeCounted(batch);
    if (is_task) {
      batch[0]->task();
    } else {
      runner_(batch);
    }
    uint64_t took_us = MicrosBetween(start, Clock::now());
    busy_us_.fetch_add(took_us, std::memory_order_relaxed);
    running_jobs_.fetch_sub(batch.size(), std::memory_order_relaxed);
    batch.clear();
    {
      MutexLock lock(mu_);
      queue_.Settle(flow, charged_us, static_cast<double>(took_us));
      // Uncounted with its record gone, so LoadFor's queued work (the
      // count less the running batches') never takes it off twice.
      Uncount(running_us);
      running_.erase(running_entry);
      --running_workers_;
      running_rows_ -= batch_rows;
      if (is_task) --running_tasks_;
      if (waiting_batchers_ > 0) batch_cv_.notify_all();  // "others busy" changed
      stopping = stopping_;
    }
    // No work_cv_ wake-up while serving: this worker looks for work next
    // itself, and a wake-up would hand the model's next batch to the
    // fair-share thread and put this worker to sleep, a context switch per
    // batch for nothing. When stopping, threads that waited for this model's
    // slot must see the queue drain and exit.
    if (stopping) work_cv_.notify_all();
    idle_cv_.notify_all();
  }
}

}  // namespace infergate
