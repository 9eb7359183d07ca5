#include "service/call/intake_gate.h"

#include <algorithm>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace infergate {
namespace {

// A connection's messages are small when at most this part of the largest
// allowed; the fast lane reserves twice its largest, at least kFastFloor.
constexpr uint64_t kSmallDivisor = 16;
constexpr uint64_t kFastFloor = 64 << 10;

double Seconds(std::chrono::steady_clock::duration d) { return std::chrono::duration<double>(d).count(); }

}  // namespace

IntakeGate::Ticket& IntakeGate::Ticket::operator=(Ticket&& other) noexcept {
  if (this != &other) {
    EndRead();
    room_ = std::move(other.room_);
    gate_ = other.gate_;
    lane_ = other.lane_;
    address_ = std::move(other.address_);
    deadline_ = other.deadline_;
    pending_ = other.pending_;
    other.gate_ = nullptr;
    other.lane_ = Lane::kNone;
    other.pending_ = 0;
    other.deadline_ = Clock::time_point::max();
  }
  return *this;
}

void IntakeGate::Ticket::EndRead() {
  if (gate_ != nullptr) gate_->End(this);
}

IntakeGate::IntakeGate(InflightBudget* budget, Options options)
    : budget_(budget != nullptr && budget->limit() > 0 ? budget : nullptr),
      options_(std::move(options)),
      room_bytes_(budget_ != nullptr ? std::min(options_.max_message_bytes, std::max<uint64_t>(1, budget_->limit() / 2))
                                     : 0),
      pending_cap_(budget_ != nullptr ? budget_->limit() - room_bytes_ : 0) {}

absl::string_view IntakeGate::AddressOf(absl::string_view peer) {
  if (absl::StartsWith(peer, "ipv4:") || absl::StartsWith(peer, "ipv6:")) {
    const size_t colon = peer.rfind(':');
    if (colon > 4) return peer.substr(0, colon);
  }
  return peer;
}

bool IntakeGate::Small(uint64_t largest) const { return largest <= room_bytes_ / kSmallDivisor; }

IntakeGate::Lane IntakeGate::LaneFor(absl::string_view peer, uint64_t max_bytes) const {
  if (max_bytes <= kSmallMethodBytes) return Lane::kSmall;
  auto it = history_.find(std::string(peer));
  if (it == history_.end()) return Lane::kNew;
  return Small(it->second.largest) ? Lane::kFast : Lane::kRoom;
}

bool IntakeGate::AddressHasRoom(const std::string& address) const {
  auto it = addresses_.find(address);
  return it == addresses_.end() || it->second.reads < options_.max_reads_per_address;
}

void IntakeGate::Admit(Lane lane, const std::string& address, Ticket* ticket) {
  ticket->gate_ = this;
  ticket->lane_ = lane;
  ticket->address_ = address;
  ++addresses_[address].reads;
}

bool IntakeGate::TrySlot(Lane lane, absl::string_view peer, uint64_t max_bytes, Ticket* ticket) {
  const std::string address(AddressOf(peer));
  if (!AddressHasRoom(address)) return false;
  uint64_t room = 0;
  std::chrono::milliseconds allowed = kFastReadTenure;
  switch (lane) {
    case Lane::kSmall: {
      // One address holds at most half of them: a probe from elsewhere
      // always finds one, however many a client trickling its messages
      // keeps busy.
      auto it = addresses_.find(address);
      if (small_reads_ >= kMaxSmallReads || (it != addresses_.end() && it->second.small >= kMaxSmallReads / 2)) {
        return false;
      }
      ++small_reads_;
      ++addresses_[address].small;
      room = max_bytes;
      allowed = kSmallReadTimeout;
      break;
    }
    case Lane::kFast:
      if (fast_reads_ >= kMaxFastReads) return false;
      ++fast_reads_;
      room = std::min(max_bytes, std::max(history_.find(std::string(peer))->second.largest * 2, kFastFloor));
      break;
    case Lane::kNew:
      if (new_reads_ >= kMaxNewReads) return false;
      ++new_reads_;
      room = std::min(max_bytes, kFastFloor);
      break;
    default: return false;
  }
  // Counted, but not refused when the budget is full: these reads are
  // bounded by their slots, and a small request must not wait behind large
  // ones, nor behind answers being written.
  ticket->room_ = budget_->Hold(room);
  Admit(lane, address, ticket);
  ticket->deadline_ = options_.now() + allowed;
  return true;
}

bool IntakeGate::OverShare(const std::string& address) const {
  auto it = addresses_.find(address);
  return it != addresses_.end() && it->second.room + room_bytes_ > std::max(room_bytes_, pending_cap_ / 2);
}

bool IntakeGate::OthersWait(const std::string& address) const {
  auto it = waiting_by_address_.find(address);
  return line_.size() > (it != waiting_by_address_.end() ? it->second : 0);
}

void IntakeGate::CountRoom(const std::string& address, Ticket* ticket) {
  ++room_reads_;
  pending_room_ += room_bytes_;
  addresses_[address].room += room_bytes_;
  ticket->pending_ = room_bytes_;
  const auto at_min_rate = std::chrono::duration<double>(static_cast<double>(room_bytes_) /
                                                         static_cast<double>(std::max<uint64_t>(1, options_.min_rate)));
  ticket->deadline_ = options_.now() + options_.grace + std::chrono::duration_cast<Clock::duration>(at_min_rate);
}

bool IntakeGate::TryRoom(const std::string& address, Ticket* ticket) {
  if (!AddressHasRoom(address)) return false;
  if (pending_room_ + room_bytes_ > pending_cap_) return false;
  // While another address waits, one takes at most half the rooms.
  if (OthersWait(address) && OverShare(address)) return false;
  absl::StatusOr<InflightBudget::Reservation> reserved = budget_->Reserve(room_bytes_);
  if (!reserved.ok()) return false;
  ticket->room_ = *std::move(reserved);
  Admit(Lane::kRoom, address, ticket);
  CountRoom(address, ticket);
  return true;
}

IntakeGate::Turn IntakeGate::Ask(const void* waiter, absl::string_view peer, uint64_t max_bytes, Ticket* ticket,
                                 const Wake& wake) {
  if (budget_ == nullptr) {
    Leave(waiter);
    return Turn::kAdmitted;
  }
  MutexLock lock(mu_);
  auto place = places_.find(waiter);
  const bool in_line = place != places_.end();
  const Lane lane = LaneFor(peer, max_bytes);
  if (lane != Lane::kRoom) {
    // A slot lane's read passes anyone in line once a slot is free. (A
    // connection that was small when it joined the line and is so again
    // also leaves it.) Those waiting for a slot are bounded as the line is:
    // each asks again on a timer.
    if (!TrySlot(lane, peer, max_bytes, ticket)) {
      if (auto waiting = slot_places_.find(waiter); waiting != slot_places_.end()) {
        waiting->second->woken = false;  // it asked: the next free slot may wake it again
        return Turn::kWait;
      }
      if (slot_waiters_.size() >= kMaxSlotWaiters) return Turn::kRefused;
      slot_places_[waiter] = slot_waiters_.insert(slot_waiters_.end(), SlotWaiter{waiter, wake});
      return Turn::kWait;
    }
    RemoveSlotWaiter(waiter);
    if (in_line) RemoveFromLine(place);
    return Turn::kAdmitted;
  }
  RemoveSlotWaiter(waiter);
  const std::string address(AddressOf(peer));
  if (!in_line) {
    if (line_.empty() && TryRoom(address, ticket)) return Turn::kAdmitted;
    if (line_.size() >= options_.max_waiting) return Turn::kRefused;
    places_[waiter] = line_.insert(line_.end(), Waiter{waiter, address});
    ++waiting_by_address_[address];
    return Turn::kWait;
  }
  // First come, first served, except that waiters whose address already
  // holds its share of the rooms are passed.
  size_t position = 0;
  for (auto it = line_.begin(); it != place->second; ++it, ++position) {
    if (!AddressBlocked(it->address)) return Turn::kWait;
  }
  // Out of line first: its own address's waiters do not count against it.
  RemoveFromLine(place);
  if (TryRoom(address, ticket)) return Turn::kAdmitted;
  places_[waiter] = line_.insert(std::next(line_.begin(), position), Waiter{waiter, address});
  ++waiting_by_address_[address];
  return Turn::kWait;
}

void IntakeGate::RemoveFromLine(std::unordered_map<const void*, std::list<Waiter>::iterator>::iterator place) {
  auto count = waiting_by_address_.find(place->second->address);
  if (count != waiting_by_address_.end() && --count->second <= 0) waiting_by_address_.erase(count);
  line_.erase(place->second);
  places_.erase(place);
}

bool IntakeGate::AddressBlocked(const std::string& address) const {
  return !AddressHasRoom(address) || (OthersWait(address) && OverShare(address));
}

void IntakeGate::AskForStream(Ticket* ticket) {
  if (budget_ == nullptr) return;
  MutexLock lock(mu_);
  // Idle streams must not fill the budget: each holds the small floor, and
  // its next message is charged in full once it is in.
  ticket->room_ = budget_->Hold(std::min(room_bytes_, kFastFloor));
  ticket->gate_ = this;
  ticket->lane_ = Lane::kStream;
  ticket->deadline_ = Clock::time_point::max();
}

void IntakeGate::RemoveSlotWaiter(const void* waiter) {
  auto place = slot_places_.find(waiter);
  if (place == slot_places_.end()) return;
  slot_waiters_.erase(place->second);
  slot_places_.erase(place);
}

IntakeGate::Wake IntakeGate::NextToWake() {
  for (SlotWaiter& waiting : slot_waiters_) {
    if (waiting.woken || !waiting.wake) continue;
    waiting.woken = true;
    return waiting.wake;
  }
  return nullptr;
}

void IntakeGate::Leave(const void* waiter) {
  MutexLock lock(mu_);
  RemoveSlotWaiter(waiter);
  auto place = places_.find(waiter);
  if (place != places_.end()) RemoveFromLine(place);
}

bool IntakeGate::Overstay(Ticket* ticket) {
  if (ticket->gate_ != this || (ticket->lane_ != Lane::kFast && ticket->lane_ != Lane::kNew)) return false;
  Wake wake;
  {
    MutexLock lock(mu_);
    const std::string address = ticket->address_;
    if (pending_room_ + room_bytes_ > pending_cap_) return false;
    // A read that has been slow already takes at most its address's share.
    if (OverShare(address)) return false;
    const uint64_t have = ticket->room_.bytes();
    if (have < room_bytes_ && !budget_->Extend(ticket->room_, room_bytes_ - have).ok()) return false;
    --(ticket->lane_ == Lane::kNew ? new_reads_ : fast_reads_);
    ticket->lane_ = Lane::kRoom;
    CountRoom(address, ticket);
    wake = NextToWake();  // its slot came free
  }
  if (wake) wake();
  return true;
}

void IntakeGate::End(Ticket* ticket) {
  Wake wake;
  {
    MutexLock lock(mu_);
    EndLocked(ticket);
    wake = NextToWake();
  }
  if (wake) wake();
}

void IntakeGate::EndLocked(Ticket* ticket) {
  switch (ticket->lane_) {
    case Lane::kSmall:
      --small_reads_;
      if (auto it = addresses_.find(ticket->address_); it != addresses_.end()) --it->second.small;
      break;
    case Lane::kFast: --fast_reads_; break;
    case Lane::kNew: --new_reads_; break;
    case Lane::kRoom:
      --room_reads_;
      pending_room_ -= ticket->pending_;
      break;
    case Lane::kStream:
    case Lane::kNone: break;
  }
  auto it = addresses_.find(ticket->address_);
  if (it != addresses_.end()) {
    --it->second.reads;
    it->second.room -= std::min(it->second.room, ticket->pending_);
    if (it->second.reads <= 0) addresses_.erase(it);
  }
  ticket->gate_ = nullptr;
  ticket->pending_ = 0;
  ticket->deadline_ = Clock::time_point::max();
}

bool IntakeGate::WaitsForASlotOnly(absl::string_view peer, uint64_t max_bytes) const {
  if (budget_ == nullptr) return true;
  MutexLock lock(mu_);
  return LaneFor(peer, max_bytes) != Lane::kRoom;
}

size_t IntakeGate::waiting() const {
  MutexLock lock(mu_);
  return line_.size();
}

int IntakeGate::unfinished() const {
  MutexLock lock(mu_);
  return small_reads_ + fast_reads_ + new_reads_ + room_reads_;
}

absl::Status IntakeGate::Read(absl::string_view peer, uint64_t bytes, Ticket* ticket) {
  ticket->EndRead();
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
  // Larger than its room: charged in full, or refused.
  return budget_->Extend(room, bytes - room.bytes());
}

absl::Status IntakeGate::Refusal() const {
  return absl::ResourceExhaustedError(absl::StrCat(
      "the server's in-flight budget (--max-inflight-bytes) had no room to read a request of up to ", room_bytes_,
      " bytes from this connection in time, or too many requests wait to be read; retry shortly or on another "
      "replica"));
}

absl::Status IntakeGate::Overdue(const Ticket& ticket) const {
  if (ticket.lane() == Lane::kSmall) {
    return absl::ResourceExhaustedError(
        absl::StrCat("the request message did not arrive within ", Seconds(kSmallReadTimeout), " s of its call"));
  }
  if (ticket.lane() == Lane::kFast || ticket.lane() == Lane::kNew) {
    // Overstayed its slot, and Overstay found no room to wait in.
    return absl::ResourceExhaustedError(absl::StrCat(
        "the request message did not arrive within ", kFastReadTenure.count(),
        " ms, and no room was free to wait for the rest of it (reads from this address, or from others, hold the "
        "in-flight budget, --max-inflight-bytes); retry shortly"));
  }
  return absl::ResourceExhaustedError(absl::StrCat("the request message did not arrive in time: the server waits ",
                                                   Seconds(options_.grace), " s plus ", options_.min_rate,
                                                   " bytes a second (--min-receive-rate) for a request of up to ",
                                                   room_bytes_, " bytes; send it faster, or retry"));
}

}  // namespace infergate
