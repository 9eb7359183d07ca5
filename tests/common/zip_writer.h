#pragma once
// Test helper: writes zip archives byte by byte, with stored or deflated
// entries, Unix modes and sizes or CRCs that lie, for the readers' and the
// extractor's tests.

#include <zlib.h>

#include <cstdint>
#include <string>
#include <vector>

namespace infergate::testing {

struct ZipWriterEntry {
  std::string name;
  std::string data;
  bool deflate = false;
  uint32_t unix_mode = 0100644;  // 0: made on a non-Unix system
  // Set to lie: the size the directory declares, and a wrong CRC.
  int64_t declared_size = -1;
  bool bad_crc = false;
  // Set to lie about where: the name the local header gives (empty: the
  // same), and a central-directory entry only, pointing at `local_at`.
  std::string local_name = std::string();
  bool directory_only = false;
  uint64_t local_at = 0;
};

inline void PutLe(std::string& out, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xFF));
}

inline std::string Deflated(const std::string& data) {
  z_stream z{};
  deflateInit2(&z, Z_BEST_COMPRESSION, Z_DEFLATED, -MAX_WBITS, 8, Z_DEFAULT_STRATEGY);
  std::string out(deflateBound(&z, data.size()), '\0');
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data()));
  z.avail_in = static_cast<uInt>(data.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(out.size());
  deflate(&z, Z_FINISH);
  out.resize(z.total_out);
  deflateEnd(&z);
  return out;
}

inline std::string ZipOf(const std::vector<ZipWriterEntry>& entries) {
  std::string body, directory;
  for (const ZipWriterEntry& e : entries) {
    const std::string payload = e.deflate ? Deflated(e.data) : e.data;
    uint32_t crc = static_cast<uint32_t>(
        crc32(0, reinterpret_cast<const Bytef*>(e.data.data()), static_cast<uInt>(e.data.size())));
    if (e.bad_crc) crc ^= 1;
    const uint64_t size = e.declared_size >= 0 ? static_cast<uint64_t>(e.declared_size) : e.data.size();
    const uint16_t method = e.deflate ? 8 : 0;
    const uint64_t offset = e.directory_only ? e.local_at : body.size();
    const std::string& local_name = e.local_name.empty() ? e.name : e.local_name;
    if (!e.directory_only) {
      PutLe(body, 0x04034b50, 4);
      PutLe(body, 20, 2);
      PutLe(body, 0, 2);
      PutLe(body, method, 2);
      PutLe(body, 0, 4);
      PutLe(body, crc, 4);
      PutLe(body, payload.size(), 4);
      PutLe(body, size, 4);
      PutLe(body, local_name.size(), 2);
      PutLe(body, 0, 2);
      body += local_name + payload;
    }
    PutLe(directory, 0x02014b50, 4);
    PutLe(directory, e.unix_mode != 0 ? (3 << 8) | 20 : 20, 2);  // made by: Unix or FAT
    PutLe(directory, 20, 2);
    PutLe(directory, 0, 2);
    PutLe(directory, method, 2);
    PutLe(directory, 0, 4);
    PutLe(directory, crc, 4);
    PutLe(directory, payload.size(), 4);
    PutLe(directory, size, 4);
    PutLe(directory, e.name.size(), 2);
    PutLe(directory, 0, 2);
    PutLe(directory, 0, 2);
    PutLe(directory, 0, 2);
    PutLe(directory, 0, 2);
    PutLe(directory, uint64_t{e.unix_mode} << 16, 4);
    PutLe(directory, offset, 4);
    directory += e.name;
  }
  std::string out = body + directory;
  PutLe(out, 0x06054b50, 4);
  PutLe(out, 0, 2);
  PutLe(out, 0, 2);
  PutLe(out, entries.size(), 2);
  PutLe(out, entries.size(), 2);
  PutLe(out, directory.size(), 4);
  PutLe(out, body.size(), 4);
  PutLe(out, 0, 2);
  return out;
}

// A zip of stored entries, as PyTorch writes its archives.
inline std::string StoredZip(const std::vector<std::pair<std::string, std::string>>& files) {
  std::vector<ZipWriterEntry> entries;
  for (const auto& [name, data] : files) entries.push_back({name, data});
  return ZipOf(entries);
}

}  // namespace infergate::testing
