#include "scheduler/job.h"

#include "scheduler/device_executor.h"

namespace infergate {

void Job::Cancel() {
  if (finished()) return;
  cancelled.store(true);
  if (DeviceExecutor* ex = executor.load()) ex->PurgeCancelled();
}

void Job::Finish(absl::StatusOr<InferenceResult> result) {
  if (finished_.exchange(true) || !done_) return;
  RequestLabels labels;
  if (routed) {
    labels.model = route.model->name;
    labels.device = route.device.id.ToString();
  } else {
    labels.model = model_label;
  }
  done_(std::move(result), labels);
}

}  // namespace infergate
