#pragma once
// One variant of an AOTInductor package (aoti_package.h), unpacked to disk
// so its compiled library can be opened: the variant's folder
// ([<top>/]data/aotinductor/<name>/, the library and, for a GPU build, its
// kernel binaries) is extracted into a fresh folder of its own,
// <temp>/infergate-aoti-<pid>.<start>-XXXXXX (<temp>: $TMPDIR, else /tmp;
// <pid>.<start>: this process's id and start time), with the checks of
// common/zip_extract.h. The folder goes when this object does: destroy it
// after whatever opened the library.
//
// A process that dies (killed, crashed) leaves its folders behind; in a
// container restarted in the same pod they would pile up in the pod's /tmp
// volume. So the first unpack of a process under a temp folder removes the
// folders there whose process is gone (no process with that id and start
// time), and logs what it removed.
//
// infergate unpacks packages itself rather than through LibTorch's package
// loader because that loader (2.6) builds a container of one model instance
// and unpacks a package again for each loader; unpacked once, a variant's
// library is opened once with as many instances as the workers need
// (aoti_model.h). It also honours TMPDIR, which LibTorch 2.6 does not.
//
// Thread-safety: immutable after Unpack; destroy it from one thread.

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "scheduler/repository/aoti_package.h"

namespace torch::inductor {
class AOTIModelContainerRunner;
}

namespace infergate {

class UnpackedAotiVariant {
 public:
  // Unpacks `variant` of the package at `path`. INVALID_ARGUMENT naming the
  // entry for a damaged or unsafe one, or when the variant's folder holds
  // no compiled library to open; UNAVAILABLE when the temp folder cannot
  // be written. A refused unpack leaves nothing on disk.
  static absl::StatusOr<std::unique_ptr<UnpackedAotiVariant>> Unpack(const std::string& path,
                                                                     const AotiVariant& variant);
  ~UnpackedAotiVariant();  // removes root()
  UnpackedAotiVariant(const UnpackedAotiVariant&) = delete;
  UnpackedAotiVariant& operator=(const UnpackedAotiVariant&) = delete;

  // The folder this object made: <temp>/infergate-aoti-<pid>.<start>-XXXXXX.
  const std::string& root() const { return root_; }
  // The variant's files: <root>/[<top>/]data/aotinductor/<name> (what
  // LibTorch calls the cubin dir of a GPU build).
  const std::string& variant_folder() const { return variant_folder_; }
  // Its compiled library (.so).
  const std::string& library() const { return library_; }

 private:
  UnpackedAotiVariant(std::string root, std::string variant_folder, std::string library)
      : root_(std::move(root)), variant_folder_(std::move(variant_folder)), library_(std::move(library)) {}

  std::string root_;
  std::string variant_folder_;
  std::string library_;
};

// Removes the folders under `temp` named as Unpack names them whose process
// is gone; returns their paths. Others (another name, a live process's) are
// left alone. Unpack calls it once per process and temp folder.
std::vector<std::string> RemoveUnpackedFoldersOfGoneProcesses(const std::string& temp);

// Opens the unpacked variant's library (compiled for `variant.device`) as
// one AOTInductor container of `instances` model instances sharing its
// constants, placed on `device` ("cpu", "cuda:1"), with the runner LibTorch
// registers for that device kind (what LibTorch 2.6's package loader does,
// with one instance, on the current device). Throws what LibTorch throws
// for a library it cannot open, and std::runtime_error for a device kind
// this LibTorch has no runner for. `files` must outlive it.
std::unique_ptr<torch::inductor::AOTIModelContainerRunner> OpenAotiContainer(const UnpackedAotiVariant& files,
                                                                             const AotiVariant& variant,
                                                                             const std::string& device,
                                                                             size_t instances);

}  // namespace infergate
