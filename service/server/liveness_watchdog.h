#pragma once
// Turns liveness off while a model is stuck.
//
// A model that never returns holds its worker forever; once every worker is
// held, the server answers health checks but serves nothing, and a restart
// is the only cure. The watchdog looks at the age of the oldest running
// batch on every device (InferenceCore::Devices) a few times per `limit`;
// past `limit` it reports not-live (Kubernetes then restarts the pod), and
// live again if the batch ends first. One log line per change.
//
// Threading: owns one thread, started by the constructor and joined by the
// destructor. `set_live` is called from that thread; `core` must outlive
// the watchdog.

#include <chrono>
#include <condition_variable>
#include <functional>
#include <thread>

#include "common/mutex.h"
#include "scheduler/core/inference_core.h"

namespace infergate {

class LivenessWatchdog {
 public:
  LivenessWatchdog(const InferenceCore& core, std::chrono::milliseconds limit, std::function<void(bool)> set_live);
  ~LivenessWatchdog();
  LivenessWatchdog(const LivenessWatchdog&) = delete;
  LivenessWatchdog& operator=(const LivenessWatchdog&) = delete;

 private:
  void Run();

  const InferenceCore& core_;
  std::chrono::milliseconds limit_;
  std::function<void(bool)> set_live_;
  Mutex mu_;
  std::condition_variable cv_;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace infergate
