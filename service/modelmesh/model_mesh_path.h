#pragma once
// Where a ModelMesh load's model is: `modelPath` checked and resolved to a
// model folder (config.pbtxt and/or <version>/model.pt). ModelMesh's
// storage helper downloads a model to a local folder and names it; that
// folder is the model folder itself, or a repository-style folder holding
// exactly one model folder (a Triton repository of one model).
//
// With a root set (--modelmesh-model-root), the path, its symbolic links
// resolved, must lie under it, and so must everything inside the model
// folder (a version folder or file that is a link leading out is refused):
// the SPI cannot read the server's other files. Pure functions over the
// file system; thread-safe.

#include <string>

#include "absl/status/statusor.h"

namespace infergate {

// The model folder `model_path` names; INVALID_ARGUMENT naming modelPath
// when it is not absolute, not under `root` (when set), or holds no model.
absl::StatusOr<std::string> ResolveModelMeshPath(const std::string& model_path, const std::string& root);

// OK for a modelType infergate serves (empty, "pytorch", "torchscript",
// any case, with or without ":<version>"); INVALID_ARGUMENT naming
// modelType otherwise.
absl::Status CheckModelMeshType(const std::string& model_type);

}  // namespace infergate
