#include "scheduler/repository/torchserve/mar_manifest.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "common/file_util.h"
#include "nlohmann/json.hpp"

namespace infergate {
namespace {

constexpr char kConvert[] =
    "infergate runs no Python: save the model with torch.jit.script or torch.jit.trace (a .pt file) or "
    "torch.export with AOTInductor (a .pt2 package), archive it with --handler base_handler or "
    "image_classifier, and move other pre- and post-processing into the saved model or the client";

constexpr uint64_t kMaxManifestBytes = 1 << 20;

}  // namespace

absl::string_view MarHandlerName(MarHandler handler) {
  switch (handler) {
    case MarHandler::kBase: return "base_handler";
    case MarHandler::kImageClassifier: return "image_classifier";
  }
  return "base_handler";
}

absl::StatusOr<MarHandler> BuiltInHandler(absl::string_view handler) {
  absl::string_view name = handler;
  absl::ConsumePrefix(&name, "ts.torch_handler.");
  if (name == "base_handler") return MarHandler::kBase;
  if (name == "image_classifier") return MarHandler::kImageClassifier;
  if (name == "image_segmenter" || name == "object_detector" || name == "text_classifier" ||
      name == "densenet_handler" || name == "dali_image_classifier" || name == "vision_handler" ||
      name == "text_handler") {
    return absl::FailedPreconditionError(
        absl::StrCat("handler '", name,
                     "' is one of TorchServe's built-in handlers that infergate does not serve (it serves "
                     "base_handler and image_classifier); ",
                     kConvert));
  }
  return absl::FailedPreconditionError(
      absl::StrCat("handler '", handler.substr(0, 128), "' is a custom Python handler; ", kConvert));
}

absl::StatusOr<MarManifest> ReadMarManifest(const std::string& dir, absl::string_view archive) {
  auto bad = [archive](absl::string_view why) {
    return absl::InvalidArgumentError(absl::StrCat(archive, ": MAR-INF/MANIFEST.json: ", why));
  };
  absl::StatusOr<std::string> text = ReadFile(dir + "/MAR-INF/MANIFEST.json", "manifest");
  if (!text.ok()) return bad("missing; is this a torch-model-archiver archive?");
  if (text->size() > kMaxManifestBytes) return bad("larger than 1 MiB");
  nlohmann::json doc = nlohmann::json::parse(*text, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded() || !doc.is_object()) return bad("is not a JSON object");
  auto model = doc.find("model");
  if (model == doc.end() || !model->is_object()) return bad("has no \"model\" object");
  auto text_field = [&](const char* field) -> std::string {
    auto it = model->find(field);
    return it != model->end() && it->is_string() ? it->get<std::string>() : "";
  };
  MarManifest m;
  m.model_name = text_field("modelName");
  m.model_version = text_field("modelVersion");
  m.serialized_file = text_field("serializedFile");
  m.config_file = text_field("configFile");
  const std::string handler = text_field("handler");
  const std::string model_file = text_field("modelFile");
  if (m.model_name.empty()) return bad("model.modelName is missing");
  if (handler.empty()) return bad("model.handler is missing");
  if (!model_file.empty()) {
    return absl::FailedPreconditionError(absl::StrCat(archive, ": model.modelFile '", model_file.substr(0, 128),
                                                      "' makes this an eager model whose class is "
                                                      "Python code (serialized file '",
                                                      m.serialized_file.substr(0, 128), "' holds only its weights); ",
                                                      kConvert));
  }
  absl::StatusOr<MarHandler> built_in = BuiltInHandler(handler);
  if (!built_in.ok()) return absl::FailedPreconditionError(absl::StrCat(archive, ": ", built_in.status().message()));
  m.handler = *built_in;
  if (m.serialized_file.empty()) return bad("model.serializedFile is missing");
  if (m.serialized_file.find('/') != std::string::npos || m.serialized_file == "." || m.serialized_file == "..") {
    return bad("model.serializedFile must name a file in the archive's root");
  }
  if (absl::EndsWith(m.serialized_file, ".pt2")) {
    m.package = true;
  } else if (!absl::EndsWith(m.serialized_file, ".pt") && !absl::EndsWith(m.serialized_file, ".pth") &&
             !absl::EndsWith(m.serialized_file, ".torchscript")) {
    return absl::FailedPreconditionError(
        absl::StrCat(archive, ": serialized file '", m.serialized_file.substr(0, 128),
                     "' is neither TorchScript (.pt) nor an AOTInductor package (.pt2); ", kConvert));
  }
  return m;
}

}  // namespace infergate
