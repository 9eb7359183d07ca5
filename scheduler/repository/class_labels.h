#pragma once
// Class labels for classification answers (Triton's classification
// extension): line N of a model's label file names class index N. An
// output's own file (`label_filename` in its config) wins; a `labels.txt`
// in the model's folder applies to every output without one.
//
// Read with the model's config (ReadClassLabels), kept in the published
// model entry, and handed to front ends with each result. Immutable once
// read: share it freely across threads.

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "infergate/v1/model_config.pb.h"

namespace infergate {

struct ClassLabels {
  std::map<std::string, std::vector<std::string>> by_output;
  std::vector<std::string> model_wide;  // labels.txt

  // The labels of `output`; null when it has none.
  const std::vector<std::string>* For(const std::string& output) const;
};

// The largest label file read (a label file is a list of names, not data).
inline constexpr uint64_t kMaxLabelFileBytes = uint64_t{16} << 20;

// INVALID_ARGUMENT unless `name` is a plain file name in the model's folder
// (no path separator, not "." or "..").
absl::Status CheckLabelFileName(absl::string_view name);

// The labels of the model in `dir` under `config`; null when it has none.
// FAILED_PRECONDITION naming the file when a named one cannot be read or is
// larger than kMaxLabelFileBytes.
absl::StatusOr<std::shared_ptr<const ClassLabels>> ReadClassLabels(const std::string& dir,
                                                                   const v1::ModelConfig& config);

}  // namespace infergate
