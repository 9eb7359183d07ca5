#pragma once
// What one model copy takes on a device: the bytes its parameters and
// buffers hold while it is resident, and the activation peak one run adds
// on top. The cache admits a model only when both fit in the device's
// budget beside what is already there.

#include <cstdint>
#include <string>

namespace infergate {

struct Footprint {
  uint64_t parameter_bytes = 0;
  uint64_t activation_bytes = 0;
  // Where the figures come from, for logs and messages: "learned from an
  // earlier load", "estimated from the model file", "measured".
  std::string source;

  uint64_t total() const { return parameter_bytes + activation_bytes; }
};

}  // namespace infergate
