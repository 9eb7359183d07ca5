#include "common/zip_extract.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <filesystem>
#include <fstream>
#include <vector>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/folder_entries.h"
#include "common/status_macros.h"
#include "common/zip_listing.h"

namespace infergate {
namespace {

constexpr size_t kChunkBytes = 256 << 10;

std::string Shown(const std::string& name) { return name.substr(0, 128); }

absl::Status Refused(const std::string& name, absl::string_view why) {
  return absl::InvalidArgumentError(absl::StrCat("entry '", Shown(name), "' ", why));
}

// Makes each folder of `relative` (a safe entry name's folders) below
// `dest`; an existing one must be a real folder (never a link).
absl::Status MakeFolders(const std::string& dest, const std::string& relative) {
  std::string at = dest;
  for (absl::string_view part : absl::StrSplit(relative, '/', absl::SkipEmpty())) {
    at = absl::StrCat(at, "/", part);
    if (::mkdir(at.c_str(), 0700) == 0) continue;
    struct stat st{};
    if (errno != EEXIST || ::lstat(at.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
      return Refused(relative, "needs a folder where the archive already put something else");
    }
  }
  return absl::OkStatus();
}

// Writes one entry's data from `in` (positioned at it) to the open file
// `fd`, inflating it when it is deflated; `budget` is what the whole
// archive may still write, and shrinks by what this entry wrote.
absl::Status WriteEntry(std::ifstream& in, const ZipEntry& entry, int fd, uint64_t& budget, uint64_t total_limit) {
  z_stream z{};
  const bool deflated = entry.method == 8;
  if (deflated && inflateInit2(&z, -MAX_WBITS) != Z_OK) return absl::InternalError("zlib could not start");
  absl::Cleanup end = [&] {
    if (deflated) inflateEnd(&z);
  };
  std::vector<char> input(kChunkBytes), output(kChunkBytes);
  uint64_t left_to_read = entry.compressed_size, written = 0;
  uLong crc = crc32(0, nullptr, 0);
  auto emit = [&](const char* data, size_t n) -> absl::Status {
    if (n > budget) {
      return absl::ResourceExhaustedError(absl::StrCat("the archive inflates past the limit of ", total_limit,
                                                       " bytes (at entry '", Shown(entry.name), "')"));
    }
    if (written + n > entry.size) return Refused(entry.name, "inflates past its declared size");
    for (size_t done = 0; done < n;) {
      const ssize_t w = ::write(fd, data + done, n - done);
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0) return absl::UnavailableError(absl::StrCat("writing '", Shown(entry.name), "': ", strerror(errno)));
      done += static_cast<size_t>(w);
    }
    crc = crc32(crc, reinterpret_cast<const Bytef*>(data), static_cast<uInt>(n));
    budget -= n;
    written += n;
    return absl::OkStatus();
  };
  bool stream_end = !deflated;
  while (left_to_read > 0) {
    const size_t n = static_cast<size_t>(std::min<uint64_t>(left_to_read, input.size()));
    in.read(input.data(), static_cast<std::streamsize>(n));
    if (static_cast<size_t>(in.gcount()) != n) return Refused(entry.name, "is truncated");
    left_to_read -= n;
    if (!deflated) {
      RETURN_IF_ERROR(emit(input.data(), n));
      continue;
    }
    z.next_in = reinterpret_cast<Bytef*>(input.data());
    z.avail_in = static_cast<uInt>(n);
    while (z.avail_in > 0 && !stream_end) {
      z.next_out = reinterpret_cast<Bytef*>(output.data());
      z.avail_out = static_cast<uInt>(output.size());
      const int rc = inflate(&z, Z_NO_FLUSH);
      if (rc != Z_OK && rc != Z_STREAM_END) {
        return Refused(entry.name, absl::StrCat("is not valid deflate data (", z.msg ? z.msg : "zlib error", ")"));
      }
      RETURN_IF_ERROR(emit(output.data(), output.size() - z.avail_out));
      stream_end = rc == Z_STREAM_END;
    }
  }
  if (!stream_end) return Refused(entry.name, "ends before its deflate stream does");
  if (written != entry.size) return Refused(entry.name, "is shorter than its declared size");
  if (static_cast<uint32_t>(crc) != entry.crc32) return Refused(entry.name, "fails its CRC-32 check");
  return absl::OkStatus();
}

absl::Status ExtractEntries(const std::string& path, const std::string& dest, const ZipExtractLimits& limits,
                            absl::string_view only_under, uint64_t& written) {
  ASSIGN_OR_RETURN(std::vector<ZipEntry> entries, ListZip(path));
  ASSIGN_OR_RETURN(std::vector<uint64_t> offsets, ZipEntryDataOffsets(path, entries));
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("'", path.substr(0, 256), "' cannot be opened"));
  uint64_t budget = limits.max_total_bytes;
  for (size_t i = 0; i < entries.size(); ++i) {
    const ZipEntry& entry = (entries)[i];
    if (!absl::StartsWith(entry.name, only_under)) continue;
    if (!IsSafeZipEntryName(entry.name)) return Refused(entry.name, "would be written outside the archive's folder");
    if (S_ISLNK(entry.unix_mode)) return Refused(entry.name, "is a symbolic link");
    if (entry.unix_mode != 0 && !S_ISREG(entry.unix_mode) && !S_ISDIR(entry.unix_mode) &&
        (entry.unix_mode & S_IFMT) != 0) {
      return Refused(entry.name, "is not a file or folder");
    }
    if (entry.flags & 1) return Refused(entry.name, "is encrypted");
    const bool folder = entry.name.back() == '/';
    if (folder) {
      RETURN_IF_ERROR(MakeFolders(dest, entry.name));
      continue;
    }
    if (entry.method != 0 && entry.method != 8) {
      return Refused(entry.name, absl::StrCat("uses compression method ", entry.method, " (only stored and deflated)"));
    }
    if (entry.size > budget) {
      return absl::ResourceExhaustedError(absl::StrCat("the archive inflates past the limit of ",
                                                       limits.max_total_bytes, " bytes (at entry '", Shown(entry.name),
                                                       "')"));
    }
    const size_t slash = entry.name.rfind('/');
    if (slash != std::string::npos) {
      RETURN_IF_ERROR(MakeFolders(dest, entry.name.substr(0, slash)));
    }
    const uint64_t data_at = (offsets)[i];
    const std::string target = absl::StrCat(dest, "/", entry.name);
    const int fd = ::open(target.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0) {
      if (errno == EEXIST) return Refused(entry.name, "appears twice in the archive");
      return absl::UnavailableError(absl::StrCat("cannot create '", Shown(entry.name), "': ", strerror(errno)));
    }
    absl::Cleanup close_fd = [fd] { ::close(fd); };
    in.clear();
    in.seekg(static_cast<std::streamoff>(data_at));
    const uint64_t before = budget;
    RETURN_IF_ERROR(WriteEntry(in, entry, fd, budget, limits.max_total_bytes));
    written += before - budget;
  }
  return absl::OkStatus();
}

}  // namespace

bool IsSafeZipEntryName(const std::string& name) {
  if (name.empty() || name.size() > kMaxZipNameBytes || name.front() == '/') return false;
  if (name.find('\\') != std::string::npos || name.find('\0') != std::string::npos) return false;
  // A drive letter ("C:") means an absolute path to some unzip tools.
  if (name.size() >= 2 && name[1] == ':') return false;
  std::vector<absl::string_view> parts = absl::StrSplit(name, '/');
  if (!parts.empty() && parts.back().empty()) parts.pop_back();  // a folder entry's trailing '/'
  for (absl::string_view part : parts) {
    if (part.empty() || part == "." || part == "..") return false;
  }
  return !parts.empty();
}

absl::StatusOr<uint64_t> ExtractZip(const std::string& path, const std::string& dest, const ZipExtractLimits& limits,
                                    absl::string_view only_under) {
  uint64_t written = 0;
  absl::Status s = ExtractEntries(path, dest, limits, only_under, written);
  if (s.ok()) return written;
  // Nothing of a refused archive stays: empty the folder again.
  std::error_code ignored;
  for (const auto& child : FolderEntries(dest, &ignored)) {
    std::filesystem::remove_all(child.path(), ignored);
  }
  return absl::Status(s.code(), absl::StrCat("'", path.substr(0, 256), "': ", s.message()));
}

}  // namespace infergate
