#include "service/server/liveness_watchdog.h"

#include <algorithm>

#include "common/logging.h"
#include "common/thread_name.h"

namespace infergate {

LivenessWatchdog::LivenessWatchdog(const InferenceCore& core, std::chrono::milliseconds limit,
                                   std::function<void(bool)> set_live)
    : core_(core), limit_(limit), set_live_(std::move(set_live)), thread_([this] {
        NameThisThread("watchdog");
        Run();
      }) {}

LivenessWatchdog::~LivenessWatchdog() {
  {
    MutexLock lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void LivenessWatchdog::Run() {
  // Look four times per limit (between 50 ms and 1 s), so a stuck batch is
  // noticed at most a quarter of the limit late.
  const auto period =
      std::clamp<std::chrono::milliseconds>(limit_ / 4, std::chrono::milliseconds(50), std::chrono::seconds(1));
  bool live = true;
  UniqueMutexLock lock(mu_);
  while (!cv_.wait_for(lock.native(), period, [this]() ABSL_NO_THREAD_SAFETY_ANALYSIS { return stop_; })) {
    std::string stuck_device;
    Clock::duration oldest{0};
    for (const DeviceStatus& d : core_.Devices()) {
      if (d.oldest_running > oldest) {
        oldest = d.oldest_running;
        stuck_device = d.info.id.ToString();
      }
    }
    bool now_live = oldest <= limit_;
    if (now_live == live) continue;
    live = now_live;
    if (!live) {
      LOG_ERROR << "device " << stuck_device << ": a batch has run for "
                << std::chrono::duration_cast<std::chrono::milliseconds>(oldest).count()
                << " ms, beyond --stuck-batch-timeout (" << limit_.count() << " ms); liveness is NOT_SERVING";
    } else {
      LOG_INFO << "no batch runs beyond --stuck-batch-timeout any more; liveness is SERVING again";
    }
    set_live_(live);
  }
}

}  // namespace infergate
