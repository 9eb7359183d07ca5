// The label text of every event reason and result: the metric label values
// the README documents, one per enum value, never "unknown".

#include "scheduler/model/event_reasons.h"

#include <gtest/gtest.h>

#include <set>
#include <string>

namespace infergate {
namespace {

TEST(EventReasons, EveryRejectionReasonHasItsDocumentedName) {
  std::set<std::string> names;
  for (RejectionReason r : kRejectionReasons) names.insert(std::string(RejectionReasonName(r)));
  EXPECT_EQ(names, (std::set<std::string>{"queue_full", "model_queue_full", "queue_timeout", "deadline", "cancelled",
                                          "draining", "inflight_bytes"}));
}

TEST(EventReasons, EvictionsUpdatesAndChecks) {
  std::set<std::string> evictions;
  for (EvictionReason r : kEvictionReasons) evictions.insert(std::string(EvictionReasonName(r)));
  EXPECT_EQ(evictions, (std::set<std::string>{"budget", "oom", "unload", "demoted"}));
  EXPECT_EQ(ModelUpdateResultName(ModelUpdateResult::kLoaded), "loaded");
  EXPECT_EQ(ModelUpdateResultName(ModelUpdateResult::kFailed), "failed");
  EXPECT_EQ(ModelUpdateResultName(ModelUpdateResult::kRemoved), "removed");
  EXPECT_EQ(ModelUpdateResultName(ModelUpdateResult::kUnloaded), "unloaded");
  EXPECT_EQ(PrecisionCheckResultName(PrecisionCheckResult::kPassed), "passed");
  EXPECT_EQ(PrecisionCheckResultName(PrecisionCheckResult::kFailed), "failed");
  EXPECT_EQ(PrecisionCheckResultName(PrecisionCheckResult::kSkipped), "skipped");
  EXPECT_EQ(PrecisionCheckResultName(PrecisionCheckResult::kDropped), "dropped");
  EXPECT_EQ(PrecisionCheckKindName(PrecisionCheckKind::kCheck), "check");
  EXPECT_EQ(PrecisionCheckKindName(PrecisionCheckKind::kRunning), "running");
}

}  // namespace
}  // namespace infergate
