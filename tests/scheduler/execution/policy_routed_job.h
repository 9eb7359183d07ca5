#pragma once
// Test helper: gives a job a scheduling policy the way the dispatcher does,
// by routing it to a model entry whose config says that policy. Nothing is
// loaded; the entry exists only to carry the policy.

#include <memory>
#include <utility>

#include "scheduler/execution/job.h"
#include "scheduler/repository/model_repository.h"
#include "scheduler/repository/scheduling_policy.h"

namespace infergate::testing {

inline void RouteWithPolicy(Job& job, SchedulingPolicy policy) {
  auto entry = std::make_shared<ModelEntry>();
  entry->name = "policy-test";
  entry->scheduling = std::make_shared<const SchedulingPolicy>(std::move(policy));
  job.route.model = std::move(entry);
  job.routed = true;
}

}  // namespace infergate::testing
