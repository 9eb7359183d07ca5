#include "service/call/intake_gate.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"

namespace infergate {
namespace {

// A connection's messages are small when at most this part of the largest
// allowed; the fast lane reserves twice its largest, at least kFastFloor.
constexpr uint64_t kSmallDivisor = 16;
constexpr uint64_t kFastFloor = 64 << 10;

}  // namespace

IntakeGate::Ticket& IntakeGate::Ticket::operator=(Ticket&& other) noexcept {
  if (this != &other) {
    EndFastRead();
    room_ = std::move(other.room_);
    fast_of_ = other.fast_of_;
    new_connection_ = other.new_connection_;
    other.fast_of_ = nullptr;
  }
  return *this;
}

void IntakeGate::Ticket::EndFastRead() {
  if (fast_of_ == nullptr) return;
  MutexLock lock(fast_of_->mu_);
  --(new_connection_ ? fast_of_->new_reads_ : fast_of_->fast_reads_);
  fast_of_ = nullptr;
}

IntakeGate::IntakeGate(InflightBudget* budget, uint64_t max_message_bytes, size_t max_waiting)
    : budget_(budget != nullptr && budget->limit() > 0 ? budget : nullptr),
      room_bytes_(budget_ != nullptr ? std::min(max_message_bytes, budget_->limit()) : 0),
      max_waiting_(max_waiting) {}

bool IntakeGate::Small(uint64_t largest) const { return largest <= room_bytes_ / kSmallDivisor; }

bool IntakeGate::Reserve(uint64_t bytes, InflightBudget::Reservation* room) {
  if (budget_ == nullptr) return true;
  absl::StatusOr<InflightBudget::Reservation> reserved = budget_->Reserve(bytes);
  if (!reserved.ok()) return false;
  *room = *std::move(reserved);
  return true;
}

bool IntakeGate::TryFastLane(absl::string_view peer, Ticket* ticket) {
  auto it = history_.find(std::string(peer));
  const bool fresh = it == history_.end();
  if (!fresh && !Small(it->second.largest)) return false;
  int& slots = fresh ? new_reads_ : fast_reads_;
  if (slots >= (fresh ? kMaxNewReads : kMaxFastReads)) return false;
  const uint64_t room = fresh ? kFastFloor : std::max(it->second.largest * 2, kFastFloor);
  // Counted, but not refused when the budget is full: the fast lane's
  // reads are bounded by its slots (together at most one largest message
  // and kMaxNewReads x kFastFloor), and a small request must not wait
  // behind large ones, nor behind answers being written.
  ticket->room_ = budget_->Hold(room);
  ++slots;
  ticket->fast_of_ = this;
  ticket->new_connection_ = fresh;
  return true;
}

IntakeGate::Turn IntakeGate::Enter(const void* waiter, absl::string_view peer, Ticket* ticket) {
  if (budget_ == nullptr) return Turn::kAdmitted;
  MutexLock lock(mu_);
  if (TryFastLane(peer, ticket)) return Turn::kAdmitted;
  if (line_.empty() && Reserve(room_bytes_, &ticket->room_)) return Turn::kAdmitted;
  if (line_.size() >= max_waiting_) return Turn::kRefused;
  line_.push_back(waiter);
  return Turn::kWait;
}

IntakeGate::Turn IntakeGate::Retry(const void* waiter, absl::string_view peer, Ticket* ticket) {
  MutexLock lock(mu_);
  if (TryFastLane(peer, ticket)) {
    line_.erase(std::find(line_.begin(), line_.end(), waiter));
    return Turn::kAdmitted;
  }
  if (line_.empty() || line_.front() != waiter || !Reserve(room_bytes_, &ticket->room_)) return Turn::kWait;
  line_.pop_front();
  return Turn::kAdmitted;
}

void IntakeGate::Leave(const void* waiter) {
  MutexLock lock(mu_);
  auto it = std::find(line_.begin(), line_.end(), waiter);
  if (it != line_.end()) line_.erase(it);
}

bool IntakeGate::FastLaneEligible(absl::string_view peer) const {
  if (budget_ == nullptr) return true;
  MutexLock lock(mu_);
  auto it = history_.find(std::string(peer));
  return it == history_.end() || Small(it->second.largest);
}

size_t IntakeGate::waiting() const {
  MutexLock lock(mu_);
  return line_.size();
}

absl::Status IntakeGate::Read(absl::string_view peer, uint64_t bytes, Ticket* ticket) {
  ticket->EndFastRead();
  if (budget_ == nullptr) return absl::OkStatus();
  {
    MutexLock lock(mu_);
    const std::string key(peer);
    auto it = history_.find(key);
    if (it == history_.end()) {
      recency_.push_front(key);
      it = history_.emplace(key, History{bytes, recency_.begin()}).first;
      if (history_.size() > kMaxRemembered) {
        history_.erase(recency_.back());
        recency_.pop_back();
      }
    } else {
      recency_.splice(recency_.begin(), recency_, it->second.place);
      // The largest recent message: a connection that sent a large one
      // returns to the fast lane after a few small ones.
      it->second.largest = std::max(it->second.largest / 2, bytes);
    }
  }
  InflightBudget::Reservation& room = ticket->room_;
  if (bytes <= room.bytes()) {
    room.ShrinkTo(bytes);
    return absl::OkStatus();
  }
  // Larger than its connection's history said: charged in full, or refused.
  return budget_->Extend(room, bytes - room.bytes());
}

absl::Status IntakeGate::Refusal() const {
  return absl::ResourceExhaustedError(absl::StrCat(
      "the server's in-flight budget (--max-inflight-bytes) had no room to read a request of up to ", room_bytes_,
      " bytes from this connection in time; retry shortly or on another replica"));
}

}  // namespace infergate
