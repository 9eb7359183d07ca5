#pragma once
// The closed loop both load modes share: keep `concurrency` asynchronous
// calls outstanding on one completion queue until `end`, hand each finished
// call (its tag) to `finished` with its completion time, and start a new
// one while time is left. `start` begins a call whose Finish tag is a
// heap-allocated Call; `finished` takes ownership of it. GrpcCodeName: the
// name a failed call is tallied under.

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <memory>
#include <string>

#include "absl/status/status.h"

namespace infergate::tools {

// gRPC and absl share status code numbers and names.
inline std::string GrpcCodeName(grpc::StatusCode code) {
  std::string name = absl::StatusCodeToString(static_cast<absl::StatusCode>(code));
  return name.empty() ? "OTHER" : name;
}

template <typename Call, typename Start, typename Finished>
void RunClosedLoop(grpc::CompletionQueue& cq, int concurrency, std::chrono::steady_clock::time_point end, Start start,
                   Finished finished) {
  int outstanding = 0;
  for (int i = 0; i < concurrency; ++i, ++outstanding) start();
  void* tag = nullptr;
  bool ok = false;
  while (outstanding > 0 && cq.Next(&tag, &ok)) {
    --outstanding;
    std::chrono::steady_clock::time_point now = std::chrono::steady_clock::now();
    finished(std::unique_ptr<Call>(static_cast<Call*>(tag)), now);
    if (now < end) {
      start();
      ++outstanding;
    }
  }
  cq.Shutdown();
  while (cq.Next(&tag, &ok)) {
  }
}

}  // namespace infergate::tools
