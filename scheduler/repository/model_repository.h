#pragma once
// The model repository as the server serves it: an in-memory view of
// <root>/<model>/config.pbtxt and <root>/<model>/<version>/model.pt with a
// lifecycle state per version. Requests, ListModels and the Open Inference
// Protocol read only this view; the disk is read at start (Scan) and then by
// the repository poller or an explicit LoadModel (model_lifecycle.h), which
// publish new entries here.
//
// Thread-safe. Entries are immutable once published: a reader keeps the
// shared_ptr it found, and an update replaces the entry as a whole.

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/mutex.h"
#include "infergate/v1/model_config.pb.h"
#include "scheduler/repository/class_labels.h"
#include "scheduler/repository/input_signature.h"
#include "scheduler/repository/model_config.h"
#include "scheduler/repository/repository_scan.h"
#include "scheduler/repository/scheduling_policy.h"
#include "scheduler/repository/version_status.h"

namespace infergate {

struct ModelEntry {
  std::string name;
  v1::ModelConfig config;
  std::vector<int64_t> versions;      // served (READY), ascending
  std::vector<VersionStatus> states;  // every version on disk or unloading, ascending
  std::string dir;
  // Set when the model cannot be served at all: a broken config.pbtxt with
  // no good one before it, no version folder, removed from disk.
  absl::Status problem;
  // A broken config.pbtxt update while the previous config still applies.
  std::string config_problem;
  FileStamp config_stamp;  // the config.pbtxt `config` came from
  FileStamp config_tried;  // the newest config.pbtxt tried
  // What config.pbtxt declares about inputs; empty inputs when it is silent.
  InputSignature declared;
  // What it says about batching and queueing requests (never null).
  std::shared_ptr<const SchedulingPolicy> scheduling = DefaultSchedulingPolicy();
  // Class labels for classification answers, read with the config; null
  // when the model has none.
  std::shared_ptr<const ClassLabels> labels;
  bool removed = false;  // its folder is gone; every version is UNLOADING
  // An explicit unload took it out of service: its versions are
  // UNAVAILABLE ("unloaded") until an explicit load, or until its files
  // change on disk.
  bool unloaded = false;
  bool config_broken = false;  // no good config.pbtxt was ever read: nothing is served

  const VersionStatus* Status(int64_t version) const;
  // Sets `config` and what is read from it once (declared, scheduling).
  void SetConfig(v1::ModelConfig config);
};

class ModelRepository {
 public:
  explicit ModelRepository(std::string root);

  // Reads the whole repository from disk and publishes it, trusting the
  // files (models load when first used). Used at start; fails only when the
  // root is unreadable. Broken models are logged and kept with their problem.
  // `scanned`, when given, receives what was read.
  absl::Status Scan(DiskRepository* scanned = nullptr);

  // Copies of every entry, by name.
  std::vector<ModelEntry> List() const;
  // The published entry of `name`, problems and all; null when unknown.
  std::shared_ptr<const ModelEntry> Lookup(absl::string_view name) const;

  // A servable model. Errors: INVALID_ARGUMENT for a bad name, NOT_FOUND
  // (unknown or removed), FAILED_PRECONDITION for a model that cannot be
  // served (broken config, no version). Before the first Scan has read the
  // repository, a name it does not hold yet is UNAVAILABLE (the server is
  // starting; its ports may already answer), never NOT_FOUND: the model
  // may well be there.
  absl::StatusOr<std::shared_ptr<const ModelEntry>> Find(absl::string_view name) const;

  // "" is the highest served version; otherwise an integer that is served.
  // A version on disk but not served says why: NOT_FOUND outside the
  // version policy or removed, UNAVAILABLE while loading,
  // FAILED_PRECONDITION when its file failed to load.
  absl::StatusOr<int64_t> ResolveVersion(const ModelEntry& model, absl::string_view version,
                                         absl::string_view field = "version") const;

  // Replaces (or adds) one model's entry, or removes it.
  void Publish(std::shared_ptr<const ModelEntry> entry);
  void Erase(const std::string& name);
  uint64_t NextGeneration() { return ++generation_; }

  std::string ModelFile(const ModelEntry& model, int64_t version) const;
  // Whether `name` is a model seen in the repository (for bounded metric labels).
  bool Known(absl::string_view name) const;
  const std::string& root() const { return root_; }

  // What a config must also meet on this server (its devices: a Triton
  // config's instance groups name GPUs it has), checked wherever a config
  // is read (Scan, and the lifecycle's reads); a refusal makes the config
  // broken. Set once, before Scan; none by default.
  using ConfigCheck = std::function<absl::Status(const v1::ModelConfig& config)>;
  void SetConfigCheck(ConfigCheck check) { config_check_ = std::move(check); }
  absl::Status CheckConfig(const v1::ModelConfig& config) const {
    return config_check_ ? config_check_(config) : absl::OkStatus();
  }

 private:
  std::string root_;
  ConfigCheck config_check_;
  std::atomic<uint64_t> generation_{0};
  std::atomic<bool> read_{false};  // a Scan has succeeded
  mutable Mutex mu_;
  std::map<std::string, std::shared_ptr<const ModelEntry>, std::less<>> models_ ABSL_GUARDED_BY(mu_);
};

// The wording the start-up scan and the lifecycle share.
// An empty entry for model `name` of the repository at `root`.
std::shared_ptr<ModelEntry> NewModelEntry(const std::string& root, const std::string& name);
absl::Status BrokenConfigProblem(absl::string_view model, const absl::Status& parse_error);
absl::Status NoVersionProblem(absl::string_view model);
// Why a version on disk is not served; also what a request for it is told.
std::string OutOfPolicyReason(const v1::VersionPolicy& policy);
// Why a version of a model with no usable config.pbtxt is not served.
inline constexpr char kBrokenConfigReason[] = "config.pbtxt is broken";

// An entry for a model as it is on disk, every version in the policy READY
// with a fresh generation, without loading anything.
std::shared_ptr<ModelEntry> ReadModelEntry(ModelRepository& repository, const DiskModel& disk);

// The class labels of `entry` under its config; a label file that cannot be
// read is logged and leaves the model without labels (answers still carry
// class indexes and scores).
std::shared_ptr<const ClassLabels> ReadLabelsOrWarn(const ModelEntry& entry);

// Reads and checks `dir`/config.pbtxt for model `name`; a missing file is an
// empty config.
absl::StatusOr<v1::ModelConfig> ReadModelConfig(const std::string& dir, const std::string& name,
                                                ConfigNaming naming = ConfigNaming::kMatchesFolder);

// Recomputes `versions` from `states` (the READY ones).
void RefreshServedVersions(ModelEntry& entry);

// Parses a version string: digits only, at most 18 of them.
absl::StatusOr<int64_t> ParseVersion(absl::string_view text, absl::string_view field);

// NOT_FOUND for a request naming a model the repository does not hold, in
// Triton's words first (clients match on them), then infergate's:
// "Request for unknown model: 'x' is not found; model: 'x' is not in the
// model repository".
absl::Status UnknownModelError(absl::string_view name);
// UNAVAILABLE for a request naming a model before the repository was read.
absl::Status RepositoryNotReadError(absl::string_view name);

}  // namespace infergate
