#pragma once
// LibTorch's own run-time answers about accelerators; the only devices/ file
// that needs LibTorch beyond c10 scalar types.

#include <string>

namespace infergate {

struct TorchAccelerators {
  int cuda_device_count = 0;
  bool cuda_compiled_in = false;
  bool is_rocm = false;  // a HIP build presents its GPUs as cuda
  bool mps_compiled_in = false;
  bool mps_available = false;
};

TorchAccelerators ProbeTorchAccelerators();
std::string TorchVersion();

}  // namespace infergate
