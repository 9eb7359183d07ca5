#pragma once
// A TorchScript file loaded for a measuring tool exactly as the server
// serves it on the CPU: through the server's own servable
// (scheduler/loaders/torchscript/torchscript_model.h), so the in-process floor and the model
// ceilings run the forward pass the server runs, optimized for inference
// when the server would optimize it, rather than a copy of its steps.
//
//   absl::StatusOr<std::shared_ptr<TorchScriptModel>> m =
//       LoadServedTorchScript("mlp.pt", {256}, v1::FLOAT32, /*max_batch=*/64, /*optimize=*/true);
//   (*m)->Run({x});  // x: [b, 256], b <= 64
//
// The model's first argument is the one input ("INPUT__0", Triton's
// convention, fills it whatever its name), of `row_shape` per row.
// Threading: the returned servable's Run may be called from several
// threads at once.

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "infergate/v1/tensor.pb.h"
#include "scheduler/loaders/torchscript/torchscript_model.h"

namespace infergate {

// `optimize` false serves the module as saved (the config's
// torchscript_optimization OFF); true lets the server's check decide.
absl::StatusOr<std::shared_ptr<TorchScriptModel>> LoadServedTorchScript(const std::string& path,
                                                                        const std::vector<int64_t>& row_shape,
                                                                        v1::DataType dtype, int64_t max_batch,
                                                                        bool optimize);

}  // namespace infergate
