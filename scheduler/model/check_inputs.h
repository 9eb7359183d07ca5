#pragma once
// The inputs an accuracy check runs a model on, in the order of its
// declared inputs: the tensors of the config's sample-input file, else its
// first warm-up sample (Triton's model_warmup: warmup_samples.h) unless that
// gives strings, else values generated within the declared shapes and the
// config's value ranges. The
// same config and files always give the same tensors (fixed seed), so a
// check is repeatable and its fingerprint names what it ran on.
//
// Generated inputs: a batch of 2 rows where the model batches (1 when its
// max_batch_size is 1), 8 for each variable dimension; floats uniform in
// [-1, 1), integers in [0, 9], bools either, unless the config's
// accuracy.inputs gives a range.

#include <ATen/core/Tensor.h>

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "infergate/v1/model_config.pb.h"
#include "scheduler/repository/input_signature.h"

namespace infergate {

struct CheckInputs {
  std::vector<at::Tensor> tensors;  // in `signature` order, on the CPU
  // What they came from, for the ledger's key: "sample:<sha256>" or
  // "generated:<shapes and ranges>".
  std::string fingerprint;
};

// FAILED_PRECONDITION when the config names no sample file and does not
// declare every input's dtype and dims, or one of them takes strings (the caller then checks on a
// request's own inputs); INVALID_ARGUMENT naming the file or field for a
// sample file that is missing, unreadable or does not fit the signature.
// `folders` are searched for the sample file in order (version folder,
// then model folder); the last is the model folder, where a warm-up
// sample's files are.
absl::StatusOr<CheckInputs> MakeCheckInputs(const InputSignature& signature, const v1::ModelConfig& config,
                                            const std::vector<std::string>& folders);

// Whether the accuracy check runs on the config's first warm-up sample
// (there is one, and it gives no strings).
bool UsesWarmupSample(const v1::ModelConfig& config);

}  // namespace infergate
