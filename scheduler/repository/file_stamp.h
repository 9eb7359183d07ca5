#pragma once
// One state of a model file on disk, as a stat() call sees it: plain data
// for the repository view and the version plan, free of file-system code
// (repository_scan.h reads stamps).

#include <cstdint>
#include <string>

#include "absl/strings/string_view.h"

namespace infergate {

// Identifies one state of a file: a rewrite in place changes its size or
// modification time, an atomic rename its inode.
struct FileStamp {
  uint64_t size = 0;
  int64_t mtime_ns = 0;
  uint64_t inode = 0;
  bool package = false;  // an AOTInductor package (model.pt2), not TorchScript

  bool exists() const { return inode != 0 || size != 0 || mtime_ns != 0; }
  // Survives a restart and a copy that keeps times (for the learned device
  // limits): "size:mtime_ns".
  std::string ContentKey() const;
  friend bool operator==(const FileStamp&, const FileStamp&) = default;
};

// The format of the model file `stamp` names, as ListModels, the CLI and
// metrics show it: "aoti" (an AOTInductor package) or "torchscript".
absl::string_view ModelFileFormatName(const FileStamp& stamp);

}  // namespace infergate
