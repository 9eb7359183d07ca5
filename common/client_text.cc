#include "common/client_text.h"

#include <algorithm>
#include <cctype>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_replace.h"
#include "common/mutex.h"

namespace infergate {
namespace {

Mutex& FoldersMutex() {
  static Mutex mu;
  return mu;
}
std::vector<std::string>& Folders() {
  static std::vector<std::string> folders;
  return folders;
}

// Where a native back-trace starts, if anywhere.
size_t BackTraceStart(absl::string_view text) {
  size_t cut = absl::string_view::npos;
  for (absl::string_view marker : {"Exception raised from ", "frame #", "(most recent call first)"}) {
    const size_t at = text.find(marker);
    if (at == absl::string_view::npos) continue;
    // From the start of the marker's line.
    const size_t line = text.rfind('\n', at);
    cut = std::min(cut, line == absl::string_view::npos ? at : line);
  }
  return cut;
}

bool IsHex(char c) { return std::isxdigit(static_cast<unsigned char>(c)) != 0; }

}  // namespace

void RegisterPrivateFolder(const std::string& folder) {
  if (folder.size() < 2 || folder[0] != '/') return;
  std::string with_slash = folder.back() == '/' ? folder : folder + "/";
  MutexLock lock(FoldersMutex());
  std::vector<std::string>& folders = Folders();
  if (std::find(folders.begin(), folders.end(), with_slash) != folders.end()) return;
  folders.push_back(std::move(with_slash));
  // Longest first: a folder inside another is cut as a whole.
  std::sort(folders.begin(), folders.end(),
            [](const std::string& a, const std::string& b) { return a.size() > b.size(); });
}

std::string ForClients(absl::string_view message) {
  const size_t cut = BackTraceStart(message);
  absl::string_view kept = message.substr(0, cut);
  if (cut != absl::string_view::npos) {
    while (!kept.empty() && (kept.back() == '\n' || kept.back() == ' ' || kept.back() == ':')) kept.remove_suffix(1);
  }
  std::string out;
  out.reserve(kept.size());
  // Code addresses: "0x" and eight or more hex digits.
  for (size_t i = 0; i < kept.size();) {
    if (kept[i] == '0' && i + 1 < kept.size() && (kept[i + 1] == 'x' || kept[i + 1] == 'X')) {
      size_t j = i + 2;
      while (j < kept.size() && IsHex(kept[j])) ++j;
      if (j - i - 2 >= 8) {
        out += "0x?";
        i = j;
        continue;
      }
    }
    out.push_back(kept[i++]);
  }
  MutexLock lock(FoldersMutex());
  for (const std::string& folder : Folders()) {
    if (absl::StrContains(out, folder)) absl::StrReplaceAll({{folder, ""}}, &out);
  }
  return out;
}

}  // namespace infergate
