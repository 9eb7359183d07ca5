#pragma once
// Loads started when a request arrives, before it is queued. A request
// that `auto` sends to load and run (ready_path.h) is held here while its
// model loads, on a thread of its device's own, and queued on the device
// once the load is done: the device's worker never waits for the transfer
// (the device's other requests do not queue behind it), and the request
// waits for the load and then its turn.
//
// Contract:
//  1. Ask(lane, key, load, then) runs `load` on `lane` once per key: a key
//     already waiting or loading there is not loaded again; its `then` is
//     added to that load's.
//  2. Each lane runs its loads one at a time, in the order asked, on a
//     thread of its own (started by the lane's first ask, under the normal
//     CPU policy as a device worker is: common/cpu_policy.h): a lane is a
//     device, whose link carries one move at a time. Lanes run apart.
//  3. Once a load has run, whether or not it succeeded (that is the
//     caller's to find out), every `then` added to it runs, in the order
//     asked, on the lane's thread, with what the load returned (a hold on
//     the copy it loaded, so it is not evicted before those requests run;
//     null when it has none). A load is never run twice for them.
//  4. At most `capacity` loads wait on a lane, and at most `capacity`
//     `then`s wait for one load; past that Ask holds nothing and answers
//     false (the caller queues its request at once, and its worker loads
//     the model or waits for this load, as without this class).
//  5. Before(lane, key) says what a load of `key` asked now would wait
//     for under (2): the time left of the running load (its estimate, as
//     given to Ask, less how long it has run; never below 0) and the
//     estimates of the loads waiting ahead of it (all that wait, or those
//     asked before `key` when it waits). When `key` is the running load,
//     it says so and how long it has left: a request asking now joins it.
//  6. Stop refuses new asks (false), and runs the `then`s of the loads
//     waiting (with null) without running those loads (on the caller's thread), then
//     waits for the running ones, whose `then`s run on their lanes: every
//     `then` handed over runs exactly once. The destructor stops.
//
// Threading: Ask, Before, Waiting, Held and Stop may be called from any thread. Loads
// and `then`s run without this class's lock held, so they may ask again.
// What escapes a load or a `then` is caught and logged (RunCatching); the
// lane goes on. Ownership: their captures must outlive Stop.

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "common/mutex.h"

namespace infergate {

class ArrivalLoads {
 public:
  explicit ArrivalLoads(size_t capacity = 64) : capacity_(capacity) {}
  ~ArrivalLoads();
  ArrivalLoads(const ArrivalLoads&) = delete;
  ArrivalLoads& operator=(const ArrivalLoads&) = delete;

  // What a load leaves its requests: a hold on the copy it loaded, kept by
  // each until it runs (opaque here), or null.
  using Hold = std::shared_ptr<void>;
  using LoadFn = std::function<Hold()>;
  using ThenFn = std::function<void(Hold)>;
  // Holds `then` until `key`'s load on `lane` has run (1-4 above), the load
  // expected to take `estimate_us` (5; 0: unknown). False: nothing held
  // (full or stopping); the caller goes on without.
  bool Ask(const std::string& lane, const std::string& key, LoadFn load, ThenFn then, double estimate_us = 0);
  // What a load of `key` asked on `lane` now would wait for (5).
  struct Ahead {
    double running_left_us = 0;  // the running load's time left (0: none running)
    double waiting_us = 0;       // the waiting loads' estimates ahead of `key`
    bool key_running = false;    // `key` is the running load (running_left_us is its own)
  };
  Ahead Before(const std::string& lane, const std::string& key) const;
  // Loads waiting on `lane` (not the running one).
  size_t Waiting(const std::string& lane) const;
  // Requests held on `lane`: the `then`s of its waiting and running loads.
  size_t Held(const std::string& lane) const;
  void Stop();

 private:
  struct Load {
    std::string key;
    LoadFn load;
    std::vector<ThenFn> thens;
    double estimate_us = 0;
  };
  struct Lane {
    std::deque<std::shared_ptr<Load>> waiting;
    std::map<std::string, std::shared_ptr<Load>> by_key;  // waiting or running
    std::shared_ptr<Load> running;                        // null: none
    std::chrono::steady_clock::time_point running_since;
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
