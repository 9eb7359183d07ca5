#pragma once
// What LibTorch threw, as a status: the message without LibTorch's C++
// stack trace or TorchScript traceback, and the failures the scheduler
// acts on (out of memory, an op or dtype the device lacks, the device
// itself failing) tagged with a DeviceFailure so nothing parses messages.
// Pure functions; thread-safe.

#include <exception>
#include <string>

#include "absl/status/status.h"

namespace infergate {

// LibTorch's message with the stack trace it appends left out; for an
// interpreter error, the model's own "Kind: message" line.
std::string ConciseTorchMessage(const std::string& message);

// `prefix` + the concise message, tagged as above; INTERNAL otherwise.
absl::Status StatusFromTorchException(const std::exception& e, const std::string& prefix);

}  // namespace infergate
