#include "scheduler/execution/job.h"

#include "common/callback_lock.h"
#include "common/caught_exception.h"
#include "scheduler/execution/device_executor.h"

namespace infergate {

const SchedulingPolicy& Job::policy() const { return routed ? *route.model->scheduling : *DefaultSchedulingPolicy(); }

void Job::Cancel() {
  if (finished()) return;
  cancelled.store(true);
  if (DeviceExecutor* ex = executor.load()) ex->PurgeCancelled();
}

void Job::Finish(absl::StatusOr<InferenceResult> result) {
  if (finished_.exchange(true)) return;
  model_hold.reset();  // the copy loaded for it on arrival may go now
  if (!done_) return;
  RequestLabels labels;
  if (routed) {
    labels.model = route.model->name;
    labels.device = route.device.id.ToString();
    if (statistics && result.ok()) {
      const Timing& t = result->timing;
      statistics->RecordSuccess(labels.model, route.version, t.total_us * 1000, t.queue_us * 1000,
                                {t.compute_input_ns, t.compute_infer_ns, t.compute_output_ns});
    } else if (statistics) {
      statistics->RecordFailure(labels.model, route.version, NanosBetween(request.received, Clock::now()));
    }
  } else {
    labels.model = model_label;
  }
  CheckNoCallbackLockHeld("Job::Finish");
  // What the callback throws is its own failure: logged and counted, the
  // worker goes on.
  (void)RunCatching("answering a request", [&] { done_(std::move(result), labels); });
}

}  // namespace infergate
