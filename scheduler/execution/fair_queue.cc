#include "scheduler/execution/fair_queue.h"

#include <algorithm>
#include <limits>

#include "absl/strings/str_cat.h"

namespace infergate {
namespace {

// Below every priority level: a job whose DELAY timeout passed.
constexpr int64_t kDelayedLevel = std::numeric_limits<int64_t>::max();

bool HasRejectDeadline(const Job& job) {
  return job.queue_deadline != Clock::time_point::max() && !job.policy().delay_on_timeout;
}

}  // namespace

int64_t FairQueue::EffectiveLevel(const Job& job, Clock::time_point now) const {
  if (job.queue_deadline != Clock::time_point::max() && job.policy().delay_on_timeout && now >= job.queue_deadline) {
    return kDelayedLevel;
  }
  int64_t level = job.priority_level;
  if (aging_.count() > 0 && now > job.enqueued) {
    // Without a floor: two jobs that both waited long keep the order their
    // levels and waits give (a floor made them tie, and the tie went to the
    // better level, so a busy queue's higher work starved lower work).
    level -= std::chrono::duration_cast<std::chrono::microseconds>(now - job.enqueued).count() / aging_.count();
  }
  return level;
}

absl::Status FairQueue::Push(std::shared_ptr<Job> job, Clock::time_point now) {
  (void)now;
  Flow& flow = flows_[job->flow];
  const uint32_t cap = job->policy().max_queue_size;
  if (cap > 0 && flow.size >= cap) {
    return absl::ResourceExhaustedError(absl::StrCat("model ", job->flow.ToString(), " already has ", flow.size,
                                                     " requests waiting, its max_queue_size"));
  }
  if (flow.size == 0) {
    // A flow that was idle earns no credit for it.
    flow.virtual_us = std::max(flow.virtual_us, virtual_now_us_);
  }
  if (HasRejectDeadline(*job)) ++reject_timeouts_;
  if (model_instances_) flow.instances = static_cast<int>(job->policy().accelerator_instances);
  uint32_t level = job->priority_level;
  flow.levels[level].push_back(std::move(job));
  ++flow.size;
  ++size_;
  return absl::OkStatus();
}

void FairQueue::PushFront(std::shared_ptr<Job> job) {
  Flow& flow = flows_[job->flow];
  if (HasRejectDeadline(*job)) ++reject_timeouts_;
  uint32_t level = job->priority_level;
  flow.levels[level].push_front(std::move(job));
  ++flow.size;
  ++size_;
}

bool FairQueue::BestOf(const Flow& flow, Clock::time_point now, int64_t* effective, uint32_t* level) const {
  bool found = false;
  for (const auto& [lvl, jobs] : flow.levels) {
    if (jobs.empty()) continue;
    // The head is the oldest of its level, so the one aged most.
    int64_t e = EffectiveLevel(*jobs.front(), now);
    if (!found || e < *effective) {
      *effective = e;
      *level = lvl;
      found = true;
    }
  }
  return found;
}

int FairQueue::RunningLimitOf(const Flow& flow, int running_limit) {
  if (flow.instances > 0 && (running_limit <= 0 || flow.instances < running_limit)) return flow.instances;
  return running_limit;
}

bool FairQueue::HasRunnable(int running_limit) const {
  for (const auto& [key, flow] : flows_) {
    const int limit = RunningLimitOf(flow, running_limit);
    if (flow.size > 0 && (limit <= 0 || flow.running < limit)) return true;
  }
  return false;
}

const Job* FairQueue::StartableHead(const Flow& flow, Clock::time_point now, int running_limit,
                                    const MayStart& may_start, int64_t* effective, uint32_t* level) const {
  if (const int limit = RunningLimitOf(flow, running_limit); limit > 0 && flow.running >= limit) return nullptr;
  if (!BestOf(flow, now, effective, level)) return nullptr;
  const Job* head = flow.levels.at(*level).front().get();
  if (may_start && !may_start(*head)) return nullptr;
  return head;
}

bool FairQueue::HasStartable(int running_limit, Clock::time_point now, const MayStart& may_start) const {
  if (!may_start) return HasRunnable(running_limit);
  for (const auto& [key, flow] : flows_) {
    int64_t effective = 0;
    uint32_t level = 0;
    if (StartableHead(flow, now, running_limit, may_start, &effective, &level)) return true;
  }
  return false;
}

bool FairQueue::Fairer(const Candidate& a, const Candidate& b) const {
  if (fair_ && a.flow->virtual_us != b.flow->virtual_us) return a.flow->virtual_us < b.flow->virtual_us;
  return a.head->enqueued < b.head->enqueued;
}

std::shared_ptr<Job> FairQueue::Next(Clock::time_point now, double* charged_us, int running_limit,
                                     const MayStart& may_start) {
  // Rule 1: the best effective level, the fairer flow on a tie, decides
  // which priority level is served.
  candidates_.clear();
  const Candidate* lead = nullptr;
  for (auto& [key, flow] : flows_) {
    Candidate c{&flow};
    c.head = StartableHead(flow, now, running_limit, may_start, &c.effective, &c.level);
    if (!c.head) continue;
    c.rank = c.effective == kDelayedLevel ? kDelayedLevel : c.head->priority_level;
    candidates_.push_back(c);
  }
  for (const Candidate& c : candidates_) {
    if (!lead || c.effective < lead->effective || (c.effective == lead->effective && Fairer(c, *lead))) lead = &c;
  }
  if (!lead) return nullptr;
  // Rule 2 among that level's flows, but those whose head another level
  // outranks: aging lifts a level over others, it does not order the
  // requests of one level by their waits (then fair sharing would end
  // wherever a backlog had waited one aging).
  int64_t other_levels_best = kDelayedLevel;
  for (const Candidate& c : candidates_) {
    if (c.rank != lead->rank) other_levels_best = std::min(other_levels_best, c.effective);
  }
  const Candidate* chosen = nullptr;
  // Rule 3: among the same flows, the head whose promise comes first. One
  // already broken (its latest start passed) claims nothing: under
  // overload fair sharing resumes, and a job without one is not held back
  // for ever by others' late ones.
  const Candidate* promised = nullptr;
  for (const Candidate& c : candidates_) {
    if (c.rank != lead->rank || c.effective > other_levels_best) continue;
    if (!chosen || Fairer(c, *chosen)) chosen = &c;
    if (c.head->start_by >= now && (!promised || c.head->start_by < promised->head->start_by)) promised = &c;
  }
  if (fair_ && promised != nullptr && promised != chosen) {
    // The fair choice gives way where its run (until about now plus its
    // expected compute) would pass a promise earlier than its own.
    const Job& fair_head = *chosen->head;
    const Clock::time_point fair_ends = now + std::chrono::microseconds(std::max<int64_t>(0, fair_head.expected_us));
    const Clock::time_point promised_by = promised->head->start_by;
    if (promised_by < fair_head.start_by && promised_by < fair_ends) chosen = promised;
  }
  return Take(*chosen->flow, chosen->level, charged_us, now);
}

std::shared_ptr<Job> FairQueue::Take(Flow& flow, uint32_t level, double* charged_us, Clock::time_point now) {
  std::deque<std::shared_ptr<Job>>& jobs = flow.levels[level];
  std::shared_ptr<Job> job = std::move(jobs.front());
  jobs.pop_front();
  if (HasRejectDeadline(*job)) --reject_timeouts_;
  Removed(flow, 1);
  virtual_now_us_ = std::max(virtual_now_us_, flow.virtual_us);
  flow.last_served = now;
  ++flow.running;
  flow.virtual_us += flow.batch_cost_us;
  if (charged_us) *charged_us = flow.batch_cost_us;
  return job;
}

void FairQueue::CollectCompanions(const Job& first, int64_t* rows, std::vector<std::shared_ptr<Job>>* batch) {
  auto it = flows_.find(first.flow);
  if (it == flows_.end()) return;
  Flow& flow = it->second;
  size_t taken = 0;
  for (auto& [level, jobs] : flow.levels) {
    for (auto j = jobs.begin(); j != jobs.end() && *rows < first.policy().max_batch_rows;) {
      const Job& job = **j;
      if (!job.task && !job.cancelled.load() && job.batch_key == first.batch_key &&
          *rows + job.rows <= first.policy().max_batch_rows) {
        *rows += job.rows;
        if (HasRejectDeadline(job)) --reject_timeouts_;
        batch->push_back(std::move(*j));
        j = jobs.erase(j);
        ++taken;
      } else {
        ++j;
      }
    }
  }
  Removed(flow, taken);
}

std::vector<std::shared_ptr<Job>> FairQueue::RemoveIf(const std::function<bool(const Job&)>& remove) {
  std::vector<std::shared_ptr<Job>> removed;
  for (auto& [key, flow] : flows_) {
    size_t taken = 0;
    for (auto& [level, jobs] : flow.levels) {
      for (auto j = jobs.begin(); j != jobs.end();) {
        if (remove(**j)) {
          if (HasRejectDeadline(**j)) --reject_timeouts_;
          removed.push_back(std::move(*j));
          j = jobs.erase(j);
          ++taken;
        } else {
          ++j;
        }
      }
    }
    Removed(flow, taken);
  }
  return removed;
}

std::vector<std::shared_ptr<Job>> FairQueue::TakeExpired(Clock::time_point now) {
  if (reject_timeouts_ == 0) return {};
  return RemoveIf([now](const Job& job) { return HasRejectDeadline(job) && now >= job.queue_deadline; });
}

void FairQueue::Settle(const FlowKey& key, double estimated_us, double measured_us) {
  Flow& flow = flows_[key];
  if (flow.running > 0) --flow.running;
  flow.virtual_us += measured_us - estimated_us;
  // A short memory: costs change with batch size and load.
  flow.batch_cost_us = flow.batch_cost_us == 0 ? measured_us : 0.8 * flow.batch_cost_us + 0.2 * measured_us;
}

std::map<FlowKey, size_t> FairQueue::DepthByFlow() const {
  std::map<FlowKey, size_t> depth;
  for (const auto& [key, flow] : flows_) {
    if (flow.size > 0) depth[key] = flow.size;
  }
  return depth;
}

void FairQueue::Removed(Flow& flow, size_t n) {
  flow.size -= n;
  size_ -= n;
}

}  // namespace infergate
