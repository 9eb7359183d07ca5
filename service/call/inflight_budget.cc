#include "service/call/inflight_budget.h"

#include "absl/strings/str_cat.h"

namespace infergate {

InflightBudget::Reservation& InflightBudget::Reservation::operator=(Reservation&& other) noexcept {
  if (this != &other) {
    Release();
    budget_ = other.budget_;
    bytes_ = other.bytes_;
    other.budget_ = nullptr;
  }
  return *this;
}

void InflightBudget::Reservation::Release() {
  if (budget_) budget_->used_.fetch_sub(bytes_, std::memory_order_relaxed);
  budget_ = nullptr;
}

void InflightBudget::Reservation::ShrinkTo(uint64_t bytes) {
  if (budget_ == nullptr || bytes >= bytes_) return;
  budget_->used_.fetch_sub(bytes_ - bytes, std::memory_order_relaxed);
  bytes_ = bytes;
}

absl::StatusOr<InflightBudget::Reservation> InflightBudget::Reserve(uint64_t bytes) {
  uint64_t used = used_.load(std::memory_order_relaxed);
  do {
    if (limit_ > 0 && used + bytes > limit_) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "the server holds ", used, " bytes of requests in flight and this one needs ", bytes,
          ", beyond its --max-inflight-bytes budget of ", limit_, "; retry shortly or on another replica"));
    }
  } while (!used_.compare_exchange_weak(used, used + bytes, std::memory_order_relaxed));
  reserved_total_.fetch_add(bytes, std::memory_order_relaxed);
  return Reservation(this, bytes);
}

InflightBudget::Reservation InflightBudget::Hold(uint64_t bytes) {
  used_.fetch_add(bytes, std::memory_order_relaxed);
  reserved_total_.fetch_add(bytes, std::memory_order_relaxed);
  return Reservation(this, bytes);
}

void InflightBudget::Hold(Reservation& reservation, uint64_t bytes) {
  Reservation more = Hold(bytes);
  if (reservation.budget_ == nullptr) {
    reservation = std::move(more);
  } else {
    reservation.bytes_ += more.bytes_;
    more.budget_ = nullptr;  // its bytes now belong to `reservation`
  }
}

absl::Status InflightBudget::Extend(Reservation& reservation, uint64_t bytes) {
  absl::StatusOr<Reservation> more = Reserve(bytes);
  if (!more.ok()) return more.status();
  if (reservation.budget_ == nullptr) {
    reservation = *std::move(more);
  } else {
    reservation.bytes_ += more->bytes_;
    more->budget_ = nullptr;  // its bytes now belong to `reservation`
  }
  return absl::OkStatus();
}

}  // namespace infergate
