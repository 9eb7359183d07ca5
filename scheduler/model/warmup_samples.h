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
// A sample is a load's input as much as a request is (an upload's config
// carries it), so it is checked before anything is allocated or read: its
// dtype and dims against the input the model declares (a -1 dim takes
// any size), its elements against the requests' limit, its bytes times its
// batch size against WarmupLimits::max_sample_bytes and, times its count,
// against max_work_bytes; a data file is a relative path inside the model's
// warmup/ folder (symbolic links resolved), and errors name it as given,
// never its contents.
//
// Threading: pure functions (they read files).

#include <ATen/core/Tensor.h>

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "infergate/v1/model_config.pb.h"
#include "scheduler/repository/input_signature.h"

namespace infergate {

struct WarmupLimits {
  // A tensor's elements, as requests' (--max-tensor-elements).
  int64_t max_elements = int64_t{1} << 28;
  // One sample's inputs, all rows (strings at 128 bytes an element).
  uint64_t max_sample_bytes = uint64_t{64} << 20;
  // A sample's bytes times its count: the warm-up's work.
  uint64_t max_work_bytes = uint64_t{1} << 30;
};

struct WarmupTensors {
  std::vector<at::Tensor> tensors;  // on the CPU
  // What they came from: "warmup:<name>:<shapes>[:<sha256 of each file>]".
  std::string fingerprint;
};

// INVALID_ARGUMENT naming warmup_samples[i] (and the input) for a sample
// that does not fit the signature or whose file is missing, too large, or
// not the row's size.
// INVALID_ARGUMENT, or RESOURCE_EXHAUSTED past `limits`.
absl::StatusOr<WarmupTensors> MakeWarmupTensors(const InputSignature& signature, const v1::WarmupSample& sample,
                                                size_t index, const std::string& model_dir,
                                                const WarmupLimits& limits = WarmupLimits());

}  // namespace infergate
