#pragma once
// The waiting jobs of one device, kept per flow (a model version) and
// handed out fairly between flows and by priority.
//
// Which job runs next:
//  1. Priority. Each job has a level, 1 the highest. A job's effective level
//     improves by one for every `aging` it has waited (without bound), so a
//     lower-priority request is delayed by higher ones but never starved: a
//     level-L job outranks fresh level-1 work after L x `aging` of waiting,
//     and level-1 work that has itself waited once it has waited
//     (L - 1) x `aging` longer.
//     A job whose queue timeout passed with the DELAY action drops below
//     every level: it runs only when nothing else waits. Aging decides
//     which level is served (that of the best effective level's head, the
//     fairer flow's on a tie), not the order within it: the flows whose
//     head is of that level, and outranked by no other level's, all take
//     part in rule 2, however long each has waited. (When waits ordered
//     them too, fair sharing ended wherever a backlog had waited one
//     aging: a cheap model's request waited behind every request of a
//     flooded one that had waited 100 ms longer.)
//  2. Fairness. Among those flows, the flow that has used the least device
//     time runs next (start-time fair queueing on measured cost): each
//     batch is charged its estimated time when it is taken and corrected to
//     its measured time when it ends.
//     A flow that had nothing waiting starts from the current virtual time,
//     so idling earns no credit. A cheap model's request thus waits for the
//     batches already running, not for an expensive model's whole queue.
//  3. Promises. A job `auto` routed on an estimate carries the latest start
//     that keeps it (Job::start_by). Among the flows of rule 2, the fair
//     choice gives way to another flow's job whose latest start is earlier
//     than the fair choice's and would pass while the fair choice runs (now
//     plus its expected compute): the job whose latest start comes first
//     runs instead. Fair sharing thus lets a later, lighter flow go ahead
//     of a busy flow's request only while that request still finishes
//     within its estimate; the lighter flow's own request was estimated
//     behind all the work queued at its arrival, so its promise holds too.
//     Jobs without an estimate claim nothing, nor does a promise already
//     broken (its latest start passed): under overload fair sharing
//     resumes, and a job without an estimate is not held back for ever by
//     others' late ones.
//  4. Within a flow and level, arrival order.
// Batching stays within a flow: companions of a batch come from the same
// flow (a batch key names one model version).
//
// Per-flow caps (a model's max_queue_size) refuse that flow alone.
//
// Running batches: Next skips a flow that already runs `running_limit`
// batches, or (on an accelerator's queue) its model's accelerator_instances
// where that is lower.
//
// Reservations: Next may be given which jobs may start now (the device's
// threads owed to requests held for their loads, start_reservations.h); a
// flow whose next job may not is skipped as if it were empty.
//
// Threading: none; DeviceExecutor guards it with its queue lock. Owns the
// queued jobs' shared pointers until they are taken.

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "scheduler/execution/job.h"

namespace infergate {

class FairQueue {
 public:
  // `fair` false serves flows in arrival order of their oldest job (FIFO
  // across models, for comparison), keeping priorities and caps.
  // `model_instances`: each model's accelerator_instances limits how many
  // of its batches run at once (an accelerator's queue).
  explicit FairQueue(std::chrono::microseconds aging = std::chrono::milliseconds(100), bool fair = true,
                     bool model_instances = false)
      : aging_(aging), fair_(fair), model_instances_(model_instances) {}

  // Queues `job` in its flow (job->flow) at its level. RESOURCE_EXHAUSTED
  // naming the model when its flow already holds its policy's max_queue_size jobs.
  absl::Status Push(std::shared_ptr<Job> job, Clock::time_point now);
  // Puts a job taken by Next back at the head of its flow and level (a
  // batch trimmed after it was collected). Never refused.
  void PushFront(std::shared_ptr<Job> job);

  // Whether a job may start now; empty: every job may.
  using MayStart = std::function<bool(const Job&)>;
  // Takes the job that runs next (see above), skipping flows that already
  // run `running_limit` batches (0: no limit), or their model's instances,
  // and flows whose next job `may_start` refuses; null when none may run.
  // Its flow is charged an estimate of the batch's time, returned in
  // `charged_us`, and counts one more running batch until Settle.
  std::shared_ptr<Job> Next(Clock::time_point now, double* charged_us = nullptr, int running_limit = 0,
                            const MayStart& may_start = {});
  // Whether Next with this limit would return a job, were every job
  // allowed to start.
  bool HasRunnable(int running_limit) const;
  // Whether Next with this limit and `may_start` would return a job now.
  bool HasStartable(int running_limit, Clock::time_point now, const MayStart& may_start) const;
  // Takes queued jobs of `first`'s flow that may join its batch (same batch
  // key, not cancelled, not a task), best level first and in arrival order,
  // while `*rows` stays within first->max_batch_rows.
  void CollectCompanions(const Job& first, int64_t* rows, std::vector<std::shared_ptr<Job>>* batch);
  // Takes every job for which `remove` is true.
  std::vector<std::shared_ptr<Job>> RemoveIf(const std::function<bool(const Job&)>& remove);
  // Takes the jobs whose queue timeout has passed with the REJECT action.
  std::vector<std::shared_ptr<Job>> TakeExpired(Clock::time_point now);

  // Ends a batch Next started: replaces the estimate Next charged `flow`
  // with the batch's measured time.
  void Settle(const FlowKey& flow, double estimated_us, double measured_us);

  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  // Jobs waiting per flow (flows with none are left out).
  std::map<FlowKey, size_t> DepthByFlow() const;

 private:
  struct Flow {
    std::map<uint32_t, std::deque<std::shared_ptr<Job>>> levels;  // level -> FIFO
    size_t size = 0;
    double virtual_us = 0;     // device time used, on the queue's virtual clock
    double batch_cost_us = 0;  // moving average of this flow's batch time
    Clock::time_point last_served;
    int running = 0;    // batches taken by Next and not yet settled
    int instances = 0;  // its model's accelerator_instances, as last queued (0: none)
  };
  // How many of `flow`'s batches may run at once under `running_limit`
  // (0: no limit).
  static int RunningLimitOf(const Flow& flow, int running_limit);
  // The job Next would take from `flow` (its best level's head) and that
  // level, if the flow may run one more batch and `may_start` allows it.
  const Job* StartableHead(const Flow& flow, Clock::time_point now, int running_limit, const MayStart& may_start,
                           int64_t* effective, uint32_t* level) const;
  // A flow Next may take a job from: its startable head, the level queue
  // holding it, its effective level and its rank (the head's own priority
  // level, or kDelayedLevel past a DELAY timeout).
  struct Candidate {
    Flow* flow = nullptr;
    const Job* head = nullptr;
    uint32_t level = 0;
    int64_t effective = 0;
    int64_t rank = 0;
  };
  // Whether `a`'s flow comes before `b`'s by fair sharing (the device time
  // used; arrival order of their heads on a tie, and in FIFO mode).
  bool Fairer(const Candidate& a, const Candidate& b) const;
  // Takes `flow`'s head at `level` and charges the flow for it.
  std::shared_ptr<Job> Take(Flow& flow, uint32_t level, double* charged_us, Clock::time_point now);
  // The best effective level of `flow`'s waiting jobs and the level queue
  // holding that job; false when the flow is empty.
  bool BestOf(const Flow& flow, Clock::time_point now, int64_t* effective, uint32_t* level) const;
  int64_t EffectiveLevel(const Job& job, Clock::time_point now) const;
  void Removed(Flow& flow, size_t n);

  std::chrono::microseconds aging_;
  bool fair_;
  bool model_instances_;
  std::map<FlowKey, Flow> flows_;
  std::vector<Candidate> candidates_;  // Next's, kept to reuse its memory
  double virtual_now_us_ = 0;          // the virtual time of the last flow served
  size_t size_ = 0;
  size_t reject_timeouts_ = 0;  // queued jobs with a REJECT queue deadline
};

}  // namespace infergate
