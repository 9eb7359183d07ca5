#include "scheduler/loaders/aoti/aoti_unpacked_variant.h"

#include <stdlib.h>
#include <torch/csrc/inductor/aoti_runner/model_container_runner.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <optional>
#include <set>
#include <stdexcept>
#include <type_traits>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/folder_entries.h"
#include "common/logging.h"
#include "common/mutex.h"
#include "common/owned_temp_folder.h"
#include "common/status_macros.h"
#include "common/zip_extract.h"

namespace infergate {
namespace {

namespace fs = std::filesystem;

std::string Stem(const std::string& file) {
  const std::string name = fs::path(file).filename().string();
  const size_t dot = name.rfind('.');
  return dot == std::string::npos ? name : name.substr(0, dot);
}

// The library to open among the variant's top-level files: the only .so,
// or with several (not what AOTInductor writes) the one named after the
// generated C++, as that is the one its metadata describes.
absl::StatusOr<std::string> PickLibrary(const std::string& folder, const AotiVariant& variant) {
  std::vector<std::string> libraries;
  std::error_code ec;
  for (const fs::directory_entry& e : FolderEntries(folder, &ec)) {
    if (e.is_regular_file(ec) && e.path().extension() == ".so") libraries.push_back(e.path().string());
  }
  if (libraries.size() == 1) return libraries[0];
  if (!variant.source.name.empty()) {
    for (const std::string& library : libraries) {
      if (Stem(library) == Stem(variant.source.name)) return library;
    }
  }
  std::vector<std::string> names;
  for (const std::string& library : libraries) names.push_back(fs::path(library).filename().string());
  return absl::InvalidArgumentError(
      libraries.empty() ? absl::StrCat("variant '", variant.name, "' unpacked no compiled library (.so)")
                        : absl::StrCat("variant '", variant.name, "' holds ", libraries.size(),
                                       " compiled libraries and none is named after its generated C++: ",
                                       absl::StrJoin(names, ", ")));
}

constexpr absl::string_view kFolderPrefix = "infergate-aoti-";

// What a package may unpack to, at most: its compiled models are stored
// (uncompressed) as AOTInductor writes them, so a few times the file's size
// and some room spare is generous; a package that deflates to more (a zip
// bomb under a .pt2 name) is refused.
constexpr uint64_t kUnpackSizeFactor = 8;
constexpr uint64_t kUnpackSpareBytes = uint64_t{256} << 20;

}  // namespace

std::vector<std::string> RemoveUnpackedFoldersOfGoneProcesses(const std::string& temp) {
  return RemoveFoldersOfGoneProcesses(temp, kFolderPrefix);
}

absl::StatusOr<std::unique_ptr<UnpackedAotiVariant>> UnpackedAotiVariant::Unpack(const std::string& path,
                                                                                 const AotiVariant& variant) {
  ASSIGN_OR_RETURN(const std::string root, MakeOwnedTempFolder(kFolderPrefix));
  auto refuse = [&](const absl::Status& why) {
    std::error_code ignored;
    fs::remove_all(root, ignored);
    return why;
  };
  const std::string& under = variant.folder;  // ends in '/'
  // Entries are checked against their declared sizes and CRCs as they are
  // written, and all of them together against a bound from the file's size.
  std::error_code size_ec;
  const uint64_t file_bytes = fs::file_size(path, size_ec);
  ZipExtractLimits limits;
  limits.max_total_bytes = (size_ec ? 0 : file_bytes) * kUnpackSizeFactor + kUnpackSpareBytes;
  absl::StatusOr<uint64_t> written = ExtractZip(path, root, limits, under);
  if (!written.ok()) return refuse(written.status());
  const std::string folder = absl::StrCat(root, "/", under.substr(0, under.size() - 1));
  absl::StatusOr<std::string> library = PickLibrary(folder, variant);
  if (!library.ok()) return refuse(library.status());
  return std::unique_ptr<UnpackedAotiVariant>(new UnpackedAotiVariant(root, folder, *library));
}

UnpackedAotiVariant::~UnpackedAotiVariant() {
  std::error_code ignored;
  fs::remove_all(root_, ignored);
}

namespace {

// The registry's factory: LibTorch 2.6 takes (library, instances, device,
// folder); later releases add run_single_threaded (false: the container's
// own threads, as before).
template <typename Create>
std::unique_ptr<torch::inductor::AOTIModelContainerRunner> CreateRunner(Create create, const std::string& library,
                                                                        size_t instances, const std::string& device,
                                                                        const std::string& folder) {
  if constexpr (std::is_invocable_v<Create, const std::string&, size_t, const std::string&, const std::string&, bool>) {
    return create(library, instances, device, folder, /*run_single_threaded=*/false);
  } else {
    return create(library, instances, device, folder);
  }
}

}  // namespace

std::unique_ptr<torch::inductor::AOTIModelContainerRunner> OpenAotiContainer(const UnpackedAotiVariant& files,
                                                                             const AotiVariant& variant,
                                                                             const std::string& device,
                                                                             size_t instances) {
  const auto& registry = torch::inductor::getAOTIModelRunnerRegistry();
  const auto runner = registry.find(variant.device);
  if (runner == registry.end()) {
    throw std::runtime_error(absl::StrCat("this LibTorch cannot run a build for '", variant.device, "'"));
  }
  return CreateRunner(runner->second, files.library(), instances, device, files.variant_folder());
}

}  // namespace infergate
