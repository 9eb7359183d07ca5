#pragma once
// A device's bounded queue and the worker threads that drain it, forming
// batches of compatible jobs on the way out. Which job goes next, between
// models and priorities, is the FairQueue's choice; a batch's companions
// come from the same model version.
//
// A request held for its model's load on arrival may leave a reservation
// (Reserve): work queued after it starts only where it leaves that request
// a thread when its load is expected to be done (start_reservations.h).
//
// Threading: Submit, Reserve, PurgeCancelled and the figures may be called
// from any thread. The batch runner and tasks run on this executor's worker
// threads, one batch per worker at a time; they may Submit to other
// executors (a fallback) but must not wait for them. The rejection listener
// runs on the thread that refused the job (a worker, or a submitter),
// outside the queue's lock.

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <functional>
#include <list>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "common/mutex.h"
#include "devices/device_id.h"
#include "scheduler/execution/batch_cost.h"
#include "scheduler/execution/fair_queue.h"
#include "scheduler/execution/job.h"
#include "scheduler/execution/start_estimate.h"
#include "scheduler/execution/start_reservations.h"
#include "scheduler/model/event_reasons.h"
#include "scheduler/repository/model_config.h"

namespace infergate {

class DeviceExecutor {
 public:
  using Batch = std::vector<std::shared_ptr<Job>>;
  // Runs an inference batch (all jobs share a batch key, or it is one job).
  using BatchRunner = std::function<void(Batch&)>;

  // Told of each queued job answered without running, with why (cancelled
  // or queue_timeout).
  using RejectionListener = std::function<void(const Job&, RejectionReason reason)>;

  struct Options {
    // Worker threads; with `fair`, one model runs at most this many batches
    // at once, and one more thread serves the other models, so a light
    // model's request need not wait for a heavy model's running batches.
    // That thread starts the first time work waits with every worker busy
    // (another model's, or the model of a worker held by a load task): a
    // server of one model never has it, and its workers do not take turns
    // with it (h2load, mlp at 8 streams: 13.0k req/s with it, 15.4k without).
    int workers = 1;
    size_t capacity = 1024;  // jobs waiting, all models together
    bool fair = true;        // FairQueue's fair sharing; false is FIFO across models
    std::chrono::microseconds priority_aging{100000};
    // Run first on each worker thread (an accelerator worker takes a stream
    // of its own there); may be empty.
    std::function<void()> on_worker_start;
  };
  DeviceExecutor(DeviceId device, Options options, BatchRunner runner);
  // The default options with `workers` and `capacity` set.
  static Options WithWorkers(int workers, size_t capacity) {
    Options options;
    options.workers = workers;
    options.capacity = capacity;
    return options;
  }
  DeviceExecutor(DeviceId device, int workers, size_t capacity, BatchRunner runner)
      : DeviceExecutor(device, WithWorkers(workers, capacity), std::move(runner)) {}
  ~DeviceExecutor();

  // Queues `job`. RESOURCE_EXHAUSTED naming the device when the queue is
  // full (kQueueFull in `refusal`), or naming the model when its own
  // max_queue_size is reached (kModelQueueFull); UNAVAILABLE once Stop
  // has begun. (Draining refuses new requests in the scheduler, so work
  // already accepted can still move here.) Drops the job's reservation,
  // queued or refused.
  absl::Status Submit(std::shared_ptr<Job> job, std::optional<RejectionReason>* refusal = nullptr);
  // Runs `task` as a job of its own (explicit loads).
  absl::Status SubmitTask(std::function<void()> task);

  // A request held for its model's load on arrival (arrival_loads.h) is
  // expected to be submitted in `due_in_us` and to run for `run_us`: until
  // then, jobs submitted after this call start only where they leave it a
  // thread (start_reservations.h), and LoadFor reports it (when it falls
  // due, how long it runs: rule 4 of start_estimate.h). Dropped by the Submit of the job that carries the id
  // (Job::reservation), or once overdue by its grace (half of `due_in_us`,
  // at least kMinReservationGraceUs: a load that ran long idles a thread
  // no longer). Returns the id, never 0.
  uint64_t Reserve(double due_in_us, double run_us);
  static constexpr double kMinReservationGraceUs = 2000;
  // Reservations standing (not dropped, not past their grace).
  size_t reservations() const;

  // Takes cancelled jobs out of the queue and answers them CANCELLED.
  size_t PurgeCancelled();
  // Takes the inference jobs still queued out of the queue and answers them
  // with `status` without running them (tasks stay); counted as kDraining.
  // The server's stop, once its drain ended or ran out of time.
  size_t RefuseQueued(const absl::Status& status);
  // Set before the first Submit.
  void set_rejection_listener(RejectionListener listener) { rejection_listener_ = std::move(listener); }

  // Waits until nothing is queued or running, or `deadline`; true if idle.
  bool WaitIdle(Clock::time_point deadline);
  // Refuses new work, runs what is queued, joins the workers.
  void Stop();

  size_t queue_depth() const { return depth_.load(std::memory_order_relaxed); }
  // What waits, read at one moment: every queued job (loads included) and
  // the jobs per model version. For ListDevices and metrics.
  struct QueueDepths {
    size_t total = 0;
    std::map<FlowKey, size_t> by_model;
  };
  QueueDepths QueueDepthsNow() const;
  size_t in_flight() const { return running_jobs_.load(std::memory_order_relaxed); }
  // The work ahead of a job submitted now, in microseconds: the sum of the
  // queued and running jobs' expected compute (Job::expected_us; a running
  // job counted whole).
  double expected_work_us() const {
    return static_cast<double>(std::max<int64_t>(0, expected_work_us_.load(std::memory_order_relaxed)));
  }
  // What the threads are doing, as seen by a job of `flow` submitted now:
  // each running batch's expected end (its start plus its longest job's
  // expected compute; none once its first job has answered), the queued
  // work, the reservations standing, the threads (the fair-share thread
  // too, once due) and whether the flow already runs as many batches as it
  // may. The caller sets the job's own compute (DeviceLoad::job_us).
  // ExpectedStartUs
  // (start_estimate.h) turns it into when the job would start. Takes the
  // queue's lock.
  DeviceLoad LoadFor(const FlowKey& flow) const;
  // How long the oldest batch now running has been running; zero when none
  // runs. A model stuck in a batch shows here (the liveness watchdog).
  Clock::duration OldestRunningAge() const;
  // Workers as configured, or as grown for a model's instances (the
  // fair-share thread is not counted).
  int workers() const { return workers_per_model_.load(std::memory_order_relaxed); }
  // Threads started so far: the workers, and the fair-share thread once due.
  int threads() const;
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
  // Takes the next batch (maybe empty: all expired, or held back by a
  // reservation) and the jobs whose queue timeout passed, which the caller
  // answers after unlocking.
  Batch TakeBatch(UniqueMutexLock& lock, double* charged_us, Batch* expired) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Waits until a job may start, or the executor stops with nothing queued.
  void WaitForStartable(UniqueMutexLock& lock) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Which queued jobs may start now under the reservations left (those past
  // their grace dropped first); empty when there are none, or stopping.
  // `*recheck` (if given): when the rule next changes by itself, the
  // earliest grace's end (max: never).
  FairQueue::MayStart StartRule(Clock::time_point now, Clock::time_point* recheck = nullptr)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Collect(const std::shared_ptr<Job>& first, int64_t* rows, Batch* batch) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Keeps of `batch` (holding `rows` rows) a prefix of at most one worker's
  // share of the rows in flight (these and the running ones) among the
  // workers not busy with a task, at least one job, and queues the rest
  // again in order; unless the whole batch was measured at least
  // kWorthWaitingGain faster per row than the share (or is unmeasured).
  void KeepShareOfWorkers(int64_t rows, Batch* batch) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Keeps the first `keep` jobs of `batch` and puts the rest back at the
  // head of their model's queue, in order, for the next worker.
  void RequeueTail(size_t keep, Batch* batch) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Under reservations (Reserve): keeps of `batch`, whose first job the
  // start rule let start, the prefix before the first companion that would
  // lengthen it past what the rule allows. A batch runs as long as its
  // longest job (RunningBatch::expected_end), so a companion expected to
  // run no longer than the jobs before it costs the reservations nothing;
  // a longer one is held to the rule as if it started alone (with the
  // reservations that bind it: made before it was queued). The rest is
  // queued again, in order.
  void KeepReservationsWithCompanions(Clock::time_point now, Batch* batch) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Answers jobs refused after they were queued; call without the lock.
  void Reject(Batch& jobs, const absl::Status& status, RejectionReason reason);
  void RejectExpired(Batch& expired);
  // With runnable work queued: starts the fair-share thread if it is due
  // (see Options::workers).
  void StartSpareIfDue() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // On an accelerator: starts workers until there are as many as `job`'s
  // model has instances (at most kMaxAcceleratorInstances).
  void GrowForInstances(const Job& job) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Starts one more worker thread, named for the device and its index
  // ("cpu worker 0"); under mu_ once workers may be running.
  void StartWorker();

  DeviceId device_;
  size_t capacity_;
  BatchRunner runner_;
  RejectionListener rejection_listener_;
  mutable Mutex mu_;
  std::condition_variable work_cv_;   // workers wait for jobs
  std::condition_variable batch_cv_;  // a batcher waits for companions
  std::condition_variable idle_cv_;   // WaitIdle
  FairQueue queue_ ABSL_GUARDED_BY(mu_);
  bool accepting_ ABSL_GUARDED_BY(mu_) = true;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  int running_workers_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t running_rows_ ABSL_GUARDED_BY(mu_) = 0;  // rows of the running batches
  int running_tasks_ ABSL_GUARDED_BY(mu_) = 0;     // workers running a task
  // A batch a worker runs, from when it was taken until its run ended.
  struct RunningBatch {
    Clock::time_point start;
    Clock::time_point expected_end;  // start plus its longest job's expected compute
    FlowKey flow;
    bool task = false;
    int64_t counted_us = 0;            // what its jobs added to expected_work_us_
    std::shared_ptr<const Job> first;  // answered: the run no longer holds the thread for estimates
    // How long it is expected to hold its thread from `now`: 0 once
    // answered or past its expected end (a task's end is not estimated).
    double LeftUs(Clock::time_point now) const {
      const bool answered = first != nullptr && first->finished();
      return answered ? 0.0 : static_cast<double>(MicrosBetween(now, expected_end));
    }
  };
  std::list<RunningBatch> running_ ABSL_GUARDED_BY(mu_);
  struct Reservation {
    Clock::time_point made;
    Clock::time_point due;
    Clock::time_point expires;  // due plus its grace
    double run_us = 0;
    bool Standing(Clock::time_point now) const { return expires > now; }
  };
  std::map<uint64_t, Reservation> reservations_ ABSL_GUARDED_BY(mu_);
  uint64_t next_reservation_ ABSL_GUARDED_BY(mu_) = 1;
  int waiting_batchers_ ABSL_GUARDED_BY(mu_) = 0;
  int sleeping_workers_ ABSL_GUARDED_BY(mu_) = 0;  // waiting on work_cv_
  std::atomic<size_t> depth_{0};
  std::atomic<size_t> running_jobs_{0};
  std::atomic<int64_t> expected_work_us_{0};
  // The work `jobs` added to expected_work_us_, taken off them (they ran,
  // or were answered unrun); Uncount subtracts it, at once or, for a batch
  // that runs, once its run ends.
  static int64_t TakeCounted(const Batch& jobs);
  void Uncount(int64_t us);
  std::atomic<uint64_t> busy_us_{0};
  std::atomic<int> spin_us_{0};
  std::atomic<int> spinning_{0};
  BatchCostModel batch_cost_;
  std::function<void()> on_worker_start_;  // set before any worker starts
  // The running limit of one model's batches; on an accelerator it grows
  // to the largest accelerator_instances a queued model asks for. Written
  // only under mu_; atomic so that workers() (read by the route planner on
  // every automatically placed request) need not take the queue's lock.
  std::atomic<int> workers_per_model_{1};
  int running_limit_ ABSL_GUARDED_BY(mu_);  // for FairQueue::Next: workers_per_model_ with fair sharing, else none
  bool spare_due_ ABSL_GUARDED_BY(mu_);     // fair sharing wants the extra thread, not yet started
  // Grows (the spare, more workers for a model's instances) only under mu_
  // while accepting_; joined by Stop.
  std::vector<std::thread> workers_;
};

}  // namespace infergate
