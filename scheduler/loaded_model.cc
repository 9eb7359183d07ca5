#include "scheduler/loaded_model.h"

#include <torch/script.h>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "devices/torch_dtype.h"
#include "scheduler/model_config.h"

namespace infergate {
namespace {

c10::Device TorchDevice(const DeviceId& id) {
  switch (id.kind) {
    case DeviceKind::kCuda: return c10::Device(c10::DeviceType::CUDA, static_cast<c10::DeviceIndex>(id.index));
    case DeviceKind::kMps: return c10::Device(c10::DeviceType::MPS);
    case DeviceKind::kCpu: break;
  }
  return c10::Device(c10::DeviceType::CPU);
}

// LibTorch messages carry a C++ stack trace, and interpreter errors a
// TorchScript traceback ending in the model's own "Kind: message" line; the
// client gets just the message.
std::string Concise(const std::string& s) {
  std::string out = s.substr(0, s.find("\nException raised from"));
  while (!out.empty() && (out.back() == '\n' || out.back() == ' ')) out.pop_back();
  if (out.find("The following operation failed in the TorchScript interpreter") != std::string::npos) {
    size_t nl = out.rfind('\n');
    if (nl != std::string::npos) out = out.substr(nl + 1);
  }
  return out;
}

}  // namespace

struct LoadedModel::Impl {
  mutable torch::jit::Module module;
  c10::Device device{c10::DeviceType::CPU};
  c10::ScalarType compute_type = c10::ScalarType::Float;
  std::string name;
  std::vector<std::string> output_names;        // declared, may be empty
  std::vector<std::optional<DType>> output_dtypes;
};

LoadedModel::LoadedModel(std::unique_ptr<Impl> impl, InputSignature signature, DType dtype, uint64_t bytes)
    : impl_(std::move(impl)), signature_(std::move(signature)), compute_dtype_(dtype), parameter_bytes_(bytes) {}

LoadedModel::~LoadedModel() = default;

absl::StatusOr<std::shared_ptr<LoadedModel>> LoadedModel::Load(const std::string& path,
                                                               const v1::ModelConfig& config,
                                                               const DeviceId& device, DType compute_dtype) {
  auto impl = std::make_unique<Impl>();
  impl->name = config.name();
  impl->device = TorchDevice(device);
  impl->compute_type = ToScalarType(compute_dtype);
  try {
    impl->module = torch::jit::load(path, c10::Device(c10::DeviceType::CPU));
  } catch (const std::exception& e) {
    return absl::InternalError(
        absl::StrCat("model '", config.name(), "': cannot load ", path, ": ", Concise(e.what())));
  }

  InputSignature sig;
  sig.max_batch_size = config.max_batch_size();
  uint64_t bytes = 0;
  try {
    impl->module.eval();
    auto method = impl->module.find_method("forward");
    if (!method) {
      return absl::InternalError(absl::StrCat("model '", config.name(), "': ", path, " has no forward() method"));
    }
    const c10::FunctionSchema& schema = method->function().getSchema();
    const auto& args = schema.arguments();
    for (size_t i = 1; i < args.size(); ++i) {  // argument 0 is self
      if (!args[i].type()->isSubtypeOf(*c10::TensorType::get())) {
        return absl::InternalError(absl::StrCat("model '", config.name(), "': forward() argument '",
                                                args[i].name(), "' is ", args[i].type()->str(),
                                                "; only Tensor arguments are supported"));
      }
      InputSpec spec;
      spec.name = args[i].name();
      sig.inputs.push_back(std::move(spec));
    }
    if (config.inputs_size() > 0) {
      if (static_cast<size_t>(config.inputs_size()) != sig.inputs.size()) {
        return absl::InternalError(absl::StrCat("model '", config.name(), "': config.pbtxt declares ",
                                                config.inputs_size(), " inputs but forward() takes ",
                                                sig.inputs.size()));
      }
      for (InputSpec& spec : sig.inputs) {
        const v1::TensorSpec* declared = nullptr;
        for (const v1::TensorSpec& s : config.inputs()) {
          if (s.name() == spec.name) declared = &s;
        }
        if (!declared) {
          return absl::InternalError(absl::StrCat("model '", config.name(), "': forward() argument '", spec.name,
                                                  "' is not declared in config.pbtxt inputs"));
        }
        spec.dtype = DTypeFromProto(declared->dtype());
        spec.dims = std::vector<int64_t>(declared->dims().begin(), declared->dims().end());
      }
    }
    for (const v1::TensorSpec& s : config.outputs()) {
      impl->output_names.push_back(s.name());
      impl->output_dtypes.push_back(DTypeFromProto(s.dtype()));
    }

    // Only floating-point state follows the compute dtype; integer buffers
    // (indices, counters) keep theirs.
    c10::InferenceMode guard;
    for (const auto& p : impl->module.named_parameters(/*recurse=*/true)) {
      at::Tensor t = p.value;
      at::ScalarType target = t.is_floating_point() ? impl->compute_type : t.scalar_type();
      t.set_data(t.to(impl->device, target));
      bytes += t.numel() * t.element_size();
    }
    for (const auto& b : impl->module.named_buffers(/*recurse=*/true)) {
      at::Tensor t = b.value;
      at::ScalarType target = t.is_floating_point() ? impl->compute_type : t.scalar_type();
      t.set_data(t.to(impl->device, target));
      bytes += t.numel() * t.element_size();
    }
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrCat("model '", config.name(), "': preparing ", path,
                                            " failed: ", Concise(e.what())));
  }
  return std::shared_ptr<LoadedModel>(new LoadedModel(std::move(impl), std::move(sig), compute_dtype, bytes));
}

absl::StatusOr<std::vector<NamedTensor>> LoadedModel::Run(const std::vector<at::Tensor>& inputs) const {
  const Impl& m = *impl_;
  std::vector<NamedTensor> outputs;
  try {
    c10::InferenceMode guard;
    std::vector<c10::IValue> args;
    args.reserve(inputs.size());
    for (const at::Tensor& t : inputs) {
      if (t.is_floating_point()) {
        args.emplace_back(t.to(m.device, m.compute_type));
      } else {
        args.emplace_back(t.to(m.device));
      }
    }
    c10::IValue result = m.module.forward(std::move(args));

    std::vector<std::pair<std::string, at::Tensor>> raw;
    auto add = [&](std::string name, const c10::IValue& v) -> absl::Status {
      if (!v.isTensor()) {
        return absl::InternalError(absl::StrCat("model '", m.name, "' returned a ", v.tagKind(),
                                                " where a Tensor was expected"));
      }
      raw.emplace_back(std::move(name), v.toTensor());
      return absl::OkStatus();
    };
    if (result.isTensor()) {
      if (absl::Status s = add("", result); !s.ok()) return s;
    } else if (result.isTuple() || result.isList()) {
      std::vector<c10::IValue> items =
          result.isTuple() ? result.toTupleRef().elements().vec() : result.toListRef().vec();
      for (const c10::IValue& v : items) {
        if (absl::Status s = add("", v); !s.ok()) return s;
      }
    } else if (result.isGenericDict()) {
      for (const auto& item : result.toGenericDict()) {
        if (!item.key().isString()) {
          return absl::InternalError(absl::StrCat("model '", m.name, "' returned a dict with non-string keys"));
        }
        if (absl::Status s = add(item.key().toStringRef(), item.value()); !s.ok()) return s;
      }
    } else {
      return absl::InternalError(
          absl::StrCat("model '", m.name, "' returned a ", result.tagKind(), "; expected Tensor, tuple or dict"));
    }

    if (!m.output_names.empty() && m.output_names.size() != raw.size()) {
      return absl::InternalError(absl::StrCat("model '", m.name, "' returned ", raw.size(),
                                              " outputs but config.pbtxt declares ", m.output_names.size()));
    }
    outputs.reserve(raw.size());
    for (size_t i = 0; i < raw.size(); ++i) {
      auto& [name, tensor] = raw[i];
      std::optional<DType> declared;
      if (!m.output_names.empty()) {
        size_t slot = i;
        if (!name.empty()) {  // dict outputs match declared names by key
          slot = m.output_names.size();
          for (size_t s = 0; s < m.output_names.size(); ++s) {
            if (m.output_names[s] == name) slot = s;
          }
          if (slot == m.output_names.size()) {
            return absl::InternalError(
                absl::StrCat("model '", m.name, "' returned output '", name, "' that config.pbtxt does not declare"));
          }
        }
        name = m.output_names[slot];
        declared = m.output_dtypes[slot];
      } else if (name.empty()) {
        name = absl::StrCat("output", i);
      }
      at::ScalarType out_type = tensor.scalar_type();
      if (declared) {
        out_type = ToScalarType(*declared);
      } else if (tensor.is_floating_point()) {
        out_type = at::kFloat;
      }
      if (!FromScalarType(out_type)) {
        return absl::InternalError(absl::StrCat("model '", m.name, "' output '", name, "' has dtype ",
                                                c10::toString(out_type), " which the wire API cannot carry"));
      }
      outputs.push_back({std::move(name), tensor.to(at::kCPU, out_type).contiguous()});
    }
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrCat("model '", m.name, "' failed: ", Concise(e.what())));
  }
  return outputs;
}

}  // namespace infergate
