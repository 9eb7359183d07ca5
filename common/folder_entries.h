#pragma once
// A folder's entries read without exceptions. std::filesystem's
// directory_iterator takes an error_code when it opens the folder, but a
// range-for over it advances with operator++, which throws
// filesystem_error when reading the next entry fails (an I/O error, a
// folder removed mid-read): in a server, a disk error at start-up or during
// a repository poll would escape as an exception instead of a status.
//
// Pure function of the file system; thread-safe.

#include <filesystem>
#include <system_error>
#include <vector>

namespace infergate {

// The entries of `folder` (not recursive, in the order the file system
// gives them). Reading stops at the first error, which is left in `*error`
// (cleared when the whole folder was read): the entries read until then
// are returned.
std::vector<std::filesystem::directory_entry> FolderEntries(const std::filesystem::path& folder,
                                                            std::error_code* error);

}  // namespace infergate
