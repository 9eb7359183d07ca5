#include "scheduler/repository/scheduling_policy.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace infergate {

std::shared_ptr<const SchedulingPolicy> SchedulingPolicyOf(const v1::ModelConfig& config) {
  auto policy = std::make_shared<SchedulingPolicy>();
  policy->max_batch_rows = static_cast<uint32_t>(config.max_batch_size());
  policy->max_queue_delay_us = config.dynamic_batching().max_queue_delay_us();
  const auto& preferred = config.dynamic_batching().preferred_batch_sizes();
  policy->preferred_batch_rows.assign(preferred.begin(), preferred.end());
  policy->priority_levels = config.priority_levels();
  policy->default_priority_level = config.default_priority_level();
  const v1::QueuePolicy& queue = config.default_queue_policy();
  policy->max_queue_size = queue.max_queue_size();
  policy->default_timeout_us = queue.default_timeout_microseconds();
  policy->allow_timeout_override = queue.allow_timeout_override();
  policy->delay_on_timeout = queue.timeout_action() == v1::QueuePolicy::DELAY;
  policy->accelerator_instances = config.accelerator_instances();
  return policy;
}

const std::shared_ptr<const SchedulingPolicy>& DefaultSchedulingPolicy() {
  static const auto* const kDefault = new std::shared_ptr<const SchedulingPolicy>(std::make_shared<SchedulingPolicy>());
  return *kDefault;
}

absl::StatusOr<uint32_t> SchedulingPolicy::PriorityLevel(uint32_t asked, absl::string_view model) const {
  if (priority_levels == 0) return 1;  // priorities off: every request is equal
  if (asked > priority_levels) {
    return absl::InvalidArgumentError(absl::StrCat("priority: ", asked, " is outside model '", model,
                                                   "''s priority levels (1 is the highest, ", priority_levels,
                                                   " the lowest; 0 for the default)"));
  }
  if (asked > 0) return asked;
  return default_priority_level > 0 ? default_priority_level : priority_levels;
}

uint64_t SchedulingPolicy::QueueTimeoutUs(uint64_t asked_us) const {
  uint64_t timeout_us = default_timeout_us;
  if (asked_us > 0 && (timeout_us == 0 || asked_us < timeout_us || allow_timeout_override)) timeout_us = asked_us;
  // Longer than a year is no limit (and would overflow the clock).
  constexpr uint64_t kNoLimitUs = 365ull * 24 * 3600 * 1000000;
  return timeout_us < kNoLimitUs ? timeout_us : 0;
}

}  // namespace infergate
