#pragma once
// Serves a TorchServe model store as a model repository. KServe mounts the
// `pytorch` format at /mnt/models as
//   config/config.properties   (optional; torchserve_config.h)
//   model-store/*.mar          (torch-model-archiver archives)
// and a plain folder of .mar files is read the same way, serving every
// archive. At start, each archive to serve is extracted (zip_extract.h)
// into a private folder and laid out as infergate's own repository:
//   <work>/repository/<model>/config.pbtxt   batch size and delay, timeout,
//                                            queue size, every version
//   <work>/repository/<model>/labels.txt     from index_to_name.json
//   <work>/repository/<model>/<N>/model.pt   the serialized file (or .pt2)
// TorchServe's version names ("1.0", "2.0") become 1, 2, ... in their
// order; the catalog maps them back for TorchServe's and KServe's APIs. An
// archive that cannot be served (a custom handler, an eager model, a
// damaged or oversized zip) is refused alone, with its reason logged and
// kept in the catalog; the other models serve.
//
// Ownership: the store owns its work folder and removes it when destroyed.
// The repository it lays out is read by the core like any other; changes to
// the archives are read at the next start. Thread-safe once opened (const).

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "scheduler/repository/torchserve/mar_manifest.h"
#include "scheduler/repository/torchserve/torchserve_config.h"

namespace infergate {

// Whether `root` is laid out as a TorchServe model store: it holds
// config/config.properties or model-store/, or .mar files and no model
// folders of its own.
bool IsTorchServeStore(const std::string& root);

struct TorchServeStoreOptions {
  // The most the store's archives may extract to, all of them together: an
  // archive that would pass what is left is refused (and nothing of it kept).
  uint64_t max_archive_bytes = uint64_t{16} << 30;
  // Where the work folder is made; "" takes $TMPDIR, else /tmp.
  std::string work_parent;
};

// One model as TorchServe's and KServe's APIs show it.
struct TorchServeModel {
  std::string name;
  MarHandler handler = MarHandler::kBase;
  // TorchServe's version name -> the repository's version number.
  std::map<std::string, int64_t> versions;
  std::string default_version;                  // a key of `versions`
  std::map<std::string, std::string> archives;  // version name -> .mar file name
  TorchServeVersionSettings settings;           // the default version's
};

struct TorchServeCatalog {
  std::map<std::string, TorchServeModel> models;
  // Archives that were not served: .mar file name -> why.
  std::map<std::string, std::string> refused;

  // The repository version (as a decimal string) that TorchServe's
  // `version` of `model` is; "" names the default version. NOT_FOUND
  // naming the model or version, or FAILED_PRECONDITION with the reason
  // for a model whose archive was refused.
  absl::StatusOr<std::string> RepositoryVersion(const std::string& model, const std::string& version) const;
};

class TorchServeStore {
 public:
  // Reads the store at `root` and lays out its repository. Fails only for
  // what stops the whole store: an unreadable or refused config.properties,
  // no model store folder, or a work folder that cannot be made.
  static absl::StatusOr<std::unique_ptr<TorchServeStore>> Open(const std::string& root,
                                                               const TorchServeStoreOptions& options);
  ~TorchServeStore();
  TorchServeStore(const TorchServeStore&) = delete;
  TorchServeStore& operator=(const TorchServeStore&) = delete;

  // The repository laid out for the core.
  const std::string& repository() const { return repository_; }
  const TorchServeCatalog& catalog() const { return catalog_; }
  // config.properties as read (defaults when the store has none).
  const TorchServeConfig& config() const { return config_; }

 private:
  TorchServeStore() = default;

  std::string work_;
  std::string repository_;
  TorchServeCatalog catalog_;
  TorchServeConfig config_;
};

}  // namespace infergate
