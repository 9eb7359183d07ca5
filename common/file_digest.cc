#include "common/file_digest.h"

#include <openssl/evp.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"

namespace infergate {

absl::StatusOr<std::string> Sha256OfFile(const std::string& path, const std::string& what) {
  std::unique_ptr<FILE, int (*)(FILE*)> file(std::fopen(path.c_str(), "rb"), &std::fclose);
  if (!file) {
    std::string message = absl::StrCat(what, " ", path, ": ", std::strerror(errno));
    if (errno == ENOENT) return absl::NotFoundError(message);
    if (errno == EACCES) return absl::PermissionDeniedError(message);
    return absl::InternalError(message);
  }
  std::unique_ptr<EVP_MD_CTX, void (*)(EVP_MD_CTX*)> ctx(EVP_MD_CTX_new(), &EVP_MD_CTX_free);
  if (!ctx || EVP_DigestInit_ex(ctx.get(), EVP_sha256(), nullptr) != 1) {
    return absl::InternalError("SHA-256 is not available from OpenSSL");
  }
  std::vector<unsigned char> block(1 << 20);
  size_t n = 0;
  while ((n = std::fread(block.data(), 1, block.size(), file.get())) > 0) {
    EVP_DigestUpdate(ctx.get(), block.data(), n);
  }
  if (std::ferror(file.get())) return absl::InternalError(absl::StrCat("reading ", what, " ", path, " failed"));
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  EVP_DigestFinal_ex(ctx.get(), digest, &length);
  return absl::BytesToHexString(absl::string_view(reinterpret_cast<const char*>(digest), length));
}

}  // namespace infergate
