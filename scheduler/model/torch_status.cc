#include "scheduler/model/torch_status.h"

#include <c10/util/Exception.h>

#include "absl/strings/str_cat.h"
#include "devices/device_failure.h"
#include "devices/torch_probe.h"

namespace infergate {

// LibTorch messages carry a C++ stack trace, and interpreter errors a
// TorchScript traceback ending in the model's own "Kind: message" line; the
// client gets just the message.
std::string ConciseTorchMessage(const std::string& s) {
  std::string out = s.substr(0, s.find("\nException raised from"));
  while (!out.empty() && (out.back() == '\n' || out.back() == ' ')) out.pop_back();
  if (out.find("The following operation failed in the TorchScript interpreter") != std::string::npos) {
    size_t nl = out.rfind('\n');
    if (nl != std::string::npos) out = out.substr(nl + 1);
  }
  return out;
}

// Turns what LibTorch threw into a status; the failures a scheduler can act
// on are tagged so it need not parse messages.
absl::Status StatusFromTorchException(const std::exception& e, const std::string& prefix) {
  std::string msg = absl::StrCat(prefix, ConciseTorchMessage(e.what()));
  if (dynamic_cast<const c10::OutOfMemoryError*>(&e)) {
    return WithDeviceFailure(absl::ResourceExhaustedError(msg), DeviceFailure::kOutOfMemory, "");
  }
  if (dynamic_cast<const c10::NotImplementedError*>(&e)) {
    std::string op = UnsupportedOpFromMessage(e.what());
    if (!op.empty()) return WithDeviceFailure(absl::InternalError(msg), DeviceFailure::kUnsupportedOp, op);
  }
  if (dynamic_cast<const c10::TypeError*>(&e) && std::string(e.what()).find("float64") != std::string::npos) {
    return WithDeviceFailure(absl::InternalError(msg), DeviceFailure::kDtype, "float64");
  }
  // The device runtime itself failed (as opposed to the model's own code).
  std::string what = e.what();
  if (what.rfind("CUDA error", 0) == 0 || what.rfind("MPS error", 0) == 0 ||
      what.find("\nCUDA error") != std::string::npos) {
    return WithDeviceFailure(absl::UnavailableError(msg), DeviceFailure::kDeviceError, "");
  }
  return absl::InternalError(msg);
}

}  // namespace infergate
