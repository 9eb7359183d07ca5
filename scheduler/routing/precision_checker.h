#pragma once
// The accuracy contract's checks: before a model serves in FP16 or BF16 on
// a device, run it there in that dtype and in FP32 on the CPU, on the same
// check inputs (check_inputs.h), and compare (output_comparison.h). What a
// check found decides, through DecidePrecision (precision_decision.h),
// which dtype the route planner gives requests; results persist in the
// AccuracyLedger, so a restart does not check again.
//
// Checks run on the checker's own thread, so a request never waits for
// one: until its combination is verified, the planner serves a verified
// dtype. Warm-up may check on the starting thread (CheckNow) before the
// server reports ready. The running check re-runs one request in N in FP32
// on the CPU after its answer went out, only while the CPU is idle, and
// marks the dtype inaccurate when the answers drifted beyond tolerance.
//
// Threading: every public method may be called from any thread; State and
// WantsRunningCheck take one short lock (the request path). Checks load
// models through the ModelManager like any worker. Observer calls are made
// with no lock held.

#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "absl/strings/string_view.h"
#include "common/mutex.h"
#include "devices/device_registry.h"
#include "scheduler/cache/model_manager.h"
#include "scheduler/model/accuracy_tolerance.h"
#include "scheduler/model/inference_types.h"
#include "scheduler/model/route.h"
#include "scheduler/model/scheduler_observer.h"
#include "scheduler/model/tensor_types.h"
#include "scheduler/routing/accuracy_ledger.h"
#include "scheduler/routing/precision_decision.h"

namespace infergate {

class PrecisionChecker {
 public:
  struct Options {
    bool enabled = true;     // false: every dtype counts as verified (no checks)
    size_t max_queued = 64;  // checks waiting; more are asked again by later requests
  };
  // True when the CPU has no work queued or running.
  using CpuIdle = std::function<bool()>;

  // Nothing is owned; everything must outlive the checker.
  PrecisionChecker(ModelManager& models, ModelRepository& repository, const DeviceRegistry& devices,
                   AccuracyLedger& ledger, Options options, CpuIdle cpu_idle);
  ~PrecisionChecker();

  void Start();
  // Drops queued checks and joins the thread; a check running finishes first.
  void Stop();
  // Not owned; may be null. Set before serving.
  void SetObserver(SchedulerObserver* observer) { observer_ = observer; }
  bool enabled() const { return options_.enabled; }

  // What is known of `dtype` for `route`'s model version, generation and
  // device, judged against the model's current tolerance; `verdict`, when
  // given, receives the judgement of a finished check.
  AccuracyState State(const Route& route, DType dtype, AccuracyVerdict* verdict = nullptr) const;

  // Queues a check of `dtype` for `route` unless one ran or is queued.
  // `request_inputs` are used (copied) only when the config gives no way to
  // make check inputs (inputs not declared, no sample file).
  void Request(const Route& route, DType dtype, const std::vector<NamedTensor>* request_inputs);

  // Runs the check on the calling thread unless one has run; `occasion`
  // ("warm-up", "load") is for the log. A model whose check inputs can only
  // come from a request is left for its first request.
  AccuracyState CheckNow(const Route& route, DType dtype, const char* occasion);

  // Running check: true for one request in the model's running_check_every
  // served in a reduced dtype. Cheap when the model has none.
  bool WantsRunningCheck(const Route& route);
  // Queues the FP32 re-run of a request already answered, if the CPU is idle
  // and no other re-run waits; else drops it. Copies the inputs.
  void OfferRunningCheck(const Route& route, const std::vector<NamedTensor>& inputs, std::vector<NamedTensor> outputs);

  // The combinations checked or being checked for the served generations
  // of `model`.
  std::vector<PrecisionReport> Reports(const std::string& model) const;

 private:
  struct Key {
    std::string model;
    int64_t version = 0;
    uint64_t generation = 0;
    DeviceId device;
    DType dtype = DType::kFloat16;
  };
  // A Key that borrows the model name: what the request path looks up.
  struct KeyView {
    absl::string_view model;
    int64_t version = 0;
    uint64_t generation = 0;
    DeviceId device;
    DType dtype = DType::kFloat16;
  };
  struct KeyLess {
    using is_transparent = void;
    template <typename A, typename B>
    bool operator()(const A& a, const B& b) const {
      return std::tie(a.model, a.version, a.generation, a.device, a.dtype) <
             std::tie(b.model, b.version, b.generation, b.device, b.dtype);
    }
  };
  enum class Stage { kQueued, kDone, kNotChecked };
  struct Entry {
    Stage stage = Stage::kQueued;
    AccuracyMeasurement measurement;  // kDone
    // kDone: the measurement judged against the config of the generation
    // it was made for (a changed config is a new generation).
    AccuracyVerdict verdict;
    std::optional<AccuracyKey> ledger_key;  // where kDone's measurement is kept
    bool from_ledger = false;               // kDone: read from the state file, not measured now
    std::string note;                       // kNotChecked: why
    Clock::time_point retry_after;          // kNotChecked: a request may ask again from then on
  };
  struct Task {
    Route route;
    DType dtype = DType::kFloat16;
    std::vector<NamedTensor> inputs;   // captured request inputs, or a running check's
    std::vector<NamedTensor> outputs;  // running check: what the client got
    bool running_check = false;
  };

  // A check that could not run (a device failure, a missing sample file)
  // is tried again by a request after this long.
  static constexpr std::chrono::seconds kRetryNotChecked{30};

  static Key KeyOf(const Route& route, DType dtype);
  // The config gives no way to make check inputs: a request's are needed.
  static bool NeedsRequestInputs(const ModelEntry& model);
  static KeyView ViewOf(const Route& route, DType dtype);
  void Loop();
  Entry Check(const Route& route, DType dtype, const std::vector<NamedTensor>& captured);
  void RunningCheck(const Task& task);
  void Finish(const Key& key, const Route& route, Entry entry, const char* how);
  // Runs `route`'s model (loaded through the manager) on named inputs.
  absl::StatusOr<std::vector<NamedTensor>> RunOn(const Route& route, const std::vector<NamedTensor>& inputs);
  std::optional<Route> ReferenceRoute(const Route& route) const;
  absl::StatusOr<std::string> DigestOf(const Route& route);
  static std::string DeviceSignature(const DeviceInfo& device);

  ModelManager& models_;
  ModelRepository& repository_;
  const DeviceRegistry& devices_;
  AccuracyLedger& ledger_;
  const Options options_;
  CpuIdle cpu_idle_;
  SchedulerObserver* observer_ = nullptr;

  // Readers (State, on the request path) share it; the rest take it alone.
  mutable SharedMutex mu_;
  std::condition_variable_any wake_;
  std::map<Key, Entry, KeyLess> entries_ ABSL_GUARDED_BY(mu_);
  std::deque<Task> queue_ ABSL_GUARDED_BY(mu_);
  bool running_check_queued_ ABSL_GUARDED_BY(mu_) = false;
  std::map<std::string, uint64_t> served_ ABSL_GUARDED_BY(mu_);  // model -> reduced-precision requests seen
  Mutex digests_mu_;
  // "path|size:mtime" -> SHA-256.
  std::map<std::string, std::string> digests_ ABSL_GUARDED_BY(digests_mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace infergate
