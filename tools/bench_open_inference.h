#pragma once
// The load generator's Open Inference Protocol modes: unary ModelInfer
// (asynchronous, `concurrency` calls outstanding) and ModelStreamInfer
// (`concurrency` requests in flight on one stream per channel). Same
// measurements as RunBench, so rows compare with infergate.v1's.

#include "inference/grpc_service.pb.h"
#include "tools/bench.h"

namespace infergate::tools {

// `request` as the Open Inference Protocol sends it: raw inputs, and the
// device choice as parameters.
inference::ModelInferRequest ToOpenInference(const v1::InferRequest& request);

BenchResult RunOpenInferenceBench(const BenchOptions& options, const inference::ModelInferRequest& request,
                                  bool stream);

}  // namespace infergate::tools
