// Protobuf's log lines go to the server's log, rate-limited: a storm of
// requests with invalid UTF-8 in a string field (each refused with a line
// from protobuf) writes one line, not one per request.
#include "service/server/protobuf_log.h"

#include <gtest/gtest.h>

#include <string>

#include "absl/strings/str_split.h"
#include "inference/grpc_service.pb.h"

namespace infergate {
namespace {

TEST(ProtobufLog, AStormOfInvalidUtf8RequestsWritesOneServerLogLine) {
  RouteProtobufLogsToServerLog();
  inference::ModelMetadataRequest valid;
  valid.set_name("m\xc3\xa9");  // two bytes of one UTF-8 character
  std::string bytes = valid.SerializeAsString();
  bytes[bytes.size() - 1] = '\xff';  // no longer UTF-8
  ::testing::internal::CaptureStderr();
  int refused = 0;
  for (int i = 0; i < 200; ++i) {
    inference::ModelMetadataRequest parsed;
    refused += parsed.ParseFromString(bytes) ? 0 : 1;
  }
  const std::string log = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(refused, 200);
  int lines = 0;
  for (absl::string_view line : absl::StrSplit(log, '\n', absl::SkipEmpty())) {
    ++lines;
    EXPECT_NE(line.find("protobuf: "), absl::string_view::npos) << line;
    EXPECT_EQ(line.rfind("W ", 0), 0u) << "a warning in the server's format: " << line;
  }
  // One a second: a second line only if the loop crossed a second's edge.
  EXPECT_GE(lines, 1);
  EXPECT_LE(lines, 2) << log;
  EXPECT_NE(log.find("UTF-8"), std::string::npos) << log;
}

}  // namespace
}  // namespace infergate
