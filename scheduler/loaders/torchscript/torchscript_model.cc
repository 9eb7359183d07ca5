#include "scheduler/loaders/torchscript/torchscript_model.h"

#include <torch/script.h>

#include <algorithm>
#include <filesystem>
#include <thread>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "common/status_macros.h"
#include "devices/device_failure.h"
#include "devices/simulated_run.h"
#include "devices/tensor_placement.h"
#include "devices/torch_dtype.h"
#include "devices/torch_probe.h"
#include "scheduler/loaders/torchscript/torchscript_optimization.h"
#include "scheduler/model/check_inputs.h"
#include "scheduler/model/declared_outputs.h"
#include "scheduler/model/forward_arguments.h"
#include "scheduler/model/model_load_error.h"
#include "scheduler/model/string_tensor.h"
#include "scheduler/model/torch_status.h"
#include "scheduler/repository/model_config.h"

namespace infergate {

struct TorchScriptModel::Impl {
  torch::jit::Module module;
  TensorPlacement placement;
  std::chrono::microseconds transfer_time{0};  // placing the weights on the device, at load
  std::string name;
  std::optional<DeclaredOutputs> outputs;  // set at load
  bool batching = false;                   // max_batch_size > 0: inputs lead with the batch's rows
  // The served module's forward(), looked up once at load (after any
  // optimization replaced the module), not by name on every call.
  std::optional<torch::jit::Method> forward;
  // Set when forward() is called with keyword arguments (an input follows
  // an argument left at its default); then the inputs' names, and the
  // Optional arguments passed as None.
  bool by_keyword = false;
  std::vector<std::string> input_names;
  std::vector<std::string> pass_none;
  bool optimized = false;  // serving torch::jit::optimize_for_inference's form
  bool from_host_copy = false;
};

namespace {

// A TorchScript module as read from its file (eval mode, as saved, on the
// host), kept in a HostCopyStore; pinned when the device it was read for
// is a real CUDA device, so copies to it go straight from pinned memory.
// Never changed once kept: loads share its parameters and copy its buffers.
class TorchScriptHostWeights final : public HostWeights {
 public:
  TorchScriptHostWeights(torch::jit::Module module, uint64_t bytes) : module_(std::move(module)), bytes_(bytes) {}
  uint64_t bytes() const override { return bytes_; }
  const torch::jit::Module& module() const { return module_; }

 private:
  torch::jit::Module module_;
  uint64_t bytes_;
};

uint64_t HostBytes(const torch::jit::Module& module) {
  uint64_t bytes = 0;
  for (const auto& p : module.named_parameters(/*recurse=*/true)) bytes += p.value.nbytes();
  for (const auto& b : module.named_buffers(/*recurse=*/true)) bytes += b.value.nbytes();
  return bytes;
}

bool RealCuda(const DeviceInfo& device) { return device.id.kind == DeviceKind::kCuda && !device.simulated; }

// A new module object tree (the module and each submodule its own object)
// over `from`'s parameters, shared: a model served in eval mode under
// inference mode never writes them, and PlaceSlots replaces a slot rather
// than changing its tensor. Buffers, which a forward() may update (a
// counter), are copied. No parameter byte is copied here.
c10::intrusive_ptr<c10::ivalue::Object> OverSharedParameters(const c10::intrusive_ptr<c10::ivalue::Object>& from) {
  c10::intrusive_ptr<c10::ivalue::Object> to = from->copy();
  const c10::ClassTypePtr type = to->type();
  for (size_t i = 0; i < to->slots().size(); ++i) {
    const c10::IValue& v = to->getSlot(i);
    if (v.isObject() && v.toObjectRef().type()->is_module()) {
      to->setSlot(i, OverSharedParameters(v.toObject()));
    } else if (v.isTensor() && type->is_buffer(i)) {
      to->setSlot(i, v.toTensor().clone());
    }
  }
  return to;
}

// Every parameter and buffer of `object` and its submodules as `placement`
// says (cast, moved): a slot whose tensor changes gets the placed tensor,
// the tensor it held is left as it was (it may be a host copy's).
void PlaceSlots(c10::ivalue::Object& object, const TensorPlacement& placement) {
  const c10::ClassTypePtr type = object.type();
  for (size_t i = 0; i < object.slots().size(); ++i) {
    const c10::IValue v = object.getSlot(i);
    if (v.isObject() && v.toObjectRef().type()->is_module()) {
      PlaceSlots(*v.toObject(), placement);
    } else if (v.isTensor() && (type->is_parameter(i) || type->is_buffer(i))) {
      at::Tensor placed = Place(v.toTensor(), placement);
      if (!placed.is_same(v.toTensor())) object.setSlot(i, std::move(placed));
    }
  }
}

// Leaves a deep copy of `module` (read from the file, not yet placed) in
// the store; pinned for a real CUDA device, where pinning works.
void KeepHostCopy(const HostCopyUse& host, const torch::jit::Module& module, const DeviceInfo& device) {
  torch::jit::Module copy = module.deepcopy();
  if (RealCuda(device)) {
    try {
      for (const auto& p : copy.named_parameters(/*recurse=*/true)) p.value.set_data(p.value.pin_memory());
      for (const auto& b : copy.named_buffers(/*recurse=*/true)) b.value.set_data(b.value.pin_memory());
    } catch (const std::exception& e) {
      LOG_INFO << "host copy of " << host.key.ToString() << " kept unpinned: " << e.what();
    }
  }
  const uint64_t bytes = HostBytes(copy);
  host.store->Keep(host.key, std::make_shared<TorchScriptHostWeights>(std::move(copy), bytes));
}

// On the CPU in FP32 (and unless the config says OFF), replaces `module`
// with its optimized form if that answers the same on the check inputs
// (torchscript_optimization.h); logs which way it went and why. True when
// it did.
bool ServeOptimizedIfSame(torch::jit::Module& module, const TensorPlacement& placement, const v1::ModelConfig& config,
                          const DeviceInfo& device, const std::string& path, const InputSignature& signature) {
  if (config.torchscript_optimization() == v1::TORCHSCRIPT_OPTIMIZE_OFF) return false;
  if (device.id.kind != DeviceKind::kCpu || device.simulated || placement.dtype != at::kFloat) return false;
  const std::filesystem::path version_dir = std::filesystem::path(path).parent_path();
  absl::StatusOr<CheckInputs> sample =
      MakeCheckInputs(signature, config, {version_dir.string(), version_dir.parent_path().string()});
  absl::StatusOr<OptimizedModule> optimized =
      sample.ok() ? OptimizeForInference(module, sample->tensors) : absl::StatusOr<OptimizedModule>(sample.status());
  if (!optimized.ok()) {
    LOG_INFO << "model '" << config.name()
             << "' on cpu: served as saved, not optimized for inference: " << optimized.status().message();
    return false;
  }
  module = std::move(optimized->module);
  LOG_INFO << "model '" << config.name() << "' on cpu: optimized for inference (answers within "
           << optimized->max_abs_error << " of the module as saved on " << sample->fingerprint << ")";
  return true;
}

}  // namespace

TorchScriptModel::TorchScriptModel(std::unique_ptr<Impl> impl, InputSignature signature, DType dtype, uint64_t bytes)
    : impl_(std::move(impl)), signature_(std::move(signature)), compute_dtype_(dtype), parameter_bytes_(bytes) {}

TorchScriptModel::~TorchScriptModel() = default;

bool TorchScriptModel::optimized() const { return impl_->optimized; }

bool TorchScriptModel::from_host_copy() const { return impl_->from_host_copy; }

absl::StatusOr<std::shared_ptr<TorchScriptModel>> TorchScriptModel::Load(const std::string& path,
                                                                         const v1::ModelConfig& config,
                                                                         const DeviceInfo& device, DType compute_dtype,
                                                                         const AdmitBytes& admit,
                                                                         const HostCopyUse& host) {
  PrepareTorchScriptRuntime();
  auto impl = std::make_unique<Impl>();
  impl->name = config.name();
  impl->batching = config.max_batch_size() > 0;
  impl->placement = PlanPlacement(device, compute_dtype);
  // The module as read: from the file's host copy when the caller found one
  // (shared with other loads, so only read here), else from the file.
  std::shared_ptr<const TorchScriptHostWeights> host_copy =
      std::dynamic_pointer_cast<const TorchScriptHostWeights>(host.copy);
  torch::jit::Module source;
  if (host_copy) {
    source = host_copy->module();
  } else {
    try {
      source = torch::jit::load(path, c10::Device(c10::DeviceType::CPU));
    } catch (const std::exception& e) {
      return ModelLoadError(config.name(), path, e.what(), TorchVersion());
    }
  }

  InputSignature sig;
  sig.max_batch_size = config.max_batch_size();
  uint64_t bytes = 0;
  try {
    if (!host_copy) source.eval();
    auto method = source.find_method("forward");
    if (!method) {
      return absl::FailedPreconditionError(
          absl::StrCat("model '", config.name(), "': ", path, " has no forward() method"));
    }
    const c10::FunctionSchema& schema = method->function().getSchema();
    std::vector<ForwardArgument> arguments;
    for (size_t i = 1; i < schema.arguments().size(); ++i) {  // argument 0 is self
      const c10::Argument& a = schema.arguments()[i];
      ForwardArgument f;
      f.name = a.name();
      f.type = a.type()->str();
      f.tensor = a.type()->isSubtypeOf(*c10::TensorType::get());
      f.strings = a.type()->isSubtypeOf(*c10::ListType::ofStrings());
      if (auto optional = a.type()->cast<c10::OptionalType>()) {
        f.optional_tensor = optional->getElementType()->isSubtypeOf(*c10::TensorType::get());
      }
      f.has_default = a.default_value().has_value();
      arguments.push_back(std::move(f));
    }
    std::optional<InputSignature> declared;
    if (config.inputs_size() > 0) declared = DeclaredSignature(config);
    ASSIGN_OR_RETURN(
        ForwardInputs inputs,
        MatchForwardArguments(config.name(), arguments, declared ? &*declared : nullptr, config.max_batch_size()));
    sig = inputs.signature;
    if (inputs.by_keyword) {
      impl->by_keyword = true;
      impl->input_names = inputs.argument_names;
      impl->pass_none = inputs.pass_none;
    }
    impl->outputs.emplace(config);

    // Only floating-point state follows the compute dtype; integer buffers
    // (indices, counters) keep theirs. Converted once here, per (device,
    // dtype), never per request.
    c10::InferenceMode guard;
    // What the device will hold, known before anything is placed there:
    // floating tensors in the compute dtype.
    for (const auto& p : source.named_parameters(/*recurse=*/true)) {
      bytes += p.value.numel() *
               c10::elementSize(p.value.is_floating_point() ? impl->placement.dtype : p.value.scalar_type());
    }
    for (const auto& b : source.named_buffers(/*recurse=*/true)) {
      bytes += b.value.numel() *
               c10::elementSize(b.value.is_floating_point() ? impl->placement.dtype : b.value.scalar_type());
    }
    if (!host_copy && host.store && host.keep) KeepHostCopy(host, source, device);
    if (admit) {
      RETURN_IF_ERROR(admit(bytes));
    }
    // The weights' move to the device, timed (a real accelerator's
    // host-to-device copy; a simulated one's charge is added by
    // SimulatedServable). From a host copy, new module objects over its
    // parameters, each placed into its own slot: a copy that needs no cast
    // or move (FP32 on the CPU or a simulated device) shares the host copy's
    // weights, and a real CUDA device's are copied from pinned memory.
    const auto placing = std::chrono::steady_clock::now();
    if (host_copy) {
      impl->module = torch::jit::Module(OverSharedParameters(host_copy->module()._ivalue()));
      PlaceSlots(*impl->module._ivalue(), impl->placement);
      impl->from_host_copy = true;
    } else {
      impl->module = source;
      std::vector<at::Tensor> state;
      for (const auto& p : impl->module.named_parameters(/*recurse=*/true)) state.push_back(p.value);
      for (const auto& b : impl->module.named_buffers(/*recurse=*/true)) state.push_back(b.value);
      for (at::Tensor& t : state) t.set_data(Place(t, impl->placement));
    }
    if (device.id.kind != DeviceKind::kCpu) {
      impl->transfer_time =
          std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - placing);
    }
    if (!inputs.by_keyword) {
      impl->optimized = ServeOptimizedIfSame(impl->module, impl->placement, config, device, path, sig);
    }
    impl->forward = impl->module.get_method("forward");
  } catch (const std::exception& e) {
    return StatusFromTorchException(e, absl::StrCat("model '", config.name(), "': preparing ", path, " failed: "));
  }
  return std::shared_ptr<TorchScriptModel>(new TorchScriptModel(std::move(impl), std::move(sig), compute_dtype, bytes));
}

std::chrono::microseconds TorchScriptModel::transfer_time() const { return impl_->transfer_time; }

absl::StatusOr<std::vector<NamedTensor>> TorchScriptModel::Run(const std::vector<at::Tensor>& inputs) const {
  const Impl& m = *impl_;
  std::vector<NamedTensor> outputs;
  try {
    c10::InferenceMode guard;
    std::vector<c10::IValue> args;
    args.reserve(inputs.size());
    // Strings stay on the host, as the List[str] the model takes.
    for (const at::Tensor& t : inputs) {
      args.emplace_back(IsStringTensor(t) ? c10::IValue(ToStringList(t)) : c10::IValue(Place(t, m.placement)));
    }
    auto forward = [&]() -> c10::IValue {
      if (!m.by_keyword) return (*m.forward)(std::move(args));
      torch::jit::Kwargs kwargs;
      for (size_t i = 0; i < args.size(); ++i) kwargs.emplace(m.input_names[i], std::move(args[i]));
      for (const std::string& name : m.pass_none) kwargs.emplace(name, c10::IValue());
      return (*m.forward)({}, kwargs);
    };
    DeviceComputeScope on_device;
    c10::IValue result = forward();
    on_device.Check();

    std::vector<std::pair<std::string, at::Tensor>> raw;
    auto is_strings = [](const c10::IValue& v) {
      return v.isList() && v.type()->isSubtypeOf(*c10::ListType::ofStrings());
    };
    auto add = [&](std::string name, const c10::IValue& v) -> absl::Status {
      if (is_strings(v)) {
        raw.emplace_back(std::move(name), FromStringList(v.to<c10::List<std::string>>()));
        return absl::OkStatus();
      }
      if (!v.isTensor()) {
        return absl::InternalError(
            absl::StrCat("model '", m.name, "' returned a ", v.tagKind(), " where a Tensor was expected"));
      }
      raw.emplace_back(std::move(name), v.toTensor());
      return absl::OkStatus();
    };
    if (result.isTensor() || is_strings(result)) {
      RETURN_IF_ERROR(add("", result));
    } else if (result.isTuple() || result.isList()) {
      std::vector<c10::IValue> items =
          result.isTuple() ? result.toTupleRef().elements().vec() : result.toListRef().vec();
      for (const c10::IValue& v : items) {
        RETURN_IF_ERROR(add("", v));
      }
    } else if (result.isGenericDict()) {
      for (const auto& item : result.toGenericDict()) {
        if (!item.key().isString()) {
          return absl::InternalError(absl::StrCat("model '", m.name, "' returned a dict with non-string keys"));
        }
        RETURN_IF_ERROR(add(item.key().toStringRef(), item.value()));
      }
    } else {
      return absl::InternalError(
          absl::StrCat("model '", m.name, "' returned a ", result.tagKind(), "; expected Tensor, tuple or dict"));
    }

    const int64_t batch_rows = m.batching && !inputs.empty() && inputs[0].dim() > 0 ? inputs[0].size(0) : 0;
    ASSIGN_OR_RETURN(outputs, m.outputs->ToAnswer(m.name, std::move(raw), batch_rows));
  } catch (const std::exception& e) {
    LOG_DEBUG << "model '" << m.name << "' threw: " << e.what();
    return StatusFromTorchException(e, absl::StrCat("model '", m.name, "' failed: "));
  }
  return outputs;
}

}  // namespace infergate
