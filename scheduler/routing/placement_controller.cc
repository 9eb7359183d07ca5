#include "scheduler/routing/placement_controller.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/caught_exception.h"
#include "common/cpu_policy.h"
#include "common/logging.h"
#include "common/thread_name.h"

namespace infergate {

PlacementController::PlacementController(Hooks hooks, Options options) : hooks_(std::move(hooks)), options_(options) {}

PlacementController::~PlacementController() { Stop(); }

void PlacementController::Start() {
  MutexLock lock(mu_);
  if (started_ || stopping_) return;
  started_ = true;
  thread_ = std::thread([this] { Loop(); });
}

void PlacementController::Stop() {
  {
    MutexLock lock(mu_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable() && thread_.get_id() != std::this_thread::get_id()) thread_.join();
}

void PlacementController::Wake() {
  {
    MutexLock lock(mu_);
    if (woken_) return;
    woken_ = true;
  }
  wake_.notify_one();
}

void PlacementController::NoteEvicted(const std::string& model, const DeviceId& device) {
  {
    MutexLock lock(mu_);
    // Bounded by the models served times the accelerators; cleared as
    // models move back. A server that saw unboundedly many models forgets.
    if (demoted_.size() >= 65536) demoted_.clear();
    if (wants_cpu_copy_.size() >= 65536) wants_cpu_copy_.clear();
    demoted_.insert({model, device});
    wants_cpu_copy_.insert(model);
  }
  Wake();
}

bool PlacementController::Demoted(const std::string& model, const DeviceId& device) const {
  MutexLock lock(mu_);
  return demoted_.count({model, device}) > 0;
}

bool PlacementController::Placed(const std::string& model, const DeviceId& device) const {
  MutexLock lock(mu_);
  return placed_.count({model, device}) > 0;
}

PlacementController::ModelPlacement PlacementController::PlacementOf(const std::string& model) const {
  ModelPlacement out;
  MutexLock lock(mu_);
  if (moving_ && moving_->first == model) out.moving.push_back(moving_->second);
  for (const auto& [name, device] : demoted_) {
    if (name == model) out.demoted.push_back(device);
  }
  return out;
}

void PlacementController::RecordLoadTime(const std::string& model, const DeviceId& device, LoadSource source,
                                         double micros) {
  MutexLock lock(mu_);
  if (load_us_.size() >= 65536) load_us_.clear();
  load_us_[{{model, device}, source}] = micros;
}

std::optional<double> PlacementController::LoadTime(const std::string& model, const DeviceId& device,
                                                    LoadSource source) const {
  MutexLock lock(mu_);
  auto it = load_us_.find({{model, device}, source});
  if (it == load_us_.end()) return std::nullopt;
  return it->second;
}

PlacementController::Counts PlacementController::counts() const {
  MutexLock lock(mu_);
  return counts_;
}

void PlacementController::Loop() {
  NameThisThread("placement");
  // Its promotions are moves that requests may wait for (a request routed
  // to a move under way; ready_path.h): they run under the normal policy,
  // not the SCHED_BATCH of the thread that started it (the server's main
  // thread, main.cc).
  UseNormalCpuPolicyForDeviceWork("placement");
  for (;;) {
    {
      UniqueMutexLock lock(mu_);
      wake_.wait_for(lock.native(), options_.period,
                     [&]() ABSL_NO_THREAD_SAFETY_ANALYSIS { return stopping_ || woken_; });
      if (stopping_) return;
      woken_ = false;
    }
    const Clock::time_point start = Clock::now();
    const absl::Status escaped = RunCatching("deciding where models go", [&] { Pass(); });
    if (!escaped.ok()) LOG_WARNING << escaped.message();
    // Wakes that came during the pass are served by the next one, no sooner
    // than min_gap after this one began.
    UniqueMutexLock lock(mu_);
    wake_.wait_until(lock.native(), start + options_.min_gap,
                     [&]() ABSL_NO_THREAD_SAFETY_ANALYSIS { return stopping_; });
    if (stopping_) return;
  }
}

void PlacementController::Pass() {
  MutexLock one_pass(pass_mu_);
  std::set<std::string> wants_cpu;
  {
    MutexLock lock(mu_);
    ++counts_.passes;
    wants_cpu.swap(wants_cpu_copy_);
  }
  for (const std::string& model : wants_cpu) {
    if (absl::Status kept = hooks_.keep_on_cpu(model); kept.ok()) {
      MutexLock lock(mu_);
      ++counts_.kept_on_cpu;
    } else {
      LOG_DEBUG << "model '" << model << "' keeps no cpu copy after leaving an accelerator: " << kept.message();
    }
  }
  for (const DeviceId& device : hooks_.accelerators()) {
    for (int i = 0; i < options_.max_promotions_per_pass && Decide(device); ++i) {
    }
  }
}

bool PlacementController::Decide(const DeviceId& device) {
  MoveInputs in = hooks_.inputs(device);
  in.objective = options_.objective;
  in.window_s = options_.window_s;
  in.hysteresis = options_.hysteresis;
  in.min_residence_s = options_.min_residence_s;
  const Clock::time_point now = Clock::now();
  {
    MutexLock lock(mu_);
    std::vector<MoveCandidate> eligible;
    for (MoveCandidate& m : in.models) {
      const Key key{m.model, device};
      if (m.resident) {
        demoted_.erase(key);  // it is back (a request or a load put it there)
        m.staged = placed_.count(key) == 0;
      } else if (auto failed = failed_at_.find(key); failed != failed_at_.end()) {
        if (now - failed->second < options_.retry_after) continue;
        failed_at_.erase(failed);
      }
      if (!m.resident) placed_.erase(key);  // gone since the controller placed it (evicted, unloaded)
      if (auto learned = load_us_.find({key, m.next_load}); learned != load_us_.end()) m.transfer_us = learned->second;
      eligible.push_back(std::move(m));
    }
    in.models = std::move(eligible);
  }
  const MoveDecision decision = DecideMoves(in);
  if (decision.promote.empty() && decision.demote.empty()) return false;
  if (decision.promote.empty()) {
    LOG_DEBUG << "placement on " << device.ToString() << ": over the policy's budget of " << in.budget_bytes
              << " bytes, trim '" << absl::StrJoin(decision.demote, "', '") << "' (latency-weighed gain "
              << decision.cost_us / 1000 << " ms over " << in.window_s << " s)";
  } else {
    LOG_DEBUG << "placement on " << device.ToString() << ": promote '" << decision.promote << "' (latency-weighed gain "
              << decision.gain_us / 1000 << " ms over " << in.window_s << " s, cost " << decision.cost_us / 1000
              << " ms: its move plus what the displaced lose)"
              << (decision.demote.empty() ? ""
                                          : absl::StrCat(", demote '", absl::StrJoin(decision.demote, "', '"), "'"))
              << "; " << in.models.size() << " model(s) weighed, budget " << in.budget_bytes << " bytes";
  }
  for (const std::string& model : decision.demote) {
    if (absl::Status kept = hooks_.keep_on_cpu(model); kept.ok()) {
      MutexLock lock(mu_);
      ++counts_.kept_on_cpu;
    } else {
      LOG_DEBUG << "model '" << model << "' demoted from " << device.ToString()
                << " without a cpu copy: " << kept.message();
    }
    if (absl::Status evicted = hooks_.evict(model, device); !evicted.ok()) {
      LOG_DEBUG << "placement on " << device.ToString() << ": "
                << (decision.promote.empty() ? "the trim" : absl::StrCat("'", decision.promote, "'")) << " waits, '"
                << model << "' stays: " << evicted.message();
      return false;
    }
    MutexLock lock(mu_);
    demoted_.insert({model, device});
    placed_.erase({model, device});
    ++counts_.demoted;
  }
  if (decision.promote.empty()) return true;  // a trim: the next decision sees the room it gave back
  {
    MutexLock lock(mu_);
    moving_ = Key{decision.promote, device};
  }
  const absl::Status promoted = hooks_.promote(decision.promote, device);
  {
    MutexLock lock(mu_);
    moving_.reset();
    if (promoted.ok()) {
      demoted_.erase({decision.promote, device});
      if (placed_.size() >= 65536) placed_.clear();  // bounded: forgetting only makes copies count as staged
      placed_.insert({decision.promote, device});
      ++counts_.promoted;
      return true;
    }
    ++counts_.failed;
    if (failed_at_.size() >= 4096) failed_at_.clear();  // bounded: forgetting only allows a retry sooner
    failed_at_[{decision.promote, device}] = now;
  }
  LOG_WARNING << "moving model '" << decision.promote << "' to " << device.ToString()
              << " failed: " << promoted.message() << " (its requests stay where it is resident; not tried again for "
              << options_.retry_after.count() / 1000.0 << " s)";
  return false;
}

}  // namespace infergate
