#pragma once
// Test doubles for the core: a servable that needs no model file, and a
// repository folder written on the fly. The servable answers y = 2 * x for
// its first input; a script decides, per run and device, whether the run
// fails (with a device-failure payload) or waits on a gate first, so tests
// can stage races and failures the real backends produce at random.

#include <atomic>
#include <condition_variable>
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "absl/status/status.h"
#include "devices/device_info.h"
#include "scheduler/model/inference_types.h"
#include "scheduler/model/servable.h"

namespace infergate::testing {

// Blocks runs until opened; counts who is waiting. Thread-safe.
class Gate {
 public:
  void Wait();
  void Open();
  // Waits until `n` runs are blocked here (or 10 s passed); true if so.
  bool AwaitWaiters(int n);

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool open_ = false;
  int waiting_ = 0;
};

// What fake runs do. Set before traffic; the counters are read by tests.
struct FakeScript {
  // Called at the start of every run, on the worker, with the device it runs
  // on; a non-OK status fails the run. Empty: every run succeeds.
  std::function<absl::Status(const DeviceId&)> on_run;
  std::atomic<int> loads{0};
  std::atomic<int> runs_on_cpu{0};
  std::atomic<int> runs_elsewhere{0};
};

// A loader for InferenceCore that makes fake servables
// following `script`, with the signature the model's config declares.
ServableLoader FakeLoader(std::shared_ptr<FakeScript> script);

// A failure as a device would raise it (see devices/device_failure.h).
absl::Status OutOfMemory(const DeviceId& device);
absl::Status UnsupportedOp(const std::string& op);

// A repository folder under the temp dir; removed by the destructor. Each
// model gets config.pbtxt and an empty version-1 model.pt (fakes never read it).
class TempRepository {
 public:
  explicit TempRepository(const std::map<std::string, std::string>& configs);
  ~TempRepository();
  const std::string& root() const { return root_; }

 private:
  std::string root_;
};

// Collects the one answer a request gets; later answers are counted, not
// kept, so a test can check that each request was answered exactly once.
struct Answer {
  std::promise<absl::StatusOr<InferenceResult>> promise;
  std::shared_future<absl::StatusOr<InferenceResult>> future = promise.get_future().share();
  std::atomic<int> calls{0};
  InferCallback callback() {
    return [this](absl::StatusOr<InferenceResult> result, const RequestLabels&) {
      if (calls.fetch_add(1) == 0) promise.set_value(std::move(result));
    };
  }
  bool ready_within(std::chrono::milliseconds ms) const { return future.wait_for(ms) == std::future_status::ready; }
};

// cpu plus the given accelerators, as discovery would list them.
std::vector<DeviceInfo> FakeDevices(bool cuda, bool mps);

}  // namespace infergate::testing
