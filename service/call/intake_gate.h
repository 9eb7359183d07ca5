#pragma once
// Holds the gRPC front end's intake to the in-flight budget: no request
// message is read before the gate has room for it, and no read holds its
// room for longer than its bytes take to come.
//
// gRPC reads a registered method's whole message before the server sees
// the call, so admission after the read bounds nothing: 48 concurrent
// 24 MiB requests were all in memory at once under a 256 MiB budget, and
// 20 MB of empty fields became 2 GB once parsed. The completion-queue
// front end therefore takes every call as a generic call, whose message
// gRPC reads only when asked, checks the caller's token and the drain
// switch from the call's metadata, and asks this gate before it reads.
// A read is started only while the budget has room for it, in one of three
// lanes by what the message may be (`max_bytes`: its method's limit):
//   - small: a method whose messages are at most kSmallMethodBytes (health,
//     metadata, listings) reads with room for its limit, beside the others,
//     on one of kMaxSmallReads slots, at most half of them one address's;
//   - fast: a connection whose messages so far were small (at most a
//     sixteenth of the largest allowed) reads its next with room for twice
//     the largest it sent lately, and a new connection with 64 KiB, without
//     waiting behind anyone (a client sending small requests is not held up
//     by a burst of large ones), on kMaxFastReads slots for known
//     connections and kMaxNewReads for new ones;
//   - room: any other read needs room for a message of the largest size
//     allowed (`room_bytes`, at most half the budget), and waits in line
//     for it, first come first served, holding no message: HTTP/2 flow
//     control keeps its bytes with the client (the server keeps each
//     stream's window small: --grpc-bdp-probe). The caller bounds the wait
//     (a unary call is refused after a moment, RESOURCE_EXHAUSTED, unread;
//     a stream waits on), and past `max_waiting` in line a call is refused
//     at once. Rooms of reads not yet finished take at most the budget less
//     one room, so a message that has come in always finds the rest.
// The room of a small or fast read is counted in the budget but never
// refused, as it is bounded by the slots. Either way the room is shrunk to
// the message's size once it is in (or charged in full, or refused, when
// the message grew past its room), and becomes the call's share.
//
// Reads end. Every admitted read has a deadline (Ticket::deadline): a
// small read kSmallReadTimeout; a fast read holds its slot kFastReadTenure,
// after which it must become a room read (Overstay) or is refused; a room
// read gets `grace` plus its room at `min_rate`. A read past its deadline
// is refused (Overdue) and its room and slot go back: a client trickling
// one byte a second holds nothing for long. One address (the peer's host,
// whatever its port) has at most `max_reads_per_address` reads unfinished,
// and at most half of the rooms while another address waits for one (a
// read that overstayed its fast slot, always).
//
// Open streams are the exception: a stream waits for its next message for
// as long as its client likes, so its read (AskForStream) takes no slot and
// has no deadline; it holds 64 KiB, and a larger message is charged in
// full or refused once it is in.
//
// What is read at once is thus at most the budget, plus the small and fast
// lanes' rooms, plus at most kMaxSmallReads + kMaxFastReads + kMaxNewReads
// messages that grew past their room (a small method's message larger than
// its limit is refused once read, unparsed), plus one message per open
// stream that grows past its room at the same moment.
//
// Waiters ask again on their own (the front end's calls poll on a short
// alarm on their own completion queue). A read that waits for a slot may
// also leave a wake function: when a read ends (a slot, or a place among
// its address's reads, comes free), the gate calls the wake of the
// longest-waiting slot waiter not woken since it last asked, once, outside
// its lock, so the waiter asks again at once instead of at its next poll
// (at 64 streams of one connection, polling alone left reads waiting up to
// 30 ms for slots freed microseconds after they asked). A wake only hurries
// an ask: one that is lost, or that finds the slot taken, leaves the
// waiter to its poll.
//
// Threading: every method may be called from any thread; one lock.
// Ownership: waiters are identified by address; one must Leave (or be
// admitted) before it is destroyed. The budget must outlive the gate, and
// tickets must not outlive it.

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
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
  using Clock = std::chrono::steady_clock;

  // Fast-lane reads at once, at most: of known connections, of new ones.
  static constexpr int kMaxFastReads = 8;
  static constexpr int kMaxNewReads = 4;
  // Small methods' reads at once, and what makes a method small.
  static constexpr int kMaxSmallReads = 16;
  static constexpr uint64_t kSmallMethodBytes = 64 << 10;
  // How long a small read may take, and a fast read may hold its slot.
  static constexpr std::chrono::milliseconds kSmallReadTimeout{2000};
  static constexpr std::chrono::milliseconds kFastReadTenure{100};
  // Calls waiting for a slot at once, at most (each asks again on a timer);
  // past it a unary call is refused at once.
  static constexpr size_t kMaxSlotWaiters = 512;
  // Connections whose history is kept (the least recently seen go first).
  static constexpr size_t kMaxRemembered = 4096;

  struct Options {
    // The largest message any read may bring (--max-receive-bytes).
    uint64_t max_message_bytes = 64 << 20;
    // Calls in line at most.
    size_t max_waiting = 4096;
    // A room read's deadline: `grace` plus its room at `min_rate` bytes a
    // second (--min-receive-rate).
    uint64_t min_rate = 1 << 20;
    std::chrono::milliseconds grace{5000};
    // Unfinished reads of one address at most (--max-reads-per-address).
    int max_reads_per_address = 64;
    // The clock deadlines are set by (tests replace it).
    std::function<Clock::time_point()> now = [] { return Clock::now(); };
  };

  // `budget` null or without a limit: every read is admitted at once, with
  // no deadline but the small lane's.
  IntakeGate(InflightBudget* budget, Options options);
  IntakeGate(const IntakeGate&) = delete;
  IntakeGate& operator=(const IntakeGate&) = delete;

  enum class Turn {
    kAdmitted,  // the ticket holds the read's share of the budget: read now
    kWait,      // in line (or first, still without room): ask again soon
    kRefused,   // the line is full: answer RESOURCE_EXHAUSTED unread
  };
  enum class Lane { kNone, kSmall, kFast, kNew, kRoom, kStream };

  // One read's place at the gate: its lane, room and deadline. Move-only;
  // its slot and its place among its address's reads are given back when
  // Read is called or the ticket goes.
  class Ticket {
   public:
    Ticket() = default;
    Ticket(Ticket&& other) noexcept { *this = std::move(other); }
    Ticket& operator=(Ticket&& other) noexcept;
    ~Ticket() { EndRead(); }
    InflightBudget::Reservation& room() { return room_; }
    Lane lane() const { return lane_; }
    // When the read must have finished, or ask Overstay; max() for none.
    Clock::time_point deadline() const { return deadline_; }

   private:
    friend class IntakeGate;
    void EndRead();
    InflightBudget::Reservation room_;
    IntakeGate* gate_ = nullptr;  // set while the read is unfinished
    Lane lane_ = Lane::kNone;
    std::string address_;
    Clock::time_point deadline_ = Clock::time_point::max();
    uint64_t pending_ = 0;  // a room read's room among the unfinished reads' rooms
  };

  // Asks a waiter for a slot to ask again now (Ask). Called on any
  // thread, outside the gate's lock, at most once per ask of the waiter's;
  // it must not throw, and should only arrange for the ask (the caller
  // frees a slot and must not be held up).
  using Wake = std::function<void()>;

  // A call from `peer` (its connection, as gRPC names it:
  // "ipv4:127.0.0.1:40512") that wants to read one message of at most
  // `max_bytes` asks for its turn, and asks again while told to wait: it
  // is admitted by the small or fast lane when a slot is free, or, first
  // in line (or with nobody in line), when the budget has room. A read of
  // the room lane joins the line on its first ask. `wake` (optional) is
  // kept while the call waits for a slot, and called when one may be free.
  Turn Ask(const void* waiter, absl::string_view peer, uint64_t max_bytes, Ticket* ticket, const Wake& wake = nullptr);
  // An open stream (ModelStreamInfer) that waits for its next message:
  // admitted at once, with 64 KiB held in the budget (idle streams must not
  // fill it), and no deadline, for a stream may wait idle as long as its
  // client likes. A next message larger than that is charged in full once
  // it is in, or refused (Read).
  void AskForStream(Ticket* ticket);
  // A waiter gives up its place (it waited too long, or its client left).
  void Leave(const void* waiter);
  // The read passed its deadline unfinished. A fast read whose room the
  // budget can now take as a room read's goes on as one (true, with a new
  // deadline); any other is to be refused with Overdue (false), and its
  // ticket dropped.
  bool Overstay(Ticket* ticket);
  // The message came in: `bytes` long, from `peer`. Shrinks the ticket's
  // room to it (or charges what it has over, when it grew past its room:
  // the budget's refusal then), gives back its slot, and notes the size in
  // the connection's history. The room then is the call's share.
  absl::Status Read(absl::string_view peer, uint64_t bytes, Ticket* ticket);

  // What a room read reserves: the largest message allowed, or half the
  // budget when that is smaller (a larger room would leave no room for a
  // message that has come in).
  uint64_t room_bytes() const { return room_bytes_; }
  size_t waiting() const;
  // Reads admitted and not finished (all lanes).
  int unfinished() const;
  // Whether `peer`'s next read of at most `max_bytes` takes the small or
  // fast lane: it then waits for a slot only, never for room in the
  // budget, so the caller need not bound its wait as it bounds a wait for
  // room.
  bool WaitsForASlotOnly(absl::string_view peer, uint64_t max_bytes) const;
  // The refusal for a call that found no room in time, or a full line.
  absl::Status Refusal() const;
  // The refusal for a read that passed its deadline.
  absl::Status Overdue(const Ticket& ticket) const;

  // The host part of a gRPC peer name ("ipv6:[::1]:50051" -> "ipv6:[::1]").
  static absl::string_view AddressOf(absl::string_view peer);

 private:
  // Whether a connection whose largest recent message was `largest` sends
  // small messages (the fast lane's).
  bool Small(uint64_t largest) const;
  // The lane `peer`'s read of at most `max_bytes` takes.
  Lane LaneFor(absl::string_view peer, uint64_t max_bytes) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Admits by the small or fast lane when the read takes one and a slot is
  // free.
  bool TrySlot(Lane lane, absl::string_view peer, uint64_t max_bytes, Ticket* ticket)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Reserves a room read's room, when the rooms of unfinished reads, the
  // address's share of them and the budget allow.
  bool TryRoom(const std::string& address, Ticket* ticket) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Counts `ticket` (lane kRoom) among the unfinished reads' rooms, and
  // sets its deadline: the grace plus its room at the minimum rate.
  void CountRoom(const std::string& address, Ticket* ticket) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Whether the address may start one more read.
  bool AddressHasRoom(const std::string& address) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Marks `ticket` admitted in `lane` for `address`.
  void Admit(Lane lane, const std::string& address, Ticket* ticket) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Whether a room read of `address` cannot start now whatever the line:
  // the address has as many reads, or as much room, as it may.
  bool AddressBlocked(const std::string& address) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Whether one more room would take `address` past half the rooms.
  bool OverShare(const std::string& address) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Whether waiters of other addresses are in line.
  bool OthersWait(const std::string& address) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Ends an unfinished read's slot and place (Ticket::EndRead), then wakes
  // a slot waiter (outside the lock).
  void End(Ticket* ticket) ABSL_LOCKS_EXCLUDED(mu_);
  void EndLocked(Ticket* ticket) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  InflightBudget* const budget_;
  const Options options_;
  const uint64_t room_bytes_;
  // The rooms unfinished room reads may hold together.
  const uint64_t pending_cap_;
  mutable Mutex mu_;
  // Room reads waiting, in order, and where each is.
  struct Waiter {
    const void* waiter;
    std::string address;
  };
  std::list<Waiter> line_ ABSL_GUARDED_BY(mu_);
  std::unordered_map<const void*, std::list<Waiter>::iterator> places_ ABSL_GUARDED_BY(mu_);
  std::unordered_map<std::string, size_t> waiting_by_address_ ABSL_GUARDED_BY(mu_);
  // Calls waiting for a slot (not in the line), longest waiting first, and
  // where each is.
  struct SlotWaiter {
    const void* waiter;
    Wake wake;
    bool woken = false;  // woken since it last asked
  };
  std::list<SlotWaiter> slot_waiters_ ABSL_GUARDED_BY(mu_);
  std::unordered_map<const void*, std::list<SlotWaiter>::iterator> slot_places_ ABSL_GUARDED_BY(mu_);
  void RemoveSlotWaiter(const void* waiter) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The wake of the longest-waiting slot waiter not woken since it last
  // asked (marked woken), or none: for a read that just ended.
  Wake NextToWake() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void RemoveFromLine(std::unordered_map<const void*, std::list<Waiter>::iterator>::iterator place)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  int small_reads_ ABSL_GUARDED_BY(mu_) = 0;
  int fast_reads_ ABSL_GUARDED_BY(mu_) = 0;
  int new_reads_ ABSL_GUARDED_BY(mu_) = 0;
  int room_reads_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t pending_room_ ABSL_GUARDED_BY(mu_) = 0;
  // Per address: unfinished reads, and the rooms of its room reads.
  struct AddressReads {
    int reads = 0;
    int small = 0;  // of them, small methods' reads
    uint64_t room = 0;
  };
  std::unordered_map<std::string, AddressReads> addresses_ ABSL_GUARDED_BY(mu_);
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
