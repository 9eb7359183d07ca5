#pragma once
// Follows the model repository on disk: every interval, on a thread of its
// own, scans the repository (stat() calls only) and hands what changed to the
// model lifecycle, which loads and publishes. Requests never wait for it.
//
// Threading: Start and Stop are called once each, from the thread that
// starts and stops the server. The lifecycle must outlive the poller.

#include <chrono>
#include <condition_variable>
#include <string>
#include <thread>

#include "common/mutex.h"
#include "scheduler/core/model_lifecycle.h"
#include "scheduler/repository/repository_scan.h"

namespace infergate {

class RepositoryPoller {
 public:
  RepositoryPoller(std::string root, ModelLifecycle& lifecycle);
  ~RepositoryPoller();
  RepositoryPoller(const RepositoryPoller&) = delete;
  RepositoryPoller& operator=(const RepositoryPoller&) = delete;

  // Polls every `interval` (> 0) until Stop. `initial` is the scan the
  // served view was built from.
  void Start(std::chrono::milliseconds interval, DiskRepository initial);
  // Waits for a poll under way (and its loads) to end.
  void Stop();

 private:
  void Run(std::chrono::milliseconds interval);

  std::string root_;
  ModelLifecycle& lifecycle_;
  DiskRepository previous_;
  Mutex mu_;
  std::condition_variable wake_;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace infergate
