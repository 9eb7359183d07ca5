#pragma once
// The tensors of a warm-up sample (Triton's model_warmup, read into the
// config's warmup_samples): what ModelManager::WarmUp runs before a version
// serves, and what the accuracy check runs on when the config names no
// sample file.
//
//   ZERO_DATA     zeros; BYTES: empty strings
//   RANDOM_DATA   fixed-seed values: floats uniform in [-1, 1), integers
//                 in [0, 9], bools either; BYTES: empty strings (Triton's
//                 rule: random strings fall back to zero data)
//   DATA_FILE     <model folder>/warmup/<file>: one row's values, raw and
//                 row-major (BYTES: 4-byte lengths, then the bytes), read
//                 whole (at most 256 MiB) and of exactly the row's size
//
// One row is repeated to `batch_size` rows where the model batches (the
// batch dimension leads); a model that does not batch takes the dims as
// they are. Tensors come in the signature's input order when it declares
// inputs, each named by the sample; otherwise in the sample's order.
//
// Threading: pure functions (they read files).

#include <string>
#include <vector>

#include <ATen/core/Tensor.h>

#include "absl/status/statusor.h"
#include "infergate/v1/model_config.pb.h"
#include "scheduler/repository/input_signature.h"

namespace infergate {

struct WarmupTensors {
  std::vector<at::Tensor> tensors;  // on the CPU
  // What they came from: "warmup:<name>:<shapes>[:<sha256 of each file>]".
  std::string fingerprint;
};

// INVALID_ARGUMENT naming warmup_samples[i] (and the input) for a sample
// that does not fit the signature or whose file is missing, too large, or
// not the row's size.
absl::StatusOr<WarmupTensors> MakeWarmupTensors(const InputSignature& signature, const v1::WarmupSample& sample,
                                                size_t index, const std::string& model_dir);

}  // namespace infergate
