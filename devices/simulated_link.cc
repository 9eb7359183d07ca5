#include "devices/simulated_link.h"

#include <algorithm>
#include <cmath>
#include <thread>

namespace infergate {

std::chrono::microseconds LinkTransferTime(double bytes_per_second, std::chrono::microseconds per_move,
                                           uint64_t bytes) {
  double micros = static_cast<double>(per_move.count());
  if (bytes_per_second > 0) micros += static_cast<double>(bytes) / bytes_per_second * 1e6;
  return std::chrono::microseconds(std::llround(micros));
}

SimulatedLink::Clock::time_point SimulatedLink::Book(uint64_t bytes) {
  const Clock::time_point now = Clock::now();
  MutexLock lock(mu_);
  free_at_ = std::max(free_at_, now) + TransferTime(bytes);
  return free_at_;
}

std::chrono::microseconds SimulatedLink::Move(uint64_t bytes) {
  const Clock::time_point start = Clock::now();
  const Clock::time_point end = Book(bytes);
  std::this_thread::sleep_until(end);
  return std::chrono::duration_cast<std::chrono::microseconds>(end - start);
}

std::chrono::microseconds SimulatedLink::Queued() const {
  const Clock::time_point now = Clock::now();
  MutexLock lock(mu_);
  return free_at_ > now ? std::chrono::duration_cast<std::chrono::microseconds>(free_at_ - now)
                        : std::chrono::microseconds(0);
}

}  // namespace infergate
