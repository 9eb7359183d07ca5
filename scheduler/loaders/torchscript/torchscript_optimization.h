#pragma once
// Optimizing a TorchScript module for inference on the CPU, and the proof
// that it still gives the module's answers.
//
// torch::jit::optimize_for_inference freezes the module (its weights become
// constants of the graph), folds what it can, and moves convolutions into
// oneDNN's layout with their activations fused: on LibTorch 2.6 a
// convolutional model runs several times faster on the CPU (bench/results).
// It rewrites the graph, so it is not always safe: a copy is served
// optimized only when it answers as the module as saved does on the check
// inputs (scheduler/model/check_inputs.h), and otherwise as saved.
//
// The TorchScript fuser's CPU code generation is turned off process-wide
// (once, by PrepareTorchScriptRuntime, which every TorchScript load calls):
// with it on, the first run of an optimized MLP (its weights folded into a
// matmul group that the fuser compiles with LLVM) did not return.
//
// Pure but for that one process-wide setting; thread-safe.

#include <ATen/core/Tensor.h>
#include <torch/script.h>

#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace infergate {

// Turns the TorchScript fuser's CPU code generation off, once per process.
// Call before any TorchScript module runs.
void PrepareTorchScriptRuntime();

struct OptimizedModule {
  torch::jit::Module module;
  double max_abs_error = 0;  // the largest difference seen on the check inputs
};

// `module` (in eval mode, its weights where they will run, on the CPU)
// optimized for inference, if on `sample` (its forward's positional
// arguments) every output of the optimized module is within
// 1e-4 x max(1, largest magnitude of the plain output) of the plain one,
// and has the same dtypes, shapes and structure. Otherwise an error saying
// why: FAILED_PRECONDITION (the answers differ, or the optimization or a
// run threw). `module` itself is not changed.
absl::StatusOr<OptimizedModule> OptimizeForInference(const torch::jit::Module& module,
                                                     const std::vector<at::Tensor>& sample);

}  // namespace infergate
