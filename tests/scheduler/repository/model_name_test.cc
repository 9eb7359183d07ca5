#include "scheduler/repository/model_name.h"

#include <gtest/gtest.h>

#include <string>

#include "absl/strings/match.h"

namespace infergate {
namespace {

TEST(ModelName, AcceptsOrdinaryNames) {
  for (const char* ok : {"mlp", "resnet-50", "bert_base.v2", "A1", "x"}) {
    EXPECT_TRUE(ValidateModelName(ok).ok()) << ok;
  }
  EXPECT_TRUE(ValidateModelName(std::string(kMaxModelNameLength, 'a')).ok());
}

TEST(ModelName, NothingReachesOutsideTheRepository) {
  for (const char* bad : {"", "..", ".", "../etc", "../../etc/passwd", "/etc/passwd", "a/b", "a\\b", ".hidden",
                          "mlp/../cnn", "name with space", "tab\t", "caf\xc3\xa9", "~root"}) {
    absl::Status s = ValidateModelName(bad);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_NE(s.message().find("model"), absl::string_view::npos) << s;
  }
  EXPECT_FALSE(ValidateModelName(std::string(kMaxModelNameLength + 1, 'a')).ok());
  EXPECT_FALSE(ValidateModelName(absl::string_view("a\0b", 3)).ok());
}

TEST(ModelName, ErrorNamesTheField) {
  absl::Status s = ValidateModelName("../x", "model");
  EXPECT_TRUE(absl::StartsWith(s.message(), "model: ")) << s;
}

}  // namespace
}  // namespace infergate
