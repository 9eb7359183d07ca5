#include "scheduler/core/repository_poller.h"

#include "common/logging.h"
#include "common/thread_name.h"

namespace infergate {

RepositoryPoller::RepositoryPoller(std::string root, ModelLifecycle& lifecycle)
    : root_(std::move(root)), lifecycle_(lifecycle) {}

RepositoryPoller::~RepositoryPoller() { Stop(); }

void RepositoryPoller::Start(std::chrono::milliseconds interval, DiskRepository initial) {
  previous_ = std::move(initial);
  thread_ = std::thread([this, interval] {
    NameThisThread("repo poller");
    Run(interval);
  });
}

void RepositoryPoller::Stop() {
  {
    MutexLock lock(mu_);
    stop_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void RepositoryPoller::Run(std::chrono::milliseconds interval) {
  bool root_missing = false;
  for (;;) {
    {
      UniqueMutexLock lock(mu_);
      if (wake_.wait_for(lock.native(), interval, [this]() ABSL_NO_THREAD_SAFETY_ANALYSIS { return stop_; })) return;
    }
    absl::StatusOr<DiskRepository> now = ScanRepository(root_);
    if (!now.ok()) {
      // A volume being remounted: keep serving what is loaded, say so once.
      if (!root_missing) LOG_WARNING << now.status().message() << "; serving the models already known";
      root_missing = true;
      continue;
    }
    if (root_missing) LOG_INFO << "model repository " << root_ << " readable again";
    root_missing = false;
    lifecycle_.Apply(*now, &previous_);
    previous_ = *std::move(now);
  }
}

}  // namespace infergate
