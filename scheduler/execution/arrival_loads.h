#pragma once
// Loads started when a request arrives, not when a worker takes it. A
// request that `auto` sends to load and run (ready_path.h) first waits in
// its device's queue and then for its model's load; asked for here when it
// is routed, the load runs while the request waits in the queue, so the
// request waits for the longer of the two, not their sum, and the worker
// that takes it is not held by the load (the device's other requests are
// not queued behind a transfer).
//
// Contract:
//  1. Ask(lane, key, load) queues `load` on `lane` once per key: a key
//     already waiting or loading on that lane is not queued again (a model
//     asked for by many requests is loaded once).
//  2. Each lane runs its loads one at a time, in the order asked, on a
//     thread of its own (started by the lane's first ask): a lane is a
//     device, whose link carries one move at a time. Lanes run apart.
//  3. At most `capacity` loads wait on a lane; past that Ask queues nothing
//     and answers false (the request's worker loads the model when it takes
//     the request, as it would without this class).
//  4. What a load does, and whether it succeeds, is the caller's: nothing
//     here waits for it or reads its result. A load that failed leaves the
//     request's worker to load again, and to answer the failure.
//  5. Stop refuses new asks (false), drops the loads waiting and waits for
//     the running ones; the destructor stops.
//
// Threading: Ask, Waiting and Stop may be called from any thread. A load
// runs on its lane's thread without this class's lock held, so it may ask
// again. Ownership: a load's captures must outlive Stop.

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>

#include "common/mutex.h"

namespace infergate {

class ArrivalLoads {
 public:
  explicit ArrivalLoads(size_t capacity = 64) : capacity_(capacity) {}
  ~ArrivalLoads();
  ArrivalLoads(const ArrivalLoads&) = delete;
  ArrivalLoads& operator=(const ArrivalLoads&) = delete;

  // Queues `load` for `key` on `lane` (1-3 above). True when it was queued
  // now or the key was already waiting or loading there.
  bool Ask(const std::string& lane, const std::string& key, std::function<void()> load);
  // Loads waiting on `lane` (not the running one).
  size_t Waiting(const std::string& lane) const;
  void Stop();

 private:
  struct Lane {
    std::deque<std::pair<std::string, std::function<void()>>> waiting;
    std::set<std::string> keys;  // waiting or running
    std::thread thread;
  };
  void Run(const std::string& name, Lane* lane);

  const size_t capacity_;
  mutable Mutex mu_;
  std::condition_variable cv_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::map<std::string, std::unique_ptr<Lane>> lanes_ ABSL_GUARDED_BY(mu_);
};

}  // namespace infergate
