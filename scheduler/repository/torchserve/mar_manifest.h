#pragma once
// What a TorchServe model archive (.mar) says of itself, in
// MAR-INF/MANIFEST.json as torch-model-archiver writes it, and whether
// infergate can serve it: a TorchScript (.pt) or AOTInductor (.pt2)
// serialized file with one of the built-in handlers reimplemented here.
// Anything else (a custom Python handler, an eager model with a Python
// class file) is refused with a message that names it and says how to
// convert. Pure functions; thread-safe.

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace infergate {

// TorchServe's built-in handlers that infergate serves (in C++).
enum class MarHandler {
  kBase,             // base_handler: JSON lists in, output tensors as lists out
  kImageClassifier,  // image_classifier: an image in, the top 5 classes out
};

absl::string_view MarHandlerName(MarHandler handler);

struct MarManifest {
  std::string model_name;       // model.modelName
  std::string model_version;    // model.modelVersion ("" when absent)
  std::string serialized_file;  // model.serializedFile, a name in the archive's root
  MarHandler handler = MarHandler::kBase;
  bool package = false;  // the serialized file is an AOTInductor .pt2
  // model.configFile (model-config.yaml), which infergate does not read:
  // the snapshot's settings (or TorchServe's defaults) apply instead.
  std::string config_file;
};

// Reads `dir`/MAR-INF/MANIFEST.json (an extracted archive; `archive` names
// it in messages) and checks that it can be served. FAILED_PRECONDITION
// naming the handler or the model file for what infergate does not run;
// INVALID_ARGUMENT for a damaged manifest.
absl::StatusOr<MarManifest> ReadMarManifest(const std::string& dir, absl::string_view archive);

// The built-in handler `handler` (the manifest's text) names.
absl::StatusOr<MarHandler> BuiltInHandler(absl::string_view handler);

}  // namespace infergate
