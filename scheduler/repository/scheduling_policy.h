#pragma once
// What a model's config says about queueing and batching its requests: read
// once, when the config is published (ModelEntry::scheduling), and shared
// read-only by every job of the model, rather than copied field by field
// onto each job.
//
// Plain data and pure functions; thread-safe once built.

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "infergate/v1/model_config.pb.h"

namespace infergate {

struct SchedulingPolicy {
  // Dynamic batching: up to max_batch_rows rows run as one batch (0 or 1:
  // none); on an accelerator a batch waits up to max_queue_delay_us for
  // companions; preferred_batch_rows are the sizes it prefers (usually none).
  uint32_t max_batch_rows = 0;
  uint64_t max_queue_delay_us = 0;
  std::vector<int64_t> preferred_batch_rows;
  // Priority levels 1 (the highest) to priority_levels; 0 levels: off.
  // default_priority_level 0: the lowest.
  uint32_t priority_levels = 0;
  uint32_t default_priority_level = 0;
  // The model's queue on each device: at most max_queue_size waiting (0:
  // only the device's capacity bounds it); a queue timeout (0: none) that a
  // request may shorten, or lengthen with allow_timeout_override; past it a
  // request is refused, or with delay_on_timeout runs after everything else.
  uint32_t max_queue_size = 0;
  uint64_t default_timeout_us = 0;
  bool allow_timeout_override = false;
  bool delay_on_timeout = false;
  // Batches that may run at once on one accelerator (0: the device's
  // workers); the CPU does not read it.
  uint32_t accelerator_instances = 0;

  // The level a request asking for `asked` (0: the default) waits at;
  // INVALID_ARGUMENT naming `priority` and `model` outside the levels.
  absl::StatusOr<uint32_t> PriorityLevel(uint32_t asked, absl::string_view model) const;
  // The queue timeout of a request that asked for `asked_us` (0: none of
  // its own), in microseconds; 0: none. Longer than a year is none.
  uint64_t QueueTimeoutUs(uint64_t asked_us) const;

  friend bool operator==(const SchedulingPolicy&, const SchedulingPolicy&) = default;
};

std::shared_ptr<const SchedulingPolicy> SchedulingPolicyOf(const v1::ModelConfig& config);

// The policy of work that is no model's (a task such as an explicit load),
// and of a config that says nothing: no batching, one level, no cap, no timeout.
const std::shared_ptr<const SchedulingPolicy>& DefaultSchedulingPolicy();

}  // namespace infergate
