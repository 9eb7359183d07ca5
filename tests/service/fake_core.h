#pragma once
// FakeCore: the core's InferBackend for front-end tests, in process.
//
// Threading: any thread may submit, answer or cancel; the done callbacks
// run on the thread that answers, with no lock of the fake's held.

#include <cstddef>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <vector>

#include "absl/status/statusor.h"
#include "service/call/call_environment.h"

namespace infergate {

// A core whose requests wait until the test answers them. Cancel answers a
// waiting request CANCELLED on the calling thread, as the real core does.
class FakeCore {
 public:
  struct Submitted {
    InferenceRequest request;
    InferCallback done;
    bool answered = false;
    int cancels = 0;
  };

  class Handle final : public RequestHandle {
   public:
    Handle(FakeCore* core, size_t index) : core_(core), index_(index) {}
    void Cancel() override { core_->Cancel(index_); }

   private:
    FakeCore* core_;
    size_t index_;
  };

  InferBackend Backend() {
    InferBackend b;
    b.infer = [this](InferenceRequest request, InferCallback done) -> std::shared_ptr<RequestHandle> {
      size_t index;
      {
        std::lock_guard<std::mutex> lock(mu_);
        index = submitted_.size();
        submitted_.push_back({std::move(request), std::move(done)});
      }
      if (throw_at_submit) throw std::runtime_error("the core broke");
      if (!refuse_at_submit.ok()) Answer(index, refuse_at_submit);
      return std::make_shared<Handle>(this, index);
    };
    b.known_model = [](absl::string_view name) { return name == "known"; };
    return b;
  }

  // Answers request `index` once; later answers are ignored (the real core
  // answers each request exactly once).
  void Answer(size_t index, absl::StatusOr<InferenceResult> result) {
    InferCallback done;
    {
      std::lock_guard<std::mutex> lock(mu_);
      Submitted& s = submitted_.at(index);
      if (s.answered) return;
      s.answered = true;
      done = std::move(s.done);  // the real core drops the request once answered
    }
    done(std::move(result), RequestLabels{"known", "cpu"});
  }
  void Cancel(size_t index) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      submitted_.at(index).cancels++;
    }
    Answer(index, absl::CancelledError("cancelled by the client"));
  }
  size_t size() {
    std::lock_guard<std::mutex> lock(mu_);
    return submitted_.size();
  }
  Submitted& at(size_t index) {
    std::lock_guard<std::mutex> lock(mu_);
    return submitted_.at(index);
  }

  absl::Status refuse_at_submit;  // non-OK: answered before Infer returns
  // Submissions throw (after being recorded): a core that broke.
  bool throw_at_submit = false;

 private:
  std::mutex mu_;
  std::vector<Submitted> submitted_;
};

}  // namespace infergate
