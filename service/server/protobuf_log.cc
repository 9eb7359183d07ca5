#include "service/server/protobuf_log.h"

#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/string_view.h"
#include "common/logging.h"
#include "google/protobuf/stubs/logging.h"

namespace infergate {
namespace {

void ToServerLog(google::protobuf::LogLevel level, const char* /*file*/, int /*line*/, const std::string& line) {
  const absl::string_view message = absl::StripTrailingAsciiWhitespace(line);
  if (level == google::protobuf::LOGLEVEL_FATAL) {
    // Protobuf ends the process after this: the line must not be held back.
    LOG_ERROR << "protobuf: " << message;
    return;
  }
  static LogRateLimiter limiter(1);
  uint64_t held = 0;
  if (!limiter.Allow(&held)) return;
  if (level == google::protobuf::LOGLEVEL_INFO) {
    LOG_DEBUG << "protobuf: " << message << SuppressedNote(held);
  } else {
    LOG_WARNING << "protobuf: " << message << SuppressedNote(held);
  }
}

}  // namespace

void RouteProtobufLogsToServerLog() { google::protobuf::SetLogHandler(&ToServerLog); }

}  // namespace infergate
