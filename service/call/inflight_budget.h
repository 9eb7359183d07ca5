#pragma once
// Bounds the bytes of inference requests the server holds at once.
//
// A queued request keeps its whole message alive (its input tensors alias
// the message's bytes), so without a bound a burst of large requests can
// grow the process until it is killed for memory. Every inference call
// reserves its message size here before it reaches the core and releases it
// when its answer is sent; a call that does not fit is refused with
// RESOURCE_EXHAUSTED at once, and the others go on being served.
//
// What a call holds after its model answered (its encoded answer, while
// the transport writes it) is memory already taken: it is counted with
// Hold, which cannot refuse, so that new requests wait until it goes.
//
// Threading: Reserve, Hold and the Reservation destructor may run on any thread
// (lock-free). Reservations must not outlive the budget.

#include <atomic>
#include <cstdint>

#include "absl/status/statusor.h"

namespace infergate {

class InflightBudget {
 public:
  // `limit_bytes` 0 means no limit.
  explicit InflightBudget(uint64_t limit_bytes) : limit_(limit_bytes) {}
  InflightBudget(const InflightBudget&) = delete;
  InflightBudget& operator=(const InflightBudget&) = delete;

  // Holds `bytes` of the budget until destroyed. Move-only.
  class Reservation {
   public:
    Reservation() = default;
    Reservation(Reservation&& other) noexcept : budget_(other.budget_), bytes_(other.bytes_) {
      other.budget_ = nullptr;
    }
    Reservation& operator=(Reservation&& other) noexcept;
    ~Reservation() { Release(); }
    // Gives back what it holds beyond `bytes` (room reserved for a message
    // before it was read, once its size is known).
    void ShrinkTo(uint64_t bytes);
    uint64_t bytes() const { return budget_ != nullptr ? bytes_ : 0; }

   private:
    friend class InflightBudget;
    Reservation(InflightBudget* budget, uint64_t bytes) : budget_(budget), bytes_(bytes) {}
    void Release();
    InflightBudget* budget_ = nullptr;
    uint64_t bytes_ = 0;
  };

  // RESOURCE_EXHAUSTED with the figures when `bytes` more would pass the limit.
  absl::StatusOr<Reservation> Reserve(uint64_t bytes);
  // Reserves `bytes` more into `reservation` (empty, or one of this
  // budget's): for memory that grows while it is produced. On refusal
  // `reservation` is unchanged.
  absl::Status Extend(Reservation& reservation, uint64_t bytes);
  // Counts `bytes` the server already holds (an answer being written), past
  // the limit if need be: never refused, and while it is held, requests
  // that would pass the limit are refused or wait.
  Reservation Hold(uint64_t bytes);
  // The same, into `reservation` (empty, or one of this budget's).
  void Hold(Reservation& reservation, uint64_t bytes);

  uint64_t in_use() const { return used_.load(std::memory_order_relaxed); }
  uint64_t limit() const { return limit_; }
  // Every byte ever reserved (a counter): how much request memory has come
  // and gone, for MemoryReturner.
  uint64_t reserved_total() const { return reserved_total_.load(std::memory_order_relaxed); }

 private:
  const uint64_t limit_;
  std::atomic<uint64_t> used_{0};
  std::atomic<uint64_t> reserved_total_{0};
};

}  // namespace infergate
