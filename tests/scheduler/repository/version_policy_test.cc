#include "scheduler/repository/version_policy.h"

#include <gtest/gtest.h>

#include "google/protobuf/text_format.h"
#include "scheduler/repository/model_config.h"
#include "tests/common/text_proto.h"

namespace infergate {
namespace {

v1::VersionPolicy Policy(const std::string& text) { return testing::FromText<v1::VersionPolicy>(text); }

TEST(VersionPolicy, LatestAllAndSpecific) {
  const std::vector<int64_t> disk = {1, 2, 5, 9};
  EXPECT_EQ(SelectVersions(Policy(""), disk), (std::vector<int64_t>{9}));  // unset: the latest one
  EXPECT_EQ(SelectVersions(Policy("latest { num_versions: 2 }"), disk), (std::vector<int64_t>{5, 9}));
  EXPECT_EQ(SelectVersions(Policy("latest { num_versions: 10 }"), disk), disk);
  EXPECT_EQ(SelectVersions(Policy("all {}"), disk), disk);
  EXPECT_EQ(SelectVersions(Policy("specific { versions: [2, 7, 9] }"), disk), (std::vector<int64_t>{2, 9}));
  EXPECT_TRUE(SelectVersions(Policy(""), {}).empty());
  EXPECT_TRUE(SelectVersions(Policy("specific { versions: 3 }"), disk).empty());
}

TEST(VersionPolicy, DescribedInWords) {
  EXPECT_EQ(DescribePolicy(Policy("")), "the latest version");
  EXPECT_EQ(DescribePolicy(Policy("latest { num_versions: 3 }")), "the latest 3 versions");
  EXPECT_EQ(DescribePolicy(Policy("all {}")), "all versions");
  EXPECT_EQ(DescribePolicy(Policy("specific { versions: [1, 3] }")), "versions 1, 3");
  EXPECT_EQ(DescribePolicy(Policy("specific { versions: 4 }")), "version 4");
}

TEST(VersionPolicy, ConfigRefusesPoliciesThatServeNothing) {
  auto parse = [](const std::string& text) { return ParseModelConfig(text, "m").status(); };
  EXPECT_TRUE(parse("version_policy { latest { num_versions: 2 } }").ok());
  EXPECT_TRUE(parse("version_policy { specific { versions: [1, 2] } }").ok());
  absl::Status zero = parse("version_policy { latest { num_versions: 0 } }");
  EXPECT_NE(zero.message().find("version_policy.latest.num_versions"), absl::string_view::npos) << zero;
  absl::Status empty = parse("version_policy { specific { } }");
  EXPECT_NE(empty.message().find("version_policy.specific.versions"), absl::string_view::npos) << empty;
  absl::Status negative = parse("version_policy { specific { versions: [1, -2] } }");
  EXPECT_NE(negative.message().find("versions[1]"), absl::string_view::npos) << negative;
}

}  // namespace
}  // namespace infergate
