#pragma once
// Moves model copies onto devices off the request path. When `auto` sends a
// request to a device where its model is resident although another device
// would have served it sooner had the model been there (an accelerator the
// model is not on yet, or was evicted from), it asks for the model to be
// moved there; the move (a load, admitted within that device's budget like
// any other) runs here, and the requests after it run there. No request
// waits for it: the one that asked ran where the ready copy was.
//
// Moves are wanted once per (model, version, device) while one is pending
// or running; at most `max_pending` wait, and more are dropped (the next
// request asks again). A move that failed (the model cannot fit or run
// there) is not tried again for `retry_after`, so a model that cannot move
// does not cost a load attempt and a log line per request. One thread runs
// them, one at a time.
//
// Threading: Want and the accessors may be called from any thread and
// never block on a move. `move` runs on the mover's thread; it must not call
// Want. Stop (or the destructor) waits for a running move to end and drops
// the pending ones.

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <thread>
#include <tuple>

#include "absl/status/status.h"
#include "common/mutex.h"
#include "devices/device_id.h"
#include "devices/precision.h"

namespace infergate {

class BackgroundMover {
 public:
  struct Wanted {
    std::string model;
    int64_t version = 0;
    DeviceId device;
    Precision precision = Precision::kAuto;
  };
  // Loads `wanted`'s model on its device and lets go of it (it stays
  // resident until evicted); the status is logged.
  using Move = std::function<absl::Status(const Wanted& wanted)>;

  explicit BackgroundMover(Move move, size_t max_pending = 64,
                           std::chrono::milliseconds retry_after = std::chrono::seconds(60));
  ~BackgroundMover();
  BackgroundMover(const BackgroundMover&) = delete;
  BackgroundMover& operator=(const BackgroundMover&) = delete;

  // Asks for a move; false when it is already wanted, the line is full, or
  // the mover stopped.
  bool Want(Wanted wanted);
  void Stop();

  uint64_t moved() const;   // moves that ended OK
  uint64_t failed() const;  // moves that ended in an error (logged)
  size_t pending() const;   // waiting or running

 private:
  using Key = std::tuple<std::string, int64_t, DeviceId>;
  void Loop();

  const Move move_;
  const size_t max_pending_;
  const std::chrono::milliseconds retry_after_;
  mutable Mutex mu_;
  std::condition_variable wake_;
  std::deque<Wanted> line_ ABSL_GUARDED_BY(mu_);
  std::set<Key> wanted_ ABSL_GUARDED_BY(mu_);  // in line or running
  std::map<Key, std::chrono::steady_clock::time_point> failed_at_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  uint64_t moved_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t failed_ ABSL_GUARDED_BY(mu_) = 0;
  std::thread thread_;
};

}  // namespace infergate
