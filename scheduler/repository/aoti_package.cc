#include "scheduler/repository/aoti_package.h"

#include <algorithm>
#include <map>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "common/status_macros.h"
#include "common/zip_listing.h"
#include "nlohmann/json.hpp"
#include "scheduler/repository/aoti_signature.h"

namespace infergate {
namespace {

constexpr absl::string_view kVariantsFolder = "data/aotinductor/";
constexpr uint64_t kMaxMetadataBytes = 64 << 10;
// Generated C++ is read only to see how its loops are threaded.
constexpr uint64_t kMaxSourceBytes = uint64_t{64} << 20;

absl::Status NotAPackage(const std::string& path, absl::string_view why) {
  return absl::InvalidArgumentError(
      absl::StrCat("'", path.substr(0, 256), "' is not an AOTInductor package (.pt2): ", why));
}

// The top folder every entry sits in ("model/", as PyTorch 2.7 and later
// write packages), or "" for a package whose entries start at its root (as
// 2.6 writes them, with data/aotinductor/ at the top).
std::string TopFolder(const std::vector<ZipEntry>& entries) {
  if (entries.empty()) return "";
  for (const ZipEntry& e : entries) {
    if (absl::StartsWith(e.name, kVariantsFolder)) return "";
  }
  const size_t slash = entries[0].name.find('/');
  if (slash == std::string::npos || slash == 0) return "";
  const std::string top = entries[0].name.substr(0, slash + 1);
  for (const ZipEntry& e : entries) {
    if (!absl::StartsWith(e.name, top)) return "";
  }
  return top;
}

}  // namespace

absl::StatusOr<std::vector<AotiVariant>> ReadAotiVariants(const std::string& path) {
  absl::StatusOr<std::vector<ZipEntry>> entries = ListZip(path);
  if (!entries.ok()) return NotAPackage(path, entries.status().message());
  const std::string top = TopFolder(*entries);
  // data/aotinductor/<name>/<hash>_metadata.json and <hash>.so per variant.
  std::map<std::string, const ZipEntry*> metadata;
  std::map<std::string, uint64_t> library_bytes;
  std::map<std::string, ZipEntry> sources;
  std::map<std::string, std::string> blobs;
  std::string constants_entry;  // one entry of [<top>/]data/constants/, if any
  for (const ZipEntry& e : *entries) {
    absl::string_view name = e.name;
    if (!absl::ConsumePrefix(&name, top)) continue;
    if (absl::StartsWith(name, "data/constants/") && name.back() != '/' && constants_entry.empty()) {
      constants_entry = e.name;
    }
    if (!absl::ConsumePrefix(&name, kVariantsFolder)) continue;
    const size_t slash = name.find('/');
    if (slash == absl::string_view::npos || slash == 0) continue;
    const std::string variant(name.substr(0, slash));
    absl::string_view file = name.substr(slash + 1);
    if (file.find('/') != absl::string_view::npos) continue;
    if (absl::EndsWith(file, "_metadata.json")) metadata[variant] = &e;
    if (absl::EndsWith(file, ".so")) library_bytes[variant] += e.size;
    if (absl::EndsWith(file, ".cpp")) sources[variant] = e;
    if (absl::EndsWith(file, ".blob")) blobs[variant] = e.name;
  }
  if (metadata.empty()) return NotAPackage(path, "it holds no compiled model (data/aotinductor/<name>/)");
  std::vector<AotiVariant> out;
  for (const auto& [name, entry] : metadata) {
    if (library_bytes.count(name) == 0) {
      return NotAPackage(path, absl::StrCat("variant '", name.substr(0, 64), "' has no compiled library (.so)"));
    }
    absl::StatusOr<std::string> text = ReadStoredZipEntry(path, *entry, kMaxMetadataBytes);
    if (!text.ok()) return NotAPackage(path, text.status().message());
    nlohmann::json json = nlohmann::json::parse(*text, nullptr, /*allow_exceptions=*/false);
    if (!json.is_object() || !json.contains("AOTI_DEVICE_KEY") || !json["AOTI_DEVICE_KEY"].is_string()) {
      return NotAPackage(path,
                         absl::StrCat("variant '", name.substr(0, 64), "' has no AOTI_DEVICE_KEY in its metadata"));
    }
    AotiVariant variant;
    variant.name = name;
    variant.folder = absl::StrCat(top, kVariantsFolder, name, "/");
    variant.device = json["AOTI_DEVICE_KEY"].get<std::string>();
    variant.library_bytes = library_bytes[name];
    variant.source = sources[name];
    variant.weights_outside = blobs.count(name) ? blobs[name] : constants_entry;
    if (json.contains(kAotiSignatureKey)) {
      if (!json[kAotiSignatureKey].is_string()) {
        return NotAPackage(path, absl::StrCat("variant '", name.substr(0, 64), "': its ", kAotiSignatureKey,
                                              " metadata is not a string"));
      }
      variant.signature = json[kAotiSignatureKey].get<std::string>();
    }
    out.push_back(std::move(variant));
  }
  return out;
}

int MaxLoopThreads(absl::string_view source) {
  constexpr absl::string_view kClause = "num_threads(";
  int most = 0;
  for (size_t at = source.find(kClause); at != absl::string_view::npos; at = source.find(kClause, at + 1)) {
    // Only the clause of an OpenMP pragma on the same line counts.
    const size_t line = source.rfind('\n', at);
    const absl::string_view before = source.substr(line == absl::string_view::npos ? 0 : line + 1,
                                                   at - (line == absl::string_view::npos ? 0 : line + 1));
    if (!absl::StrContains(before, "#pragma omp")) continue;
    int n = 0;
    size_t i = at + kClause.size();
    for (; i < source.size() && absl::ascii_isdigit(static_cast<unsigned char>(source[i])) && n < 1000000; ++i) {
      n = n * 10 + (source[i] - '0');
    }
    if (i < source.size() && source[i] == ')') most = std::max(most, n);
  }
  return most;
}

absl::StatusOr<int> CompiledLoopThreads(const std::string& path, const AotiVariant& variant) {
  if (variant.source.name.empty()) return 0;
  ASSIGN_OR_RETURN(std::string text, ReadStoredZipEntry(path, variant.source, kMaxSourceBytes));
  return MaxLoopThreads(text);
}

absl::StatusOr<AotiVariant> PickAotiVariant(const std::vector<AotiVariant>& variants, const DeviceInfo& device) {
  const std::string kind(DeviceKindName(device.id.kind));
  const AotiVariant* named = nullptr;
  const AotiVariant* compiled = nullptr;
  for (const AotiVariant& v : variants) {
    if (v.name == kind) named = &v;
    if (v.device == kind && !compiled) compiled = &v;
  }
  if (device.simulated && device.id.kind != DeviceKind::kCpu) {
    if (named && named->device == "cpu") return *named;
  } else {
    if (named && named->device == kind) return *named;
    if (compiled) return *compiled;
  }
  std::vector<std::string> have;
  for (const AotiVariant& v : variants) have.push_back(absl::StrCat(v.name, " (", v.device, ")"));
  return absl::NotFoundError(absl::StrCat("the package has no variant compiled for ",
                                          device.simulated ? "simulated " : "", device.id.ToString(),
                                          device.simulated ? absl::StrCat(" (a CPU build named '", kind, "')") : "",
                                          "; it holds ", absl::StrJoin(have, ", ")));
}

}  // namespace infergate
