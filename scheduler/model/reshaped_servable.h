#pragma once
// Triton's `reshape` for any servable: clients speak a tensor's `dims`, the
// model takes (an input) or gives (an output) `reshape.shape`; the batch
// dimension, when the model batches, stays in front of both. The
// configuration's rules (model_config.cc, Triton's) guarantee equal element
// counts, and that each variable dimension of one shape pairs with one of
// the other: the k-th -1 of the target takes the size the k-th -1 of the
// source had in this request.
//
// The model file is loaded under ModelSide(config) (so the loader's own
// checks run the model on the shapes it takes), and the servable it gives
// wrapped: Run and WarmUp reshape on the way in and out, signature() speaks
// the clients' dims, the rest passes through. Immutable after construction;
// thread-safe as the inner servable is.

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "infergate/v1/model_config.pb.h"
#include "scheduler/model/servable.h"

namespace infergate {

class ReshapedServable final : public Servable {
 public:
  // `inner` itself when no input or output of `config` has a reshape.
  static std::shared_ptr<Servable> Wrap(std::shared_ptr<Servable> inner, const v1::ModelConfig& config);

  // `config` as the model file sees it: each tensor's dims are its reshape
  // (and no reshape is left); `config` itself when it has none.
  static v1::ModelConfig ModelSide(const v1::ModelConfig& config);

  absl::StatusOr<std::vector<NamedTensor>> Run(const std::vector<at::Tensor>& inputs) const override;
  absl::StatusOr<std::vector<NamedTensor>> WarmUp(const std::vector<at::Tensor>& inputs) const override;
  const InputSignature& signature() const override { return signature_; }
  DType compute_dtype() const override { return inner_->compute_dtype(); }
  uint64_t resident_bytes() const override { return inner_->resident_bytes(); }
  std::chrono::microseconds transfer_time() const override { return inner_->transfer_time(); }

  // `tensor` (one whose shape is `from` past the batch dimension) with the
  // shape `to` takes; INVALID_ARGUMENT naming `what` when its shape does
  // not follow `from`.
  static absl::StatusOr<at::Tensor> Reshape(const at::Tensor& tensor, const std::vector<int64_t>& from,
                                            const std::vector<int64_t>& to, bool batched, const std::string& what);

 private:
  struct Pair {
    std::vector<int64_t> dims;     // what clients speak
    std::vector<int64_t> reshape;  // what the model takes or gives
  };
  ReshapedServable(std::shared_ptr<Servable> inner, const v1::ModelConfig& config);
  absl::StatusOr<std::vector<NamedTensor>> Around(
      const std::vector<at::Tensor>& inputs,
      const std::function<absl::StatusOr<std::vector<NamedTensor>>(const std::vector<at::Tensor>&)>& run) const;

  std::shared_ptr<Servable> inner_;
  InputSignature signature_;  // the inner one's, with the clients' dims
  std::string model_;
  bool batched_ = false;
  std::vector<std::optional<Pair>> inputs_;            // by position, as signature()
  std::vector<std::pair<std::string, Pair>> outputs_;  // by name
};

}  // namespace infergate
