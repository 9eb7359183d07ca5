#pragma once
// What a front end keeps of a request it submitted to the core: a way to
// cancel it. The request itself (queue, route, batch) stays inside the core.

namespace infergate {

class RequestHandle {
 public:
  virtual ~RequestHandle() = default;
  // The client went away. A request still queued leaves its queue and is
  // answered CANCELLED; one already running finishes and its answer is
  // dropped by the front end. Thread-safe; any number of calls.
  // A queued request is answered on the calling thread, before Cancel
  // returns: never call it while holding a lock the answer's callback takes.
  virtual void Cancel() = 0;
};

}  // namespace infergate
