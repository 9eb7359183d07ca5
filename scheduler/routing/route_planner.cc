#include "scheduler/routing/route_planner.h"

#include <algorithm>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "common/status_macros.h"
#include "proto/proto_enums.h"
#include "scheduler/repository/model_config.h"
#include "scheduler/routing/ready_path.h"

namespace infergate {
namespace {

bool Matches(const DeviceRequest& wanted, const DeviceId& id) {
  return id.kind == wanted.kind && (wanted.any_index || id.index == wanted.index);
}

}  // namespace

RoutePlanner::RoutePlanner(ModelRepository& repository, const DeviceRegistry& devices,
                           const UnsupportedOpTable& learned, RouterOptions options, LoadProbe probe,
                           const PrecisionChecker* accuracy)
    : repository_(repository),
      devices_(devices),
      learned_(learned),
      options_(options),
      probe_(std::move(probe)),
      accuracy_(accuracy) {}

DType RoutePlanner::ComputeDType(const ModelEntry& model, const FileStamp& file, const PrecisionTraits& device,
                                 Precision precision) {
  bool float64_model = false;
  for (const InputSpec& in : model.declared.inputs) float64_model |= in.dtype == DType::kFloat64;
  Precision model_override = PrecisionFromProto(model.config.precision()).value_or(Precision::kAuto);
  if (model_override == Precision::kAuto && file.package) model_override = Precision::kFp32;
  return ResolveComputeDType(device, precision, model_override, float64_model);
}

std::optional<DeviceInfo> RoutePlanner::ColdStartDevice(const DeviceRegistry& devices, const v1::ModelConfig& config) {
  for (const DeviceId& id : devices.Available()) {
    if (DeviceAllowed(config, id)) return devices.Find(id);
  }
  return std::nullopt;
}

std::vector<LoadTarget> RoutePlanner::UpdateTargets(const ModelEntry& model, const FileStamp& file,
                                                    const std::vector<ResidentModel>& resident,
                                                    const DeviceRegistry& devices) {
  std::vector<LoadTarget> targets;
  for (const ResidentModel& r : resident) {
    LoadTarget target{r.key.device, file.package ? DType::kFloat32 : r.key.dtype};
    if (r.key.model == model.name && std::find(targets.begin(), targets.end(), target) == targets.end()) {
      targets.push_back(target);
    }
  }
  if (targets.empty()) {
    if (std::optional<DeviceInfo> first = ColdStartDevice(devices, model.config)) {
      targets.push_back({first->id, ComputeDType(model, file, first->precision, Precision::kAuto)});
    }
  }
  return targets;
}

std::optional<LoadTarget> RoutePlanner::CpuInstead(const ModelEntry& model, const FileStamp& file,
                                                   const std::vector<LoadTarget>& targets,
                                                   const DeviceRegistry& devices) {
  const bool listed = std::any_of(targets.begin(), targets.end(),
                                  [](const LoadTarget& t) { return t.device.kind == DeviceKind::kCpu; });
  std::optional<DeviceInfo> cpu = devices.Find(kCpuDevice);
  if (listed || !cpu || !cpu->available || !DeviceAllowed(model.config, cpu->id)) return std::nullopt;
  return LoadTarget{cpu->id, ComputeDType(model, file, cpu->precision, Precision::kAuto)};
}

absl::StatusOr<Route> RoutePlanner::PlaceOn(Route route, const DeviceId& device, Precision precision,
                                            bool allow_fallback) const {
  std::optional<DeviceInfo> info = devices_.Find(device);
  if (!info) return absl::UnavailableError(absl::StrCat("device: ", device.ToString(), " is not known"));
  route.device = *std::move(info);
  route.dtype = ComputeDType(*route.model, route.stamp, route.device.precision, precision);
  if (accuracy_) {
    RETURN_IF_ERROR(ApplyAccuracy(route, precision, allow_fallback));
  }
  return route;
}

absl::Status RoutePlanner::ApplyAccuracy(Route& route, Precision precision, bool allow_fallback) const {
  if (route.dtype != DType::kFloat16 && route.dtype != DType::kBFloat16) return absl::OkStatus();
  PrecisionQuery query;
  query.picked = route.dtype;
  query.client_asked = precision != Precision::kAuto;
  query.allow_fallback = allow_fallback;
  query.bf16_supported = SupportsBf16(route.device.precision);
  // The common case, a verified pick, takes one look.
  const AccuracyState picked = accuracy_->State(route, route.dtype);
  if (picked == AccuracyState::kVerified) return absl::OkStatus();
  const bool picked_fp16 = route.dtype == DType::kFloat16;
  const AccuracyState other = picked_fp16 || query.bf16_supported
                                  ? accuracy_->State(route, picked_fp16 ? DType::kBFloat16 : DType::kFloat16)
                                  : AccuracyState::kUnchecked;
  query.fp16 = picked_fp16 ? picked : other;
  query.bf16 = picked_fp16 ? other : picked;
  PrecisionDecision decision = DecidePrecision(query);
  route.precision_check = decision.check;
  if (decision.reason == PrecisionReasonKind::kNone) return absl::OkStatus();
  AccuracyVerdict verdict;
  if (decision.reason == PrecisionReasonKind::kInaccurate) accuracy_->State(route, decision.about, &verdict);
  const std::string what =
      absl::StrCat("model '", route.model->name, "' in ", absl::AsciiStrToLower(DTypeName(decision.about)), " on ",
                   route.device.id.ToString());
  if (decision.refusal == absl::StatusCode::kFailedPrecondition) {
    return absl::FailedPreconditionError(
        absl::StrCat("precision: ", what, " failed its accuracy check (", verdict.Describe(),
                     ") and fallback is DENY; ask for another precision or allow fallback"));
  }
  if (decision.refusal == absl::StatusCode::kUnavailable) {
    return absl::UnavailableError(absl::StrCat("precision: ", what,
                                               " is being checked for accuracy and fallback is DENY; retry shortly "
                                               "or allow fallback"));
  }
  route.precision_reason = PrecisionReasonText(decision);
  if (decision.reason == PrecisionReasonKind::kInaccurate) {
    absl::StrAppend(&route.precision_reason, " (", verdict.Describe(), ")");
  }
  route.dtype = decision.dtype;
  return absl::OkStatus();
}

RouteCandidate RoutePlanner::Probe(const Route& route, const DeviceId& device, Precision precision) const {
  RouteCandidate c;
  c.device = device;
  if (!probe_) return c;
  Route there = route;
  there.device = devices_.Find(device).value_or(DeviceInfo{});
  there.device.id = device;
  there.dtype = ComputeDType(*route.model, route.stamp, there.device.precision, precision);
  if (accuracy_) (void)ApplyAccuracy(there, precision, /*allow_fallback=*/true);  // never refuses with fallback
  probe_(there, &c);
  return c;
}

RoutePlanner::AutoChoice RoutePlanner::ChooseAuto(const Route& route, Precision precision,
                                                  const std::vector<DeviceId>& allowed) const {
  if (allowed.size() == 1) return {allowed.front(), std::nullopt};
  std::vector<RouteCandidate> candidates;
  candidates.reserve(allowed.size());
  for (const DeviceId& id : allowed) candidates.push_back(Probe(route, id, precision));
  EstimateUnmeasuredLatencies(candidates, options_);
  const int chosen = ChooseDevice(candidates, options_);
  if (!move_wanted_) return {candidates[chosen].device, std::nullopt};
  // No cold start (ready_path.h): where it would go had the model been
  // resident everywhere (`ideal`) is where it is wanted; until it is there,
  // the faster of a resident copy and loading it there, then running.
  std::vector<RouteCandidate> all_resident = candidates;
  for (RouteCandidate& c : all_resident) c.resident = true;
  const int ideal = ChooseDevice(all_resident, options_);
  const PathChoice path = ChooseReadyPath(candidates, ideal, options_);
  // A path whose latency there is neither measured nor guessed from the
  // CPU's has no estimate: its expected time rests on the assumed latency
  // of a model never measured, not on anything learned of this one.
  const bool estimated = candidates[path.index].latency_us.has_value();
  AutoChoice choice{candidates[path.index].device,  std::nullopt,
                    ReadyPathName(path.path),       estimated ? path.expected_us : 0.0,
                    estimated ? path.load_us : 0.0, candidates[path.index].latency_us.value_or(0.0)};
  if (path.path != ReadyPath::kResident) return choice;
  move_wanted_();
  if (candidates[ideal].demoted) {
    choice.demoted = FallbackReason{FallbackKind::kDemoted, candidates[ideal].device.ToString()};
  }
  return choice;
}

bool RoutePlanner::AnswersFromCpuCopy(const Route& route, Precision precision, const DeviceId& target) const {
  if (!move_wanted_ || target.kind == DeviceKind::kCpu || !DeviceAllowed(route.model->config, kCpuDevice)) {
    return false;
  }
  const RouteCandidate there = Probe(route, target, precision);
  if (there.resident || !there.demoted) return false;
  if (!Probe(route, kCpuDevice, precision).resident) return false;
  move_wanted_();
  return true;
}

absl::StatusOr<Route> RoutePlanner::Plan(const RouteRequest& request) const {
  Route route;
  ASSIGN_OR_RETURN(route.model, repository_.Find(request.model));
  ASSIGN_OR_RETURN(int64_t version, repository_.ResolveVersion(*route.model, request.version));
  route.version = version;
  route.latest = request.version.empty();
  if (const VersionStatus* status = route.model->Status(route.version)) {
    route.generation = status->generation;
    route.stamp = status->stamp;
  }
  ASSIGN_OR_RETURN(DeviceRequest wanted, ParseDeviceRequest(request.device));
  route.requested = wanted;

  const v1::ModelConfig& config = route.model->config;
  const std::string& name = route.model->name;
  // What was learned this model file cannot run on a kind of device. The
  // file's key is built only once something has been learned at all.
  std::string file;
  auto learned_limit = [&](DeviceKind kind) -> std::optional<FallbackReason> {
    if (learned_.empty()) return std::nullopt;
    if (file.empty()) file = route.stamp.ContentKey();
    return learned_.Lookup(name, file, kind);
  };
  if (wanted.automatic) {
    std::vector<DeviceId> allowed;
    for (const DeviceId& id : devices_.Available()) {
      if (DeviceAllowed(config, id) && !learned_limit(id.kind)) allowed.push_back(id);
    }
    if (allowed.empty()) {
      return absl::FailedPreconditionError(
          absl::StrCat("device: no available device is allowed for model '", name, "'"));
    }
    AutoChoice chosen = ChooseAuto(route, request.precision, allowed);
    route.fallback = std::move(chosen.demoted);
    route.ready_path = chosen.ready_path;
    route.expected_us = chosen.expected_us;
    route.load_expected_us = chosen.load_us;
    route.compute_expected_us = chosen.compute_us;
    return PlaceOn(std::move(route), chosen.device, request.precision, request.allow_fallback);
  }

  // The device asked for, if this server has it in service.
  std::optional<DeviceId> target;
  std::optional<DeviceId> cooling_down;
  for (const DeviceId& id : devices_.Available()) {
    if (Matches(wanted, id)) {
      target = id;
      break;
    }
  }
  if (!target) {
    for (const DeviceInfo& d : devices_.Snapshot()) {
      if (Matches(wanted, d.id) && devices_.OutOfService(d.id)) cooling_down = d.id;
    }
  }
  std::optional<FallbackReason> reason;
  if (!target) {
    reason = cooling_down ? FallbackReason{FallbackKind::kDeviceOutOfService, cooling_down->ToString()}
                          : FallbackReason{FallbackKind::kDeviceUnavailable, wanted.ToString()};
    if (!request.allow_fallback) {
      return absl::FailedPreconditionError(absl::StrCat(
          "device: requested device '", wanted.ToString(), "' is ",
          cooling_down ? "out of service after a failure" : "not available on this server", " and fallback is DENY"));
    }
    static LogRateLimiter limiter(5);
    if (uint64_t held = 0; limiter.Allow(&held)) {
      LOG_WARNING << "requested device " << wanted.ToString() << " is "
                  << (cooling_down ? "out of service" : "not available") << "; falling back to cpu"
                  << SuppressedNote(held);
    }
  } else if (!DeviceAllowed(config, *target)) {
    if (!request.allow_fallback) {
      return absl::FailedPreconditionError(
          absl::StrCat("device: model '", name, "' may not run on ", target->ToString()));
    }
    reason = FallbackReason{FallbackKind::kDeviceNotAllowed, target->ToString()};
  } else if (std::optional<FallbackReason> learned = learned_limit(target->kind)) {
    // Known not to run there: go straight to the CPU instead of failing first.
    if (!request.allow_fallback) {
      return absl::FailedPreconditionError(absl::StrCat("device: model '", name, "' cannot run on ", target->ToString(),
                                                        " (", learned->ToString(), ") and fallback is DENY"));
    }
    reason = *std::move(learned);
  }
  if (!reason && request.allow_fallback && AnswersFromCpuCopy(route, request.precision, *target)) {
    reason = FallbackReason{FallbackKind::kDemoted, target->ToString()};
  }
  if (!reason) return PlaceOn(std::move(route), *target, request.precision, request.allow_fallback);
  if (!DeviceAllowed(config, kCpuDevice)) {
    return absl::FailedPreconditionError(absl::StrCat("device: model '", name, "' cannot run where asked (",
                                                      reason->ToString(), ") and may not run on the cpu"));
  }
  route.fallback = std::move(reason);
  return PlaceOn(std::move(route), kCpuDevice, request.precision, request.allow_fallback);
}

absl::StatusOr<Route> RoutePlanner::FallBackToCpu(const Route& route, FallbackReason reason, Precision precision,
                                                  bool allow_fallback, const absl::Status& failure) const {
  if (!allow_fallback || !DeviceAllowed(route.model->config, kCpuDevice)) {
    return absl::FailedPreconditionError(absl::StrCat(
        "device: model '", route.model->name, "' cannot run on ", route.device.id.ToString(), " (", reason.ToString(),
        ") and ", allow_fallback ? "may not run on the cpu" : "fallback is DENY", ": ", failure.message()));
  }
  Route moved = route;
  moved.fallback = std::move(reason);
  moved.precision_reason.clear();
  moved.compute_expected_us = 0;  // estimated for the device it leaves
  return PlaceOn(std::move(moved), kCpuDevice, precision, allow_fallback);
}

}  // namespace infergate
