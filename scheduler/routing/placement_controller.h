#pragma once
// Keeps on each accelerator the models that gain most from being there, off
// the request path, so that no request waits for a model to move ("no cold
// start"). A pass, every `period` and soon after a request found its
// model's best device without a copy (Wake), asks for each accelerator
// what was measured (each model's demand, its compute time there and
// elsewhere, what moving it costs, its size; `Hooks::inputs`), lets the
// move policy decide (move_policy.h), and carries the decision out:
//  - each model the promotion displaces is demoted: it gets a CPU copy
//    first when the CPU's budget has room, so its requests go on being
//    answered (there, with the reason `demoted:<device>`), and then its
//    accelerator copy is evicted;
//  - the promoted model is loaded on the accelerator (admitted within the
//    device's budget like any load); the requests after it run there.
// A copy evicted from an accelerator otherwise (a load that needed room,
// least recently used first; NoteEvicted) gets a CPU copy on the next pass
// as well. Each promotion is decided on the state the one before it left,
// up to `max_promotions_per_pass` per accelerator per pass.
//
// What moving a model costs is learned: the load times recorded for it on
// the device (RecordLoadTime), the latest, until then the estimate the
// inputs give; a load that starts from a host copy of the weights and one
// that reads the file are learned apart (LoadSource), and the one a
// model's next move makes is looked up (MoveCandidate::next_load): a time
// learned reading the file (the first load, seconds of deserialising and
// warm-up) is not what a move from a host copy costs. A move that failed
// (the model cannot fit or run there) is not tried again for
// `retry_after`, so a model that cannot move costs no load attempt and log
// line per pass.
//
// Threading: one thread of its own runs the passes and the hooks, without
// the controller's lock held, under the normal CPU policy whatever the
// starting thread's (a move is work requests wait for; cpu_policy.h);
// every public member may be called from any thread and never waits for a
// pass (but Stop). Start after the hooks' objects are ready; Stop (or the
// destructor) waits for a running pass to end. Ownership: the hooks'
// objects must outlive the controller.

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "common/mutex.h"
#include "devices/device_id.h"
#include "scheduler/routing/move_policy.h"

namespace infergate {

class PlacementController {
 public:
  using Clock = std::chrono::steady_clock;
  struct Hooks {
    // The accelerators to decide for: available ones, not the CPU.
    std::function<std::vector<DeviceId>()> accelerators;
    // The policy's inputs for `device`: every model with demand or a copy
    // there that may run there; `transfer_us` is the estimate when no load
    // time was learned (the controller puts the learned one in).
    std::function<MoveInputs(const DeviceId& device)> inputs;
    // Gives `model` a CPU copy unless it has one or the CPU's budget has no
    // room for it (then an error says so; the model is demoted anyway).
    std::function<absl::Status(const std::string& model)> keep_on_cpu;
    // Evicts `model`'s idle copies on `device`; an error when none went
    // (in use: the promotion waits for the next pass).
    std::function<absl::Status(const std::string& model, const DeviceId& device)> evict;
    // Loads `model` on `device`.
    std::function<absl::Status(const std::string& model, const DeviceId& device)> promote;
  };
  struct Options {
    std::chrono::milliseconds period{1000};
    // Passes asked for by Wake come at most this often.
    std::chrono::milliseconds min_gap{200};
    std::chrono::milliseconds retry_after{60000};
    // Promotions per accelerator in one pass, each decided on the state the
    // one before left (so a shift of the popular set is followed in a few
    // passes, not one per model).
    int max_promotions_per_pass = 4;
    MoveObjective objective = MoveObjective::kTail;  // move_policy.h
    double window_s = 10;                            // the demand window the gains are counted over
    double hysteresis = 1.5;                         // move_policy.h
    double min_residence_s = 5;
  };

  PlacementController(Hooks hooks, Options options);
  ~PlacementController();
  PlacementController(const PlacementController&) = delete;
  PlacementController& operator=(const PlacementController&) = delete;

  void Start();
  void Stop();
  // A pass soon (within min_gap).
  void Wake();
  // `model`'s copy on the accelerator `device` was evicted: it counts as
  // demoted from there until it moves back, and gets a CPU copy next pass.
  void NoteEvicted(const std::string& model, const DeviceId& device);
  // Whether `model` was demoted from `device` and has not moved back.
  bool Demoted(const std::string& model, const DeviceId& device) const;
  // Whether `model`'s copy on `device` is one this controller placed there
  // (not staged by a request's load and run).
  bool Placed(const std::string& model, const DeviceId& device) const;
  // Where `model` is moving to now, and the accelerators it was demoted
  // from and is not back on (ListModels shows them per copy).
  struct ModelPlacement {
    std::vector<DeviceId> moving;
    std::vector<DeviceId> demoted;
  };
  ModelPlacement PlacementOf(const std::string& model) const;
  // A load of `model` on `device` from `source` took `micros` (what a move
  // there from that source costs).
  void RecordLoadTime(const std::string& model, const DeviceId& device, LoadSource source, double micros);
  std::optional<double> LoadTime(const std::string& model, const DeviceId& device, LoadSource source) const;

  // Runs one pass now, on the caller's thread (tests; the thread's passes
  // and this one do not overlap).
  void RunPassForTest() { Pass(); }

  struct Counts {
    uint64_t passes = 0;
    uint64_t promoted = 0;
    uint64_t demoted = 0;
    uint64_t failed = 0;  // promotions that failed
    uint64_t kept_on_cpu = 0;
  };
  Counts counts() const;

 private:
  using Key = std::pair<std::string, DeviceId>;
  void Loop();
  void Pass();
  // One decision for one accelerator, carried out; whether it promoted.
  bool Decide(const DeviceId& device);

  const Hooks hooks_;
  const Options options_;
  Mutex pass_mu_;  // one pass at a time (the thread's and RunPassForTest's)
  mutable Mutex mu_;
  std::condition_variable wake_;
  bool started_ ABSL_GUARDED_BY(mu_) = false;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  bool woken_ ABSL_GUARDED_BY(mu_) = false;
  std::set<Key> demoted_ ABSL_GUARDED_BY(mu_);
  // Copies this controller promoted and that are still resident: the
  // policy's. Any other resident copy on an accelerator is staged (a
  // request loaded it; move_policy.h).
  std::set<Key> placed_ ABSL_GUARDED_BY(mu_);
  std::optional<Key> moving_ ABSL_GUARDED_BY(mu_);  // the promotion under way
  std::set<std::string> wants_cpu_copy_ ABSL_GUARDED_BY(mu_);
  std::map<std::pair<Key, LoadSource>, double> load_us_ ABSL_GUARDED_BY(mu_);
  std::map<Key, Clock::time_point> failed_at_ ABSL_GUARDED_BY(mu_);
  Counts counts_ ABSL_GUARDED_BY(mu_);
  std::thread thread_;
};

}  // namespace infergate
