#include "scheduler/loaders/aoti/aoti_model.h"

#include <c10/core/DeviceGuard.h>
#include <torch/csrc/inductor/aoti_runner/model_container_runner.h>
#include <torch/torch.h>
#include <torch/version.h>

#include <algorithm>
#include <condition_variable>
#include <thread>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "common/mutex.h"
#include "common/status_macros.h"
#include "devices/device_failure.h"
#include "devices/simulated_run.h"
#include "devices/tensor_placement.h"
#include "devices/torch_dtype.h"
#include "nlohmann/json.hpp"
#include "scheduler/loaders/aoti/aoti_library_check.h"
#include "scheduler/loaders/aoti/aoti_unpacked_variant.h"
#include "scheduler/model/declared_outputs.h"
#include "scheduler/model/torch_status.h"
#include "scheduler/repository/aoti_package.h"
#include "scheduler/repository/aoti_signature.h"
#include "scheduler/repository/model_config.h"

namespace infergate {
namespace {

// Leaves of a pytree spec (torch.utils._pytree's JSON): the tensors a call
// takes. -1 when the spec cannot be read.
int64_t CountLeaves(const nlohmann::json& node, int depth = 0) {
  if (depth > 64 || !node.is_object()) return -1;
  if (node.contains("type") && node["type"].is_null()) return 1;
  int64_t n = 0;
  if (node.contains("children_spec") && node["children_spec"].is_array()) {
    for (const nlohmann::json& child : node["children_spec"]) {
      int64_t c = CountLeaves(child, depth + 1);
      if (c < 0) return -1;
      n += c;
    }
  }
  return n;
}

int64_t InputsInCallSpec(const std::vector<std::string>& call_spec) {
  if (call_spec.empty()) return -1;
  nlohmann::json spec = nlohmann::json::parse(call_spec[0], nullptr, /*allow_exceptions=*/false);
  if (!spec.is_array() || spec.size() != 2) return -1;
  return CountLeaves(spec[1]);
}

// A CPU build's loops run on as many threads as the process that compiled
// it had, whatever this server's intra-op setting: more than each worker's
// share of the cores oversubscribes them once the workers run together.
void WarnIfLoopsOutnumberWorkerThreads(const std::string& model, const std::string& path, const AotiVariant& variant) {
  absl::StatusOr<int> loop_threads = CompiledLoopThreads(path, variant);
  if (!loop_threads.ok()) {
    LOG_DEBUG << "model '" << model
              << "': cannot read how its compiled loops are threaded: " << loop_threads.status().message();
    return;
  }
  const int worker_threads = at::get_num_threads();
  if (*loop_threads <= worker_threads) return;
  LOG_WARNING << "model '" << model << "': its compiled loops run on " << *loop_threads
              << " threads each call (Inductor writes in the compiling process's torch.get_num_threads()), but each "
                 "cpu worker here has "
              << worker_threads << " intra-op thread" << (worker_threads == 1 ? "" : "s")
              << ": workers running together oversubscribe the cores. Compile it after torch.set_num_threads("
              << worker_threads << ") to serve it here";
}

}  // namespace

struct AotiModel::Impl {
  // The unpacked files outlive the container that opened them.
  std::unique_ptr<UnpackedAotiVariant> files;
  // One container, `instances` model instances sharing its constants.
  std::unique_ptr<torch::inductor::AOTIModelContainerRunner> container;
  size_t instances = 1;
  // At most `instances` runs inside the container at once. A mutex and a
  // condition variable, the plainest gate there is: under
  // std::counting_semaphore (GCC 14) one ASan test run had a first run
  // never return with one instance; whether the semaphore or the container
  // was at fault is not established.
  mutable Mutex turns_mu;
  mutable std::condition_variable turns_cv;
  mutable size_t turns_free ABSL_GUARDED_BY(turns_mu) = 0;
  // Opening the container on an accelerator (its constants copied there);
  // a simulated device's charge is added by SimulatedServable.
  std::chrono::microseconds transfer_time{0};
  std::string name;
  // Where inputs go and runs happen: the GPU for a real accelerator's build,
  // else the CPU (a simulated device runs a CPU build).
  c10::Device device{c10::DeviceType::CPU};
  std::optional<DeclaredOutputs> outputs;  // set at load
};

bool IsAotiPackagePath(const std::string& path) { return absl::EndsWith(path, ".pt2"); }

AotiModel::AotiModel(std::unique_ptr<Impl> impl, InputSignature signature, uint64_t bytes)
    : impl_(std::move(impl)), signature_(std::move(signature)), bytes_(bytes) {}

AotiModel::~AotiModel() = default;

absl::StatusOr<std::shared_ptr<AotiModel>> AotiModel::Load(const std::string& path, const v1::ModelConfig& config,
                                                           const DeviceInfo& device, DType compute_dtype,
                                                           const AdmitBytes& admit, int instances) {
  const std::string model = config.name();
  auto refuse = [&](absl::string_view why) {
    return absl::FailedPreconditionError(absl::StrCat("model '", model, "': ", path, ": ", why));
  };
  absl::StatusOr<std::vector<AotiVariant>> variants = ReadAotiVariants(path);
  if (!variants.ok()) return refuse(variants.status().message());
  absl::StatusOr<AotiVariant> variant = PickAotiVariant(*variants, device);
  if (!variant.ok()) {
    return WithDeviceFailure(refuse(variant.status().message()), DeviceFailure::kNoCompiledVariant,
                             DeviceKindName(device.id.kind));
  }
  if (compute_dtype != DType::kFloat32) {
    // A dtype this build cannot hold, as for a device lacking one: the
    // request falls back (or is refused under DENY) with that reason.
    return WithDeviceFailure(
        refuse(absl::StrCat("its precision was fixed at export (float32); ", DTypeName(compute_dtype),
                            " cannot be served from it. Ask for FP32, or export a reduced-precision build")),
        DeviceFailure::kDtype, DTypeName(compute_dtype));
  }
  absl::StatusOr<InputSignature> declared = CheckConfigForCompiledPackage(config, *variants, *variant);
  if (!declared.ok()) return refuse(declared.status().message());
  InputSignature signature = *std::move(declared);
  auto impl = std::make_unique<Impl>();
  impl->name = model;
  impl->device = PlanPlacement(device, DType::kFloat32).device;
  impl->outputs.emplace(config);
  // The instances share one copy of the constants: on the CPU they are
  // read in place from the library, on a GPU copied there once.
  const uint64_t bytes = variant->library_bytes;
  if (admit) {
    RETURN_IF_ERROR(admit(bytes));
  }
  absl::StatusOr<std::unique_ptr<UnpackedAotiVariant>> files = UnpackedAotiVariant::Unpack(path, *variant);
  if (!files.ok())
    return refuse(absl::StrCat("cannot unpack variant '", variant->name, "': ", files.status().message()));
  impl->files = *std::move(files);
  // Native code built against another LibTorch is refused before it is
  // opened: opening it can end the process rather than fail the load.
  absl::StatusOr<ElfLinkage> linkage =
      CheckAotiLibraryFitsThisLibTorch(impl->files->library(), absl::StrCat("variant '", variant->name, "'"));
  if (!linkage.ok()) return refuse(linkage.status().message());
  if (StaysLoadedOnceOpened(*linkage)) {
    LOG_WARNING
        << "model '" << model << "': the compiled library of variant '" << variant->name << "' of " << path
        << " cannot be unloaded (it binds GNU unique symbols of its own, as PyTorch 2.15's AOTInductor writes): its "
        << bytes << " bytes stay mapped, and its unpacked file keeps its space in the temp folder, until the "
        << "server exits; each reload of this package adds as much";
  }
  impl->instances = static_cast<size_t>(std::max(1, instances));
  try {
    c10::OptionalDeviceGuard on_device;
    if (!impl->device.is_cpu()) on_device.reset_device(impl->device);
    const auto opening = std::chrono::steady_clock::now();
    impl->container = OpenAotiContainer(*impl->files, *variant, impl->device.str(), impl->instances);
    if (!impl->device.is_cpu()) {
      impl->transfer_time =
          std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - opening);
    }
    const int64_t expected = InputsInCallSpec(impl->container->get_call_spec());
    if (expected >= 0 && expected != static_cast<int64_t>(signature.inputs.size())) {
      return refuse(absl::StrCat("the package's '", variant->name, "' takes ", expected,
                                 " input tensors but config.pbtxt declares ", signature.inputs.size()));
    }
  } catch (const std::exception& e) {
    const std::string why = ConciseTorchMessage(e.what());
    return refuse(
        absl::StrCat("AOTInductor cannot load variant '", variant->name, "': ", why,
                     absl::StrContains(why, "undefined symbol")
                         ? absl::StrCat(" (the library calls a runtime function this server's LibTorch ", TORCH_VERSION,
                                        " lacks: it was likely compiled by a newer PyTorch; "
                                        "compile it with PyTorch ",
                                        TORCH_VERSION, ")")
                         : std::string()));
  }
  {
    MutexLock lock(impl->turns_mu);  // not shared yet; the analysis asks for it
    impl->turns_free = static_cast<size_t>(impl->instances);
  }
  if (variant->device == "cpu") WarnIfLoopsOutnumberWorkerThreads(model, path, *variant);
  LOG_INFO << "model '" << model << "': loaded variant '" << variant->name << "' (compiled for " << variant->device
           << ") of " << path << " on " << (device.simulated ? "simulated " : "") << device.id.ToString() << ", "
           << impl->instances << (impl->instances == 1 ? " instance" : " instances") << ", unpacked in "
           << impl->files->root();
  return std::shared_ptr<AotiModel>(new AotiModel(std::move(impl), std::move(signature), bytes));
}

size_t AotiModel::instances() const { return impl_->instances; }

std::chrono::microseconds AotiModel::transfer_time() const { return impl_->transfer_time; }

absl::StatusOr<std::vector<NamedTensor>> AotiModel::WarmUp(const std::vector<at::Tensor>& inputs) const {
  // The container lends every instance once before it takes back any that
  // finished, so `instances` runs one after another run each of them.
  absl::StatusOr<std::vector<NamedTensor>> first = absl::UnknownError("no instance");
  for (size_t i = 0; i < impl_->instances; ++i) {
    absl::StatusOr<std::vector<NamedTensor>> out = Run(inputs);
    if (!out.ok()) return out.status();
    if (i == 0) first = std::move(out);
  }
  return first;
}

absl::StatusOr<std::vector<NamedTensor>> AotiModel::Run(const std::vector<at::Tensor>& inputs) const {
  const Impl& m = *impl_;
  auto run_container = [&](const std::vector<at::Tensor>& args) {
    // A GPU build runs on its device's current stream (the worker's own,
    // devices/worker_stream.h), which is the current device's.
    c10::OptionalDeviceGuard on_device;
    if (!m.device.is_cpu()) on_device.reset_device(m.device);
    {
      UniqueMutexLock lock(m.turns_mu);
      m.turns_cv.wait(lock.native(), [&]() ABSL_NO_THREAD_SAFETY_ANALYSIS { return m.turns_free > 0; });
      --m.turns_free;
    }
    absl::Cleanup give_back = [&] {
      {
        MutexLock lock(m.turns_mu);
        ++m.turns_free;
      }
      m.turns_cv.notify_one();
    };
    return m.container->run(args);
  };
  std::vector<NamedTensor> outputs;
  try {
    c10::InferenceMode guard;
    std::vector<at::Tensor> args;
    args.reserve(inputs.size());
    for (const at::Tensor& t : inputs) args.push_back(t.to(m.device).contiguous());
    DeviceComputeScope on_device;
    std::vector<at::Tensor> raw = run_container(args);
    on_device.Check();
    std::vector<std::pair<std::string, at::Tensor>> positional;
    positional.reserve(raw.size());
    for (at::Tensor& t : raw) positional.emplace_back("", std::move(t));
    ASSIGN_OR_RETURN(outputs, m.outputs->ToAnswer(m.name, std::move(positional)));
  } catch (const std::exception& e) {
    return StatusFromTorchException(e, absl::StrCat("model '", m.name, "' failed: "));
  }
  return outputs;
}

}  // namespace infergate
