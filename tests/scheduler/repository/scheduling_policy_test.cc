// A model's scheduling policy, read once from its config: what each field
// becomes, the priority level a request waits at, and its queue timeout.

#include "scheduler/repository/scheduling_policy.h"

#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "tests/common/text_proto.h"

namespace infergate {
namespace {

SchedulingPolicy Of(const std::string& config) {
  return *SchedulingPolicyOf(testing::FromText<v1::ModelConfig>(config));
}

TEST(SchedulingPolicy, ReadOnceFromTheConfig) {
  EXPECT_EQ(Of(""), *DefaultSchedulingPolicy());
  const SchedulingPolicy p = Of(R"pb(
    max_batch_size: 8
    dynamic_batching {
      max_queue_delay_us: 500
      preferred_batch_sizes: [ 4, 8 ]
    }
    priority_levels: 3
    default_priority_level: 2
    default_queue_policy {
      max_queue_size: 16
      default_timeout_microseconds: 1000
      allow_timeout_override: true
      timeout_action: DELAY
    }
    accelerator_instances: 2
  )pb");
  EXPECT_EQ(p.max_batch_rows, 8u);
  EXPECT_EQ(p.max_queue_delay_us, 500u);
  EXPECT_EQ(p.preferred_batch_rows, (std::vector<int64_t>{4, 8}));
  EXPECT_EQ(p.priority_levels, 3u);
  EXPECT_EQ(p.default_priority_level, 2u);
  EXPECT_EQ(p.max_queue_size, 16u);
  EXPECT_EQ(p.default_timeout_us, 1000u);
  EXPECT_TRUE(p.allow_timeout_override);
  EXPECT_TRUE(p.delay_on_timeout);
  EXPECT_EQ(p.accelerator_instances, 2u);
  EXPECT_FALSE(Of("default_queue_policy { timeout_action: REJECT }").delay_on_timeout);
}

TEST(SchedulingPolicy, PriorityLevels) {
  struct Row {
    const char* config;
    uint32_t asked;
    int64_t level;  // -1: refused
  };
  const Row rows[] = {
      {"", 0, 1},                    // priorities off: everyone at 1
      {"", 7, 1},                    // ... whatever was asked
      {"priority_levels: 3", 0, 3},  // the default: the lowest
      {"priority_levels: 3 default_priority_level: 2", 0, 2},
      {"priority_levels: 3 default_priority_level: 2", 1, 1},
      {"priority_levels: 3", 3, 3},
      {"priority_levels: 3", 4, -1},
  };
  for (const Row& row : rows) {
    SCOPED_TRACE(absl::StrCat("'", row.config, "' asked ", row.asked));
    absl::StatusOr<uint32_t> level = Of(row.config).PriorityLevel(row.asked, "m");
    if (row.level < 0) {
      EXPECT_EQ(level.status().code(), absl::StatusCode::kInvalidArgument);
      EXPECT_NE(level.status().message().find("priority: 4 is outside model 'm'"), std::string::npos) << level.status();
    } else {
      ASSERT_TRUE(level.ok()) << level.status();
      EXPECT_EQ(*level, static_cast<uint32_t>(row.level));
    }
  }
}

TEST(SchedulingPolicy, QueueTimeouts) {
  struct Row {
    const char* config;
    uint64_t asked_us;
    uint64_t timeout_us;
  };
  const char* model_1ms = "default_queue_policy { default_timeout_microseconds: 1000 }";
  const char* model_1ms_override =
      "default_queue_policy { default_timeout_microseconds: 1000 allow_timeout_override: true }";
  const Row rows[] = {
      {"", 0, 0},                             // none at all
      {"", 500, 500},                         // the request's own
      {model_1ms, 0, 1000},                   // the model's
      {model_1ms, 500, 500},                  // a request may shorten it
      {model_1ms, 5000, 1000},                // ... but not lengthen it
      {model_1ms_override, 5000, 5000},       // unless the model allows it
      {"", 400ull * 24 * 3600 * 1000000, 0},  // over a year: no limit
  };
  for (const Row& row : rows) {
    SCOPED_TRACE(absl::StrCat("'", row.config, "' asked ", row.asked_us));
    EXPECT_EQ(Of(row.config).QueueTimeoutUs(row.asked_us), row.timeout_us);
  }
}

}  // namespace
}  // namespace infergate
