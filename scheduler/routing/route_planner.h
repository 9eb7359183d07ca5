#pragma once
// Every decision about where a request runs, in one place: the model and
// version, the requested device or `auto`, absent and out-of-service
// devices, the model's allowed device kinds, limits learned at run time
// (ops MPS lacks), and the move to the CPU after a device failure. Produces
// a Route with a typed fallback reason. The accuracy contract has the last
// word on the dtype (precision_decision.h).
//
// Thread-safe: it holds no state of its own beyond references to the
// repository, the devices and the learned table (each thread-safe), and the
// load probe, which is called on the planning thread.

#include <functional>
#include <optional>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "devices/device_registry.h"
#include "devices/precision.h"
#include "scheduler/model/route.h"
#include "scheduler/routing/auto_cost.h"
#include "scheduler/routing/precision_checker.h"
#include "scheduler/routing/unsupported_ops.h"

namespace infergate {

struct RouteRequest {
  absl::string_view model;
  absl::string_view version;  // "" = latest
  absl::string_view device;   // as the client sent it: "", "auto", "cpu", "cuda:1", ...
  Precision precision = Precision::kAuto;
  bool allow_fallback = true;
};

// Where a model version loads outside a request (a repository update), in
// which dtype.
struct LoadTarget {
  DeviceId device;
  DType dtype = DType::kFloat32;
  friend bool operator==(const LoadTarget&, const LoadTarget&) = default;
};

class RoutePlanner {
 public:
  // Fills in the live figures `auto` weighs for one candidate: the request
  // planned `there` (its device, in the dtype it would be served in there):
  // queue, work in flight, residency of there.key(), measured latency, and
  // the load estimate (RouteCandidate::load_us). Must not block.
  using LoadProbe = std::function<void(const Route& there, RouteCandidate* candidate)>;

  // Called when a request ran where its model was ready although another
  // device would have served it sooner had the model been there: the
  // placement controller should weigh a move soon (placement_controller.h).
  // Must not block.
  using MoveWanted = std::function<void()>;

  // Nothing is owned; everything must outlive the planner. `accuracy` may
  // be null: dtypes are then taken as the precision policy picks them.
  RoutePlanner(ModelRepository& repository, const DeviceRegistry& devices, const UnsupportedOpTable& learned,
               RouterOptions options, LoadProbe probe, const PrecisionChecker* accuracy = nullptr);

  // Errors: INVALID_ARGUMENT (bad device string or version), NOT_FOUND
  // (unknown model or version), FAILED_PRECONDITION (fallback DENY and the
  // request cannot run where asked, or the precision it asked for failed
  // its accuracy check; no device allowed for the model), UNAVAILABLE
  // (fallback DENY and the precision it asked for is still being checked).
  absl::StatusOr<Route> Plan(const RouteRequest& request) const;

  // Set once, before any request is planned. Set: no cold start (`auto`
  // runs a request where its model is ready rather than wait for a load,
  // and a request naming the device a model was demoted from, with
  // fallback, does too); empty: `auto` weighs a load as a fixed penalty.
  void SetMoveWanted(MoveWanted move_wanted) { move_wanted_ = std::move(move_wanted); }

  // `route` moved to the CPU after its device failed for `reason`.
  // FAILED_PRECONDITION when the client denied fallback or the model may
  // not run on the CPU; `failure` is quoted in that message.
  absl::StatusOr<Route> FallBackToCpu(const Route& route, FallbackReason reason, Precision precision,
                                      bool allow_fallback, const absl::Status& failure) const;

  // The compute dtype of `model`'s version stored in `file` on `device` for
  // a client asking `precision`. A compiled package's (file.package)
  // precision was fixed at export: float32, unless its config says otherwise.
  static DType ComputeDType(const ModelEntry& model, const FileStamp& file, const PrecisionTraits& device,
                            Precision precision);

  // Where a model's first copy loads (a cold start): the first available
  // device, in `auto`'s order of preference, that its config allows.
  static std::optional<DeviceInfo> ColdStartDevice(const DeviceRegistry& devices, const v1::ModelConfig& config);

  // Where a new version or file of `model` (stored in `file`) loads before
  // it is published: every device where the model is resident now (any
  // version), in the dtype of that copy (a compiled package: float32, as
  // it was exported); on a cold start, the ColdStartDevice, in the dtype
  // AUTO picks there. Empty when no available device is allowed.
  static std::vector<LoadTarget> UpdateTargets(const ModelEntry& model, const FileStamp& file,
                                               const std::vector<ResidentModel>& resident,
                                               const DeviceRegistry& devices);
  // Where such a load goes after an accelerator could not hold or run the
  // model (the device's limit, not a broken file; requests would fall back
  // the same way): the CPU, in AUTO's dtype, when it is available, the
  // model allows it and `targets` does not hold it already.
  static std::optional<LoadTarget> CpuInstead(const ModelEntry& model, const FileStamp& file,
                                              const std::vector<LoadTarget>& targets, const DeviceRegistry& devices);

 private:
  absl::StatusOr<Route> PlaceOn(Route route, const DeviceId& device, Precision precision, bool allow_fallback) const;
  // Applies the accuracy contract to route.dtype.
  absl::Status ApplyAccuracy(Route& route, Precision precision, bool allow_fallback) const;
  // The allowed device `auto` costs least; with one allowed, that one, and
  // the probe is not asked (a CPU-only server plans every request this way).
  struct AutoChoice {
    DeviceId device;
    std::optional<FallbackReason> demoted;  // ran elsewhere: the model was demoted from its best device
    const char* ready_path = nullptr;       // the ready path's name (background moves on; else null)
    double expected_us = 0;                 // its estimate of when the request finishes; 0: none
    double load_us = 0;                     // the load's part of it (0: no load on the path)
    double compute_us = 0;                  // the run's part of it (0: none)
  };
  AutoChoice ChooseAuto(const Route& route, Precision precision, const std::vector<DeviceId>& allowed) const;
  // The probe's figures for `route`'s model on `device`, in the dtype a
  // request would be served in there (the accuracy contract applied, with
  // fallback allowed), so that a copy in another dtype is not taken for it.
  RouteCandidate Probe(const Route& route, const DeviceId& device, Precision precision) const;
  // With no cold start: the CPU, when `target` is an accelerator the model
  // was demoted from, the model is not back there yet and it has a CPU copy.
  bool AnswersFromCpuCopy(const Route& route, Precision precision, const DeviceId& target) const;

  ModelRepository& repository_;
  const DeviceRegistry& devices_;
  const UnsupportedOpTable& learned_;
  RouterOptions options_;
  LoadProbe probe_;
  const PrecisionChecker* accuracy_;
  MoveWanted move_wanted_;
};

}  // namespace infergate
