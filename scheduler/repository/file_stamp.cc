#include "scheduler/repository/file_stamp.h"

#include "absl/strings/str_cat.h"

namespace infergate {

std::string FileStamp::ContentKey() const { return absl::StrCat(size, ":", mtime_ns); }

absl::string_view ModelFileFormatName(const FileStamp& stamp) { return stamp.package ? "aoti" : "torchscript"; }

}  // namespace infergate
