#include "scheduler/model/reshaped_servable.h"

#include <ATen/ATen.h>

#include <exception>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "scheduler/model/torch_status.h"

namespace infergate {
namespace {

std::vector<int64_t> Dims(const google::protobuf::RepeatedField<int64_t>& shape) {
  return std::vector<int64_t>(shape.begin(), shape.end());
}

std::string Shown(c10::IntArrayRef shape) { return absl::StrCat("[", absl::StrJoin(shape, ", "), "]"); }

}  // namespace

std::shared_ptr<Servable> ReshapedServable::Wrap(std::shared_ptr<Servable> inner, const v1::ModelConfig& config) {
  bool any = false;
  for (const v1::TensorSpec& s : config.inputs()) any |= s.has_reshape();
  for (const v1::TensorSpec& s : config.outputs()) any |= s.has_reshape();
  if (!any) return inner;
  return std::shared_ptr<Servable>(new ReshapedServable(std::move(inner), config));
}

v1::ModelConfig ReshapedServable::ModelSide(const v1::ModelConfig& config) {
  v1::ModelConfig side = config;
  auto swap = [](google::protobuf::RepeatedPtrField<v1::TensorSpec>* specs) {
    for (v1::TensorSpec& s : *specs) {
      if (!s.has_reshape()) continue;
      *s.mutable_dims() = s.reshape().shape();
      s.clear_reshape();
    }
  };
  swap(side.mutable_inputs());
  swap(side.mutable_outputs());
  return side;
}

ReshapedServable::ReshapedServable(std::shared_ptr<Servable> inner, const v1::ModelConfig& config)
    : inner_(std::move(inner)),
      signature_(inner_->signature()),
      model_(config.name()),
      batched_(config.max_batch_size() > 0) {
  // The servable's inputs are in its signature's order; the config names
  // them. Requests are checked against the clients' dims.
  for (InputSpec& in : signature_.inputs) {
    std::optional<Pair> pair;
    for (const v1::TensorSpec& s : config.inputs()) {
      if (s.name() == in.name && s.has_reshape()) {
        pair = Pair{Dims(s.dims()), Dims(s.reshape().shape())};
        in.dims = Dims(s.dims());
      }
    }
    inputs_.push_back(std::move(pair));
  }
  for (const v1::TensorSpec& s : config.outputs()) {
    if (s.has_reshape()) outputs_.emplace_back(s.name(), Pair{Dims(s.reshape().shape()), Dims(s.dims())});
  }
}

absl::StatusOr<at::Tensor> ReshapedServable::Reshape(const at::Tensor& tensor, const std::vector<int64_t>& from,
                                                     const std::vector<int64_t>& to, bool batched,
                                                     const std::string& what) {
  const int64_t lead = batched ? 1 : 0;
  if (tensor.dim() != static_cast<int64_t>(from.size()) + lead) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": shape ", Shown(tensor.sizes()), " is not ", batched ? "[batch] + " : "", Shown(from)));
  }
  // The sizes this request gave the source's variable dimensions, in order.
  std::vector<int64_t> variable;
  for (size_t d = 0; d < from.size(); ++d) {
    if (from[d] == -1) variable.push_back(tensor.size(static_cast<int64_t>(d) + lead));
  }
  std::vector<int64_t> shape;
  if (batched) shape.push_back(tensor.size(0));
  size_t k = 0;
  for (int64_t d : to) shape.push_back(d == -1 ? (k < variable.size() ? variable[k++] : -1) : d);
  int64_t elements = 1;
  for (int64_t d : shape) elements *= d;
  if (elements != tensor.numel()) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": ", tensor.numel(), " elements of shape ",
                                                   Shown(tensor.sizes()), " do not make shape ", Shown(shape)));
  }
  return tensor.reshape(shape);
}

absl::StatusOr<std::vector<NamedTensor>> ReshapedServable::Around(
    const std::vector<at::Tensor>& inputs,
    const std::function<absl::StatusOr<std::vector<NamedTensor>>(const std::vector<at::Tensor>&)>& run) const {
  std::vector<at::Tensor> shaped;
  shaped.reserve(inputs.size());
  try {
    for (size_t i = 0; i < inputs.size(); ++i) {
      if (i >= inputs_.size() || !inputs_[i]) {
        shaped.push_back(inputs[i]);
        continue;
      }
      absl::StatusOr<at::Tensor> t = Reshape(inputs[i], inputs_[i]->dims, inputs_[i]->reshape, batched_,
                                             absl::StrCat("model '", model_, "' input ", i, " (reshape)"));
      if (!t.ok()) return t.status();
      shaped.push_back(*std::move(t));
    }
  } catch (const std::exception& e) {
    return absl::InvalidArgumentError(
        absl::StrCat("model '", model_, "': reshaping its inputs: ", ConciseTorchMessage(e.what())));
  }
  absl::StatusOr<std::vector<NamedTensor>> outputs = run(shaped);
  if (!outputs.ok()) return outputs;
  try {
    for (NamedTensor& out : *outputs) {
      for (const auto& [name, pair] : outputs_) {
        if (name != out.name) continue;
        // The model gave `reshape` (pair.dims here); clients read `dims`.
        absl::StatusOr<at::Tensor> t = Reshape(out.tensor, pair.dims, pair.reshape, batched_,
                                               absl::StrCat("model '", model_, "' output '", name, "' (reshape)"));
        if (!t.ok()) return absl::InternalError(t.status().message());
        out.tensor = t->contiguous();
      }
    }
  } catch (const std::exception& e) {
    return absl::InternalError(
        absl::StrCat("model '", model_, "': reshaping its outputs: ", ConciseTorchMessage(e.what())));
  }
  return outputs;
}

absl::StatusOr<std::vector<NamedTensor>> ReshapedServable::Run(const std::vector<at::Tensor>& inputs) const {
  return Around(inputs, [this](const std::vector<at::Tensor>& in) { return inner_->Run(in); });
}

absl::StatusOr<std::vector<NamedTensor>> ReshapedServable::WarmUp(const std::vector<at::Tensor>& inputs) const {
  return Around(inputs, [this](const std::vector<at::Tensor>& in) { return inner_->WarmUp(in); });
}

}  // namespace infergate
