#include "common/zip_listing.h"

#include <algorithm>
#include <fstream>
#include <functional>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace infergate {
namespace {

constexpr uint32_t kEndOfCentralDirectory = 0x06054b50;
constexpr uint32_t kZip64EndLocator = 0x07064b50;
constexpr uint32_t kZip64End = 0x06064b50;
constexpr uint32_t kCentralHeader = 0x02014b50;
constexpr uint32_t kLocalHeader = 0x04034b50;
constexpr size_t kEndRecordBytes = 22;
constexpr size_t kMaxCommentBytes = 0xFFFF;

uint64_t Le(const std::string& b, size_t at, int bytes) {
  uint64_t v = 0;
  for (int i = bytes - 1; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(b[at + i]);
  return v;
}

absl::Status Broken(const std::string& path, absl::string_view why) {
  return absl::InvalidArgumentError(absl::StrCat("'", path.substr(0, 256), "' is not a readable zip archive: ", why));
}

// Reads `n` bytes at `offset`; false when the file is shorter.
bool ReadAt(std::ifstream& in, uint64_t offset, uint64_t n, std::string* out) {
  out->assign(n, '\0');
  in.clear();
  in.seekg(static_cast<std::streamoff>(offset));
  if (!in) return false;
  in.read(out->data(), static_cast<std::streamsize>(n));
  return static_cast<uint64_t>(in.gcount()) == n;
}

// Where an archive's bytes come from: a file, or memory.
struct ByteSource {
  uint64_t size = 0;
  // `n` bytes at `offset` into `out`; false when the source is shorter.
  std::function<bool(uint64_t offset, uint64_t n, std::string* out)> read;
};

absl::StatusOr<std::vector<ZipEntry>> ListZipFrom(const ByteSource& source, const std::string& path) {
  const uint64_t file_size = source.size;
  const auto& read_at = source.read;
  if (file_size < kEndRecordBytes) return Broken(path, "too short");
  // The end record is the last thing in the file, before a comment of up to 64 KiB.
  const uint64_t tail_size = std::min<uint64_t>(file_size, kEndRecordBytes + kMaxCommentBytes);
  std::string tail;
  if (!read_at(file_size - tail_size, tail_size, &tail)) return Broken(path, "cannot read its end");
  size_t end_at = std::string::npos;
  for (size_t i = tail_size - kEndRecordBytes + 1; i-- > 0;) {
    if (Le(tail, i, 4) == kEndOfCentralDirectory) {
      end_at = i;
      break;
    }
  }
  if (end_at == std::string::npos) return Broken(path, "no end of central directory");
  uint64_t entries = Le(tail, end_at + 10, 2);
  uint64_t directory_size = Le(tail, end_at + 12, 4);
  uint64_t directory_offset = Le(tail, end_at + 16, 4);
  const uint64_t end_offset = file_size - tail_size + end_at;
  if (entries == 0xFFFF || directory_size == 0xFFFFFFFF || directory_offset == 0xFFFFFFFF) {
    // ZIP64: a locator just before the end record points at the ZIP64 end record.
    std::string locator;
    if (end_offset < 20 || !read_at(end_offset - 20, 20, &locator) || Le(locator, 0, 4) != kZip64EndLocator) {
      return Broken(path, "ZIP64 locator missing");
    }
    const uint64_t zip64_end = Le(locator, 8, 8);
    std::string record;
    if (zip64_end > file_size || !read_at(zip64_end, 56, &record) || Le(record, 0, 4) != kZip64End) {
      return Broken(path, "ZIP64 end record missing");
    }
    entries = Le(record, 32, 8);
    directory_size = Le(record, 40, 8);
    directory_offset = Le(record, 48, 8);
  }
  if (entries > kMaxZipEntries) return Broken(path, absl::StrCat("more than ", kMaxZipEntries, " entries"));
  if (directory_offset > file_size || directory_size > file_size - directory_offset) {
    return Broken(path, "central directory outside the file");
  }
  std::string directory;
  if (!read_at(directory_offset, directory_size, &directory)) return Broken(path, "cannot read the directory");
  std::vector<ZipEntry> out;
  size_t at = 0;
  for (uint64_t i = 0; i < entries; ++i) {
    if (at + 46 > directory.size() || Le(directory, at, 4) != kCentralHeader) {
      return Broken(path, absl::StrCat("central directory entry ", i, " is damaged"));
    }
    ZipEntry e;
    e.flags = static_cast<uint16_t>(Le(directory, at + 8, 2));
    e.method = static_cast<uint16_t>(Le(directory, at + 10, 2));
    e.crc32 = static_cast<uint32_t>(Le(directory, at + 16, 4));
    // The high byte of "version made by" is the host system; 3 is Unix,
    // whose mode sits in the high half of the external attributes.
    if (Le(directory, at + 5, 1) == 3) e.unix_mode = static_cast<uint32_t>(Le(directory, at + 38, 4) >> 16);
    e.compressed_size = Le(directory, at + 20, 4);
    e.size = Le(directory, at + 24, 4);
    const size_t name_len = Le(directory, at + 28, 2);
    const size_t extra_len = Le(directory, at + 30, 2);
    const size_t comment_len = Le(directory, at + 32, 2);
    e.local_header_offset = Le(directory, at + 42, 4);
    if (at + 46 + name_len + extra_len + comment_len > directory.size()) {
      return Broken(path, absl::StrCat("central directory entry ", i, " runs past the directory"));
    }
    e.name = directory.substr(at + 46, name_len);
    // ZIP64 sizes and offset, in that order, for the fields marked 0xFFFFFFFF.
    for (size_t x = at + 46 + name_len; x + 4 <= at + 46 + name_len + extra_len;) {
      const uint64_t id = Le(directory, x, 2);
      const size_t len = Le(directory, x + 2, 2);
      if (x + 4 + len > at + 46 + name_len + extra_len) break;
      if (id == 0x0001) {
        size_t v = x + 4;
        for (uint64_t* field : {&e.size, &e.compressed_size, &e.local_header_offset}) {
          if (*field != 0xFFFFFFFF) continue;
          if (v + 8 > x + 4 + len)
            return Broken(path, absl::StrCat("entry '", e.name.substr(0, 128), "': ZIP64 field short"));
          *field = Le(directory, v, 8);
          v += 8;
        }
      }
      x += 4 + len;
    }
    if (e.local_header_offset > file_size || e.compressed_size > file_size - e.local_header_offset) {
      return Broken(path, absl::StrCat("entry '", e.name.substr(0, 128), "' lies outside the file"));
    }
    out.push_back(std::move(e));
    at += 46 + name_len + extra_len + comment_len;
  }
  return out;
}

}  // namespace

absl::StatusOr<std::vector<ZipEntry>> ListZip(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("'", path.substr(0, 256), "' cannot be opened"));
  in.seekg(0, std::ios::end);
  ByteSource source;
  source.size = static_cast<uint64_t>(in.tellg());
  source.read = [&in](uint64_t offset, uint64_t n, std::string* out) { return ReadAt(in, offset, n, out); };
  return ListZipFrom(source, path);
}

absl::StatusOr<std::vector<ZipEntry>> ListZipBytes(absl::string_view bytes, const std::string& name) {
  ByteSource source;
  source.size = bytes.size();
  source.read = [bytes](uint64_t offset, uint64_t n, std::string* out) {
    if (offset > bytes.size() || n > bytes.size() - offset) return false;
    out->assign(bytes.data() + offset, n);
    return true;
  };
  return ListZipFrom(source, name);
}

namespace {

// Where `entry`'s data starts, read from its local header through `in`;
// the header must name the entry as the central directory does.
absl::StatusOr<uint64_t> DataOffset(std::ifstream& in, uint64_t file_size, const std::string& path,
                                    const ZipEntry& entry) {
  std::string header;
  if (!ReadAt(in, entry.local_header_offset, 30, &header) || Le(header, 0, 4) != kLocalHeader) {
    return Broken(path, absl::StrCat("entry '", entry.name.substr(0, 128), "' has no local header"));
  }
  const uint64_t name_len = Le(header, 26, 2);
  std::string local_name;
  if (!ReadAt(in, entry.local_header_offset + 30, name_len, &local_name)) {
    return Broken(path, absl::StrCat("entry '", entry.name.substr(0, 128), "' is truncated"));
  }
  if (local_name != entry.name) {
    return Broken(path, absl::StrCat("entry '", entry.name.substr(0, 128), "' is named '", local_name.substr(0, 128),
                                     "' in its local header"));
  }
  const uint64_t data_at = entry.local_header_offset + 30 + name_len + Le(header, 28, 2);
  if (data_at > file_size || entry.compressed_size > file_size - data_at) {
    return Broken(path, absl::StrCat("entry '", entry.name.substr(0, 128), "' is truncated"));
  }
  return data_at;
}

}  // namespace

absl::StatusOr<uint64_t> ZipEntryDataOffset(const std::string& path, const ZipEntry& entry) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("'", path.substr(0, 256), "' cannot be opened"));
  in.seekg(0, std::ios::end);
  const uint64_t file_size = static_cast<uint64_t>(in.tellg());
  return DataOffset(in, file_size, path, entry);
}

absl::StatusOr<std::vector<uint64_t>> ZipEntryDataOffsets(const std::string& path,
                                                          const std::vector<ZipEntry>& entries) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("'", path.substr(0, 256), "' cannot be opened"));
  in.seekg(0, std::ios::end);
  const uint64_t file_size = static_cast<uint64_t>(in.tellg());
  std::vector<uint64_t> offsets(entries.size());
  for (size_t i = 0; i < entries.size(); ++i) {
    ASSIGN_OR_RETURN(uint64_t at, DataOffset(in, file_size, path, entries[i]));
    offsets[i] = at;
  }
  // Each entry, header and data, ends before the next one begins: entries
  // that share bytes inflate the same data many times over (a small
  // archive that writes gigabytes).
  std::vector<size_t> order(entries.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(),
            [&](size_t a, size_t b) { return entries[a].local_header_offset < entries[b].local_header_offset; });
  for (size_t k = 1; k < order.size(); ++k) {
    const ZipEntry& before = entries[order[k - 1]];
    const ZipEntry& after = entries[order[k]];
    if (offsets[order[k - 1]] + before.compressed_size > after.local_header_offset) {
      return Broken(path, absl::StrCat("entries '", before.name.substr(0, 128), "' and '", after.name.substr(0, 128),
                                       "' overlap"));
    }
  }
  return offsets;
}

absl::StatusOr<std::string> ReadStoredZipEntry(const std::string& path, const ZipEntry& entry, uint64_t max_bytes) {
  if (entry.method != 0) {
    return absl::InvalidArgumentError(absl::StrCat("zip entry '", entry.name.substr(0, 128), "' is compressed"));
  }
  if (entry.size > max_bytes || entry.compressed_size != entry.size) {
    return absl::InvalidArgumentError(
        absl::StrCat("zip entry '", entry.name.substr(0, 128), "' is larger than ", max_bytes, " bytes"));
  }
  ASSIGN_OR_RETURN(uint64_t data_at, ZipEntryDataOffset(path, entry));
  std::ifstream in(path, std::ios::binary);
  std::string data;
  if (!in || !ReadAt(in, data_at, entry.size, &data)) {
    return Broken(path, absl::StrCat("entry '", entry.name.substr(0, 128), "' is truncated"));
  }
  return data;
}

}  // namespace infergate
