// Triton's trace extension settings: what each change is refused for, and
// which calls the settings in force admit.

#include "service/tracing/trace_settings.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace infergate {
namespace {

using Values = TraceSettings::Values;

std::vector<bool> Admits(TraceSettings& settings, const std::string& model, int calls) {
  std::vector<bool> out;
  for (int i = 0; i < calls; ++i) out.push_back(settings.Admit(model));
  return out;
}

TEST(TraceSettings, ChangesAreRefusedNamingTheSettingAndLeaveNothingHalfApplied) {
  TraceSettings settings(/*exporting=*/true);
  const Values defaults = {{"trace_level", {"TIMESTAMPS"}},
                           {"trace_rate", {"1"}},
                           {"trace_count", {"-1"}},
                           {"trace_mode", {"opentelemetry"}}};
  EXPECT_EQ(settings.Get(""), defaults);
  struct Case {
    TraceSettings::Change change;
    const char* model;
    absl::StatusCode code;
    const char* says;
  };
  // clang-format off: a table, one row a line
  const Case cases[] = {
      {{{"trace_rate", std::vector<std::string>{"fast"}}}, "", absl::StatusCode::kInvalidArgument,
       "Unable to parse 'trace_rate', got: fast"},
      {{{"trace_rate", std::vector<std::string>{"0"}}}, "", absl::StatusCode::kInvalidArgument, "out of range"},
      {{{"trace_rate", std::vector<std::string>{"1", "2"}}}, "", absl::StatusCode::kInvalidArgument,
       "expected one value"},
      {{{"trace_count", std::vector<std::string>{"-2"}}}, "", absl::StatusCode::kInvalidArgument,
       "Unable to parse 'trace_count', value is out of range [ -1,"},
      {{{"trace_level", std::vector<std::string>{"OFF", "TIMESTAMPS"}}}, "", absl::StatusCode::kInvalidArgument,
       "Expect only one trace level 'OFF' is specified"},
      {{{"trace_level", std::vector<std::string>{"TENSORS"}}}, "", absl::StatusCode::kInvalidArgument,
       "TENSORS is not served"},
      {{{"trace_level", std::vector<std::string>{"LOUD"}}}, "", absl::StatusCode::kInvalidArgument,
       "'LOUD' is not a level"},
      {{{"trace_file", std::vector<std::string>{"/tmp/t"}}}, "", absl::StatusCode::kInvalidArgument,
       "trace file location can not be updated through network protocol"},
      {{{"log_frequency", std::vector<std::string>{"5"}}}, "m", absl::StatusCode::kInvalidArgument, "log_frequency"},
      {{{"trace_mode", std::vector<std::string>{"triton"}}}, "", absl::StatusCode::kInvalidArgument,
       "can not be changed"},
      {{{"sample", std::vector<std::string>{"1"}}}, "", absl::StatusCode::kInvalidArgument,
       "'sample' is not a trace setting"},
      {{{"trace_rate", std::nullopt}}, "", absl::StatusCode::kInvalidArgument, "a global setting can not be cleared"},
      // A good change beside a bad one: neither applies.
      {{{"trace_count", std::vector<std::string>{"5"}}, {"trace_rate", std::vector<std::string>{"x"}}}, "",
       absl::StatusCode::kInvalidArgument, "trace_rate"},
  };
  // clang-format on
  for (const Case& c : cases) {
    absl::StatusOr<Values> r = settings.Update(c.model, c.change);
    ASSERT_FALSE(r.ok()) << c.says;
    EXPECT_EQ(r.status().code(), c.code) << r.status();
    EXPECT_NE(r.status().message().find(c.says), std::string::npos) << r.status();
  }
  EXPECT_EQ(settings.Get(""), defaults);
  EXPECT_EQ(settings.Get("m"), defaults);
}

TEST(TraceSettings, WithoutAnExporterTheLevelStaysOffAndTheRestStillChange) {
  TraceSettings settings(/*exporting=*/false);
  EXPECT_EQ(settings.Get("")["trace_level"], std::vector<std::string>{"OFF"});
  absl::StatusOr<Values> up = settings.Update("", {{"trace_level", std::vector<std::string>{"TIMESTAMPS"}}});
  ASSERT_FALSE(up.ok());
  EXPECT_EQ(up.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(up.status().message().find("--otlp-endpoint"), std::string::npos) << up.status();
  absl::StatusOr<Values> rate = settings.Update("", {{"trace_rate", std::vector<std::string>{"10"}}});
  ASSERT_TRUE(rate.ok()) << rate.status();
  EXPECT_EQ((*rate)["trace_rate"], std::vector<std::string>{"10"});
  EXPECT_EQ(Admits(settings, "", 3), std::vector<bool>({false, false, false}));
}

TEST(TraceSettings, LevelRateAndCountChooseTheCallsAModelOrTheGlobalSettingsAdmit) {
  TraceSettings settings(/*exporting=*/true);
  EXPECT_EQ(Admits(settings, "a", 3), std::vector<bool>({true, true, true}));
  ASSERT_TRUE(settings.Update("", {{"trace_rate", std::vector<std::string>{"3"}}}).ok());
  EXPECT_EQ(Admits(settings, "a", 6), std::vector<bool>({true, false, false, true, false, false}));
  // A model's own rate counts its own calls; the others share the global count.
  ASSERT_TRUE(settings.Update("b", {{"trace_rate", std::vector<std::string>{"2"}}}).ok());
  EXPECT_EQ(Admits(settings, "b", 4), std::vector<bool>({true, false, true, false}));
  EXPECT_EQ(Admits(settings, "c", 3), std::vector<bool>({true, false, false}));
  // Count: the next two of b's admitted calls, then none; the rest unaffected.
  ASSERT_TRUE(
      settings
          .Update("b", {{"trace_rate", std::vector<std::string>{"1"}}, {"trace_count", std::vector<std::string>{"2"}}})
          .ok());
  EXPECT_EQ(Admits(settings, "b", 3), std::vector<bool>({true, true, false}));
  EXPECT_EQ(settings.Get("b")["trace_count"], std::vector<std::string>{"0"});
  // Level OFF for a: none of a's; clearing it gives a the global level back.
  ASSERT_TRUE(settings.Update("a", {{"trace_level", std::vector<std::string>{"OFF"}}}).ok());
  EXPECT_EQ(Admits(settings, "a", 3), std::vector<bool>({false, false, false}));
  absl::StatusOr<Values> cleared = settings.Update("a", {{"trace_level", std::nullopt}});
  ASSERT_TRUE(cleared.ok());
  EXPECT_EQ((*cleared)["trace_level"], std::vector<std::string>{"TIMESTAMPS"});
  // Global OFF turns off every model without a level of its own.
  ASSERT_TRUE(
      settings
          .Update("", {{"trace_level", std::vector<std::string>{"OFF"}}, {"trace_rate", std::vector<std::string>{"1"}}})
          .ok());
  EXPECT_EQ(Admits(settings, "c", 2), std::vector<bool>({false, false}));
  ASSERT_TRUE(settings.Update("d", {{"trace_level", std::vector<std::string>{"TIMESTAMPS"}}}).ok());
  EXPECT_EQ(Admits(settings, "d", 2), std::vector<bool>({true, true}));
}

}  // namespace
}  // namespace infergate
