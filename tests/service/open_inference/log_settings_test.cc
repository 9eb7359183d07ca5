#include "service/open_inference/log_settings.h"

#include <gtest/gtest.h>

#include <optional>

#include "absl/strings/str_cat.h"

namespace infergate {
namespace {

// The policy as a table: from a level, a change, to a level or a refusal
// naming the setting.
struct LogCase {
  const char* what;
  LogLevel from;
  LogSettings change;
  std::optional<LogLevel> to;      // nullopt: refused
  const char* refusal_names = "";  // the setting the refusal names
};

TEST(LogSettingsTest, TheTable) {
  const std::vector<LogCase> cases = {
      {"nothing named keeps the level", LogLevel::kWarning, {}, LogLevel::kWarning},
      {"verbose on turns info and warning on",
       LogLevel::kError,
       {{"log_verbose_level", uint32_t{1}}},
       LogLevel::kDebug},
      {"any verbose level is debug", LogLevel::kInfo, {{"log_verbose_level", uint32_t{7}}}, LogLevel::kDebug},
      {"verbose off keeps info", LogLevel::kDebug, {{"log_verbose_level", uint32_t{0}}}, LogLevel::kInfo},
      {"info off turns debug off", LogLevel::kDebug, {{"log_info", false}}, LogLevel::kWarning},
      {"info on turns warning on", LogLevel::kError, {{"log_info", true}}, LogLevel::kInfo},
      {"warning off turns info and debug off", LogLevel::kDebug, {{"log_warning", false}}, LogLevel::kError},
      {"warning on alone", LogLevel::kError, {{"log_warning", true}}, LogLevel::kWarning},
      {"error stays on", LogLevel::kInfo, {{"log_error", true}}, LogLevel::kInfo},
      {"the defaults of format and file",
       LogLevel::kInfo,
       {{"log_format", std::string("default")}, {"log_file", std::string()}},
       LogLevel::kInfo},
      {"a hole: info on, warning off",
       LogLevel::kInfo,
       {{"log_info", true}, {"log_warning", false}},
       std::nullopt,
       "log_warning"},
      {"a hole: verbose on, info off",
       LogLevel::kInfo,
       {{"log_verbose_level", uint32_t{1}}, {"log_info", false}},
       std::nullopt,
       "log_info"},
      {"errors cannot be turned off", LogLevel::kInfo, {{"log_error", false}}, std::nullopt, "log_error"},
      {"a log file", LogLevel::kInfo, {{"log_file", std::string("/var/log/x")}}, std::nullopt, "log_file"},
      {"another format", LogLevel::kInfo, {{"log_format", std::string("ISO8601")}}, std::nullopt, "log_format"},
      {"a wrong type", LogLevel::kInfo, {{"log_info", uint32_t{1}}}, std::nullopt, "log_info"},
      {"an unknown setting", LogLevel::kInfo, {{"log_colour", true}}, std::nullopt, "log_colour"},
  };
  for (const LogCase& c : cases) {
    absl::StatusOr<LogLevel> got = ApplyLogSettings(c.from, c.change);
    if (c.to) {
      ASSERT_TRUE(got.ok()) << c.what << ": " << got.status();
      EXPECT_EQ(*got, *c.to) << c.what;
    } else {
      ASSERT_FALSE(got.ok()) << c.what;
      EXPECT_EQ(got.status().code(), absl::StatusCode::kInvalidArgument) << c.what;
      EXPECT_NE(got.status().message().find(absl::StrCat("settings.", c.refusal_names)), absl::string_view::npos)
          << c.what << ": " << got.status();
    }
  }
}

TEST(LogSettingsTest, DescribingALevelAndApplyingItIsTheSameLevel) {
  for (LogLevel level : {LogLevel::kDebug, LogLevel::kInfo, LogLevel::kWarning, LogLevel::kError}) {
    LogSettings described = DescribeLogSettings(level);
    EXPECT_EQ(described.size(), 6u);
    for (LogLevel from : {LogLevel::kDebug, LogLevel::kError}) {
      absl::StatusOr<LogLevel> applied = ApplyLogSettings(from, described);
      ASSERT_TRUE(applied.ok()) << applied.status();
      EXPECT_EQ(*applied, level);
    }
  }
}

}  // namespace
}  // namespace infergate
