#include "common/units.h"

#include <gtest/gtest.h>

namespace infergate {
namespace {

TEST(Units, ByteSizes) {
  EXPECT_EQ(*ParseByteSize("2GiB"), uint64_t{2} << 30);
  EXPECT_EQ(*ParseByteSize("1.5 GB"), 1500000000u);
  EXPECT_EQ(*ParseByteSize("4096"), 4096u);
  EXPECT_EQ(*ParseByteSize("8k"), 8192u);
  EXPECT_FALSE(ParseByteSize("-1GiB").ok());
  EXPECT_FALSE(ParseByteSize("GiB").ok());
  EXPECT_FALSE(ParseByteSize("nan").ok());
  EXPECT_FALSE(ParseByteSize("1e30").ok());
}

TEST(Units, DurationsAndTheirLimits) {
  EXPECT_EQ(ParseDuration("30s", "--x")->count(), 30000);
  EXPECT_EQ(ParseDuration("1500ms", "--x")->count(), 1500);
  EXPECT_EQ(ParseDuration("2m", "--x")->count(), 120000);
  EXPECT_EQ(ParseDuration("45", "--x")->count(), 45000);
  EXPECT_EQ(ParseDuration("1440m", "--x")->count(), 86400000);
  for (const char* bad : {"", "soon", "-1s", "nan", "inf", "1441m", "86401"}) {
    absl::StatusOr<std::chrono::milliseconds> d = ParseDuration(bad, "--drain-timeout");
    ASSERT_FALSE(d.ok()) << bad;
    EXPECT_NE(d.status().message().find("--drain-timeout"), absl::string_view::npos) << d.status();
  }
}

}  // namespace
}  // namespace infergate

namespace infergate {
namespace {

TEST(Units, BytesForPeopleToRead) {
  EXPECT_EQ(FormatBytes(640), "640 bytes");
  EXPECT_EQ(FormatBytes(8000), "7.81 KiB");
  EXPECT_EQ(FormatBytes(uint64_t{12} << 20), "12.00 MiB");
  EXPECT_EQ(FormatBytes(uint64_t{3} << 29), "1.50 GiB");
}

}  // namespace
}  // namespace infergate
