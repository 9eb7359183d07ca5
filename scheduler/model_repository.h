#pragma once
// The on-disk model repository: <root>/<model>/config.pbtxt and
// <root>/<model>/<version>/model.pt. Thread-safe.

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include "absl/strings/string_view.h"
#include <vector>

#include "absl/status/statusor.h"
#include "infergate/v1/model_config.pb.h"
#include "scheduler/input_signature.h"

namespace infergate {

struct ModelEntry {
  std::string name;
  v1::ModelConfig config;
  std::vector<int64_t> versions;  // ascending
  std::string dir;
  absl::Status problem;  // a broken config.pbtxt, reported on use
  // What config.pbtxt declares about inputs; empty inputs when it is silent.
  InputSignature declared;
};

class ModelRepository {
 public:
  explicit ModelRepository(std::string root);

  // Re-reads every model folder. Fails only when the root is unreadable;
  // broken models are logged and kept with their problem.
  absl::Status Scan();
  std::vector<ModelEntry> List() const;

  // A known model, or one added to disk since the last scan. Errors:
  // INVALID_ARGUMENT for a bad name, NOT_FOUND, FAILED_PRECONDITION for a
  // model whose config is broken.
  absl::StatusOr<std::shared_ptr<const ModelEntry>> Find(absl::string_view name);

  // "" is the highest version; otherwise an integer that must exist.
  absl::StatusOr<int64_t> ResolveVersion(const ModelEntry& model, absl::string_view version, absl::string_view field = "version");

  std::string ModelFile(const ModelEntry& model, int64_t version) const;
  // Whether `name` is a model seen in the repository (for bounded metric labels).
  bool Known(absl::string_view name) const;
  const std::string& root() const { return root_; }

 private:
  absl::StatusOr<std::shared_ptr<const ModelEntry>> ReadModel(const std::string& name) const;

  std::string root_;
  mutable std::mutex mu_;
  std::map<std::string, std::shared_ptr<const ModelEntry>, std::less<>> models_;
};

// Parses a version string: digits only, at most 18 of them.
absl::StatusOr<int64_t> ParseVersion(absl::string_view text, absl::string_view field);

}  // namespace infergate
