#include "model_store/aoti_unpacked_variant.h"

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
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/mutex.h"
#include "common/logging.h"
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
  for (const fs::directory_entry& e : fs::directory_iterator(folder, ec)) {
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
      libraries.empty()
          ? absl::StrCat("variant '", variant.name, "' unpacked no compiled library (.so)")
          : absl::StrCat("variant '", variant.name, "' holds ", libraries.size(),
                         " compiled libraries and none is named after its generated C++: ",
                         absl::StrJoin(names, ", ")));
}

constexpr absl::string_view kFolderPrefix = "infergate-aoti-";

// When process `pid` started (field 22 of /proc/<pid>/stat, in clock ticks
// since boot); nullopt when there is no such process.
std::optional<uint64_t> ProcessStartTicks(int64_t pid) {
  std::ifstream in(absl::StrCat("/proc/", pid, "/stat"));
  std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  // "pid (comm) state ppid ...": comm may hold spaces and parentheses.
  const size_t comm_end = stat.rfind(')');
  if (comm_end == std::string::npos) return std::nullopt;
  std::vector<absl::string_view> fields =
      absl::StrSplit(absl::string_view(stat).substr(comm_end + 1), ' ', absl::SkipEmpty());
  uint64_t ticks = 0;
  // Field 22 of the line is the 20th after comm (fields 3 onward).
  if (fields.size() < 20 || !absl::SimpleAtoi(fields[19], &ticks)) return std::nullopt;
  return ticks;
}

// This process's mark in its folders' names: "<pid>.<start ticks>", which
// no other process, now or later, has (a pid alone repeats: a restarted
// container's server is often pid 1 again). Just "<pid>" when its start
// cannot be read, a name no sweep takes for a gone process's.
const std::string& OwnerMark() {
  static const std::string mark = [] {
    const std::optional<uint64_t> ticks = ProcessStartTicks(::getpid());
    return ticks ? absl::StrCat(::getpid(), ".", *ticks) : absl::StrCat(::getpid());
  }();
  return mark;
}

// Sweeps `temp` once per process (per folder, as TMPDIR may differ).
void SweepOnce(const std::string& temp) {
  // Without /proc (this process's own start unread: a mark without '.') no
  // process can be told alive: sweep nothing.
  if (OwnerMark().find('.') == std::string::npos) return;
  static Mutex mu;
  static std::set<std::string>* swept = new std::set<std::string>();
  {
    MutexLock lock(mu);
    if (!swept->insert(temp).second) return;
  }
  std::vector<std::string> removed = RemoveUnpackedFoldersOfGoneProcesses(temp);
  if (!removed.empty()) {
    LOG_INFO << "removed " << removed.size() << " unpacked package folder(s) under " << temp
             << " left by server processes that are gone: " << absl::StrJoin(removed, ", ");
  }
}

}  // namespace

std::vector<std::string> RemoveUnpackedFoldersOfGoneProcesses(const std::string& temp) {
  std::vector<std::string> removed;
  std::error_code ec;
  for (const fs::directory_entry& e : fs::directory_iterator(temp, ec)) {
    // <prefix><pid>.<start ticks>-XXXXXX, a folder (never a link).
    const std::string name = e.path().filename().string();
    absl::string_view rest = name;
    if (!absl::ConsumePrefix(&rest, kFolderPrefix) || !e.is_directory(ec) || e.is_symlink(ec)) continue;
    const size_t dot = rest.find('.');
    const size_t dash = rest.find('-');
    int64_t pid = 0;
    uint64_t ticks = 0;
    if (dot == absl::string_view::npos || dash == absl::string_view::npos || dot > dash ||
        !absl::SimpleAtoi(rest.substr(0, dot), &pid) || !absl::SimpleAtoi(rest.substr(dot + 1, dash - dot - 1), &ticks) ||
        pid <= 0) {
      continue;
    }
    const std::optional<uint64_t> started = ProcessStartTicks(pid);
    if (started && *started == ticks) continue;  // its process lives
    std::error_code ignored;
    fs::remove_all(e.path(), ignored);
    removed.push_back(e.path().string());
  }
  return removed;
}

absl::StatusOr<std::unique_ptr<UnpackedAotiVariant>> UnpackedAotiVariant::Unpack(const std::string& path,
                                                                                  const AotiVariant& variant) {
  std::error_code ec;
  fs::path temp = fs::temp_directory_path(ec);  // $TMPDIR, else /tmp
  if (ec) temp = "/tmp";
  SweepOnce(temp.string());
  std::string root = (temp / absl::StrCat(kFolderPrefix, OwnerMark(), "-XXXXXX")).string();
  if (::mkdtemp(root.data()) == nullptr) {
    return absl::UnavailableError(absl::StrCat("cannot make a folder to unpack into under ", temp.string(), ": ",
                                               std::generic_category().message(errno)));
  }
  auto refuse = [&](const absl::Status& why) {
    std::error_code ignored;
    fs::remove_all(root, ignored);
    return why;
  };
  const std::string& under = variant.folder;  // ends in '/'
  // Entries are checked against their declared sizes and CRCs as they are
  // written; the package is the operator's file, as a .pt is, so no total
  // beyond what it declares is imposed.
  ZipExtractLimits limits;
  limits.max_total_bytes = std::numeric_limits<uint64_t>::max();
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

std::unique_ptr<torch::inductor::AOTIModelContainerRunner> OpenAotiContainer(const UnpackedAotiVariant& files,
                                                                             const AotiVariant& variant,
                                                                             const std::string& device,
                                                                             size_t instances) {
  const auto& registry = torch::inductor::getAOTIModelRunnerRegistry();
  const auto runner = registry.find(variant.device);
  if (runner == registry.end()) {
    throw std::runtime_error(absl::StrCat("this LibTorch cannot run a build for '", variant.device, "'"));
  }
  return runner->second(files.library(), instances, device, files.variant_folder());
}

}  // namespace infergate
