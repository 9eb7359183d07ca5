#pragma once
// The entries of a zip archive, read from its central directory (ZIP64
// included) without extracting anything, and the bytes of a small stored
// (uncompressed) entry. For looking inside model packages (AOTInductor's
// .pt2) before handing them to the library that loads them.
//
// Every offset and size is checked against the file before it is used: a
// truncated or hostile archive gives INVALID_ARGUMENT saying what is wrong,
// never a read outside the file. Pure functions over a file; thread-safe.

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace infergate {

inline constexpr size_t kMaxZipEntries = 100000;

struct ZipEntry {
  std::string name;
  uint16_t method = 0;  // 0: stored, 8: deflated
  uint16_t flags = 0;   // general purpose bits; bit 0: encrypted
  uint32_t crc32 = 0;
  // The Unix file mode (type and permission bits) when the archive was
  // made on Unix; 0 otherwise.
  uint32_t unix_mode = 0;
  uint64_t compressed_size = 0;
  uint64_t size = 0;
  uint64_t local_header_offset = 0;
};

// The archive's entries, in central-directory order.
absl::StatusOr<std::vector<ZipEntry>> ListZip(const std::string& path);
// The same for an archive in memory (`name` names it in errors).
absl::StatusOr<std::vector<ZipEntry>> ListZipBytes(absl::string_view bytes, const std::string& name);

// Where `entry`'s data (compressed_size bytes) starts in the file: past its
// local header, whose extra field may differ in length from the central
// directory's. Checked to lie within the file, and the local header to name
// the entry as the central directory does.
absl::StatusOr<uint64_t> ZipEntryDataOffset(const std::string& path, const ZipEntry& entry);

// The same for every entry of a listing, which must also not overlap one
// another (INVALID_ARGUMENT naming two that do).
absl::StatusOr<std::vector<uint64_t>> ZipEntryDataOffsets(const std::string& path,
                                                          const std::vector<ZipEntry>& entries);

// The bytes of `entry` (from ListZip of the same file), which must be
// stored uncompressed and at most `max_bytes` long.
absl::StatusOr<std::string> ReadStoredZipEntry(const std::string& path, const ZipEntry& entry, uint64_t max_bytes);

}  // namespace infergate
