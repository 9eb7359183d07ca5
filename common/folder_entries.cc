#include "common/folder_entries.h"

namespace infergate {

std::vector<std::filesystem::directory_entry> FolderEntries(const std::filesystem::path& folder,
                                                            std::error_code* error) {
  std::vector<std::filesystem::directory_entry> out;
  error->clear();
  std::filesystem::directory_iterator it(folder, *error);
  for (; !*error && it != std::filesystem::directory_iterator(); it.increment(*error)) out.push_back(*it);
  return out;
}

}  // namespace infergate
