#pragma once
// One simulated device's host-to-device link. A real PCIe (or unified
// memory) link is shared: two models moving onto one GPU at once do not
// each get its full bandwidth. The simulation books moves on the link first
// come, first served, each at the link's full rate, so a move that starts
// while another is crossing waits for it, and the estimate of a load can
// include the link's queue (scheduler/core/core_parts.cc).
//
// Thread-safe: one short lock per booking or query; Move sleeps outside it.
// Owned by the device's SimulationRules (simulation.h), shared by every
// copy loaded onto that device.

#include <chrono>
#include <cstdint>

#include "common/mutex.h"

namespace infergate {

// What `bytes` take on a link at `bytes_per_second` (0: free) that charges
// `per_move` for each move, with nothing ahead of them.
std::chrono::microseconds LinkTransferTime(double bytes_per_second, std::chrono::microseconds per_move, uint64_t bytes);

class SimulatedLink {
 public:
  using Clock = std::chrono::steady_clock;

  // `bytes_per_second` 0: moves cost only `per_move`.
  SimulatedLink(double bytes_per_second, std::chrono::microseconds per_move)
      : bytes_per_second_(bytes_per_second), per_move_(per_move) {}

  // What `bytes` take on this link with nothing ahead of them.
  std::chrono::microseconds TransferTime(uint64_t bytes) const {
    return LinkTransferTime(bytes_per_second_, per_move_, bytes);
  }

  // Books `bytes` behind every move already booked and returns when they
  // would end (now + queue + TransferTime). Does not wait.
  Clock::time_point Book(uint64_t bytes);

  // Book, then sleep until the booked move has ended; returns the time from
  // the call to its end (queue and transfer).
  std::chrono::microseconds Move(uint64_t bytes);

  // How long a move booked now would wait before it starts (0: the link is
  // free).
  std::chrono::microseconds Queued() const;

 private:
  const double bytes_per_second_;
  const std::chrono::microseconds per_move_;
  mutable Mutex mu_;
  Clock::time_point free_at_ ABSL_GUARDED_BY(mu_){};
};

}  // namespace infergate
