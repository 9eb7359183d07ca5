#pragma once
// What the model repository holds on disk, read with directory listings and
// stat() calls only (no file is opened): each model's config.pbtxt and each
// version's model.pt, with a stamp that changes whenever the file does.
// The poller compares scans; nothing on a request path calls these.
// Pure functions over the file system; thread-safe.

#include <cstdint>
#include <map>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "scheduler/repository/file_stamp.h"

namespace infergate {

// The stamp of `path`; an empty stamp when it is missing or not a file.
// `package` is set for a .pt2 file.
FileStamp StampFile(const std::string& path);

// The model file a version folder serves: model.pt2 (an AOTInductor
// package) when there is one, else model.pt (TorchScript). The path is
// returned whether or not the file exists.
std::string VersionModelFile(const std::string& version_dir);

struct DiskModel {
  std::string name;
  FileStamp config;                       // empty: no config.pbtxt
  std::map<int64_t, FileStamp> versions;  // integer folders holding a model.pt or model.pt2
  friend bool operator==(const DiskModel&, const DiskModel&) = default;
};

using DiskRepository = std::map<std::string, DiskModel>;

// Every model folder under `root` with a valid model name. NOT_FOUND when
// the root cannot be listed; UNAVAILABLE when a model folder could not be
// read whole (the caller keeps what it knew).
absl::StatusOr<DiskRepository> ScanRepository(const std::string& root);
// One model folder; INVALID_ARGUMENT for a name that is not a model name,
// NOT_FOUND when it is not a directory, UNAVAILABLE when its listing failed
// part way.
absl::StatusOr<DiskModel> ScanModel(const std::string& root, const std::string& name);
// A model folder anywhere (`dir`), read as model `name` whatever the
// folder is called; NOT_FOUND when it is not a directory, UNAVAILABLE when
// its listing failed part way.
absl::StatusOr<DiskModel> ScanModelFolder(const std::string& dir, const std::string& name);

}  // namespace infergate
