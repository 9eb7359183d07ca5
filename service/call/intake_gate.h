#pragma once
// Holds the gRPC inference front end's intake to the in-flight budget.
//
// gRPC reads a unary call's whole request message before the server sees
// the call, so admission after the read bounds nothing: 48 concurrent
// 24 MiB requests were all in memory at once under a 256 MiB budget. The
// completion-queue front end therefore takes its inference calls as
// generic calls, whose messages gRPC reads only when asked, and asks this
// gate first. A read is started only while the budget has room for it:
//   - a connection whose messages so far were small (at most a sixteenth
//     of the largest allowed) reads its next with room for twice the
//     largest it sent lately, and a new connection with 64 KiB, without
//     waiting behind anyone (the fast lane: a client sending small requests
//     is not held up by a burst of large ones), also when it is already in
//     line. At most kMaxFastReads such reads at once for known connections
//     and kMaxNewReads for new ones, as one may turn out larger than its
//     room (it is then charged in full once read, or refused). Their room
//     is counted in the budget but never refused, as it is bounded by the
//     slots: at most one largest message (kMaxFastReads reads of at most
//     an eighth of it) and kMaxNewReads x 64 KiB;
//   - any other call needs room for a message of the largest size allowed
//     (`room_bytes`), and waits in line for it, first come first served,
//     holding no message: HTTP/2 flow control keeps its bytes with the
//     client (the server keeps each stream's window small:
//     --grpc-bdp-probe). The caller bounds the wait (a unary call is
//     refused after a moment, RESOURCE_EXHAUSTED, unread; a stream waits
//     on), and past `max_waiting` in line a call is refused at once.
// Either way the room is shrunk to the message's size once it is in, and
// becomes the call's share of the budget.
//
// What is read at once is thus at most the budget, plus the fast lane's
// rooms, plus at most kMaxFastReads + kMaxNewReads messages that grew past
// their room (in practice kMaxNewReads: a known connection grows past
// twice its history rarely). Answers being written count in the budget
// too (InflightBudget::Hold): while they fill it, large reads wait.
//
// Waiters ask again on their own (the front end's calls poll on a short
// alarm on their own completion queue), so the gate calls nobody back.
//
// Threading: every method may be called from any thread; one lock.
// Ownership: waiters are identified by address; one must Leave (or be
// admitted) before it is destroyed. The budget must outlive the gate, and
// tickets must not outlive it.

#include <cstddef>
#include <cstdint>
#include <deque>
#include <list>
#include <string>
#include <unordered_map>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "common/mutex.h"
#include "service/call/inflight_budget.h"

namespace infergate {

class IntakeGate {
 public:
  // Fast-lane reads at once, at most: of known connections, of new ones.
  static constexpr int kMaxFastReads = 8;
  static constexpr int kMaxNewReads = 2;
  // Connections whose history is kept (the least recently seen go first).
  static constexpr size_t kMaxRemembered = 4096;

  // `budget` null or without a limit: every read is admitted at once.
  IntakeGate(InflightBudget* budget, uint64_t max_message_bytes, size_t max_waiting);
  IntakeGate(const IntakeGate&) = delete;
  IntakeGate& operator=(const IntakeGate&) = delete;

  enum class Turn {
    kAdmitted,  // the ticket holds the read's share of the budget: read now
    kWait,      // in line (or first, still without room): ask again soon
    kRefused,   // the line is full: answer RESOURCE_EXHAUSTED unread
  };

  // One read's place at the gate: its room, and whether it came by the
  // fast lane. Move-only; a fast read's slot is given back when Read is
  // called or the ticket goes.
  class Ticket {
   public:
    Ticket() = default;
    Ticket(Ticket&& other) noexcept { *this = std::move(other); }
    Ticket& operator=(Ticket&& other) noexcept;
    ~Ticket() { EndFastRead(); }
    InflightBudget::Reservation& room() { return room_; }

   private:
    friend class IntakeGate;
    void EndFastRead();
    InflightBudget::Reservation room_;
    IntakeGate* fast_of_ = nullptr;  // set while it holds a fast-lane slot
    bool new_connection_ = false;    // the slot is one of kMaxNewReads
  };

  // A call from `peer` (its connection, as gRPC names it) that wants to
  // read one message. Admitted at once by the fast lane, or when nobody
  // waits and the budget has room; else in line.
  Turn Enter(const void* waiter, absl::string_view peer, Ticket* ticket);
  // A waiter asks again: admitted by the fast lane, or when it is first in
  // line and the budget now has room.
  Turn Retry(const void* waiter, absl::string_view peer, Ticket* ticket);
  // A waiter gives up its place (it waited too long, or its client left).
  void Leave(const void* waiter);
  // The message came in: `bytes` long, from `peer`. Shrinks the ticket's
  // room to it (or charges what it has over, when it grew past its room:
  // the budget's refusal then), gives back a fast-lane slot, and notes the
  // size in the connection's history. The room then is the call's share.
  absl::Status Read(absl::string_view peer, uint64_t bytes, Ticket* ticket);

  // What a read from a connection of large messages reserves: the largest
  // message allowed, or the whole budget when that is smaller (a larger
  // message could never be held).
  uint64_t room_bytes() const { return room_bytes_; }
  size_t waiting() const;
  // Whether `peer`'s next read may take the fast lane (its messages so far
  // were small, or it has sent none): it then waits for a slot only, never
  // for room in the budget, so the caller need not bound its wait as it
  // bounds a wait for room.
  bool FastLaneEligible(absl::string_view peer) const;
  // The refusal for a call that found no room in time.
  absl::Status Refusal() const;

 private:
  // Whether a connection whose largest recent message was `largest` sends
  // small messages (the fast lane's).
  bool Small(uint64_t largest) const;
  // Reserves `bytes`; false when the budget has no room.
  bool Reserve(uint64_t bytes, InflightBudget::Reservation* room);
  // Admits by the fast lane when `peer` may take it and a slot and the
  // room are free: a known connection of small messages (room twice its
  // largest), or a new one (64 KiB).
  bool TryFastLane(absl::string_view peer, Ticket* ticket) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  InflightBudget* const budget_;
  const uint64_t room_bytes_;
  const size_t max_waiting_;
  mutable Mutex mu_;
  std::deque<const void*> line_ ABSL_GUARDED_BY(mu_);
  int fast_reads_ ABSL_GUARDED_BY(mu_) = 0;
  int new_reads_ ABSL_GUARDED_BY(mu_) = 0;
  // Per connection, the largest message it sent lately (halved with each
  // message after it); most recently seen first.
  struct History {
    uint64_t largest = 0;
    std::list<std::string>::iterator place;
  };
  std::list<std::string> recency_ ABSL_GUARDED_BY(mu_);
  std::unordered_map<std::string, History> history_ ABSL_GUARDED_BY(mu_);
};

}  // namespace infergate
