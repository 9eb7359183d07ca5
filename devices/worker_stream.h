#pragma once
// A device worker's own stream. CUDA (and other accelerators' backends)
// queue work on the calling thread's current stream, the device's default
// stream unless set, so several workers on one GPU would still run one
// after another. UseOwnStream gives the calling thread a stream of its own
// from LibTorch's pool, through the device-generic guard interface (no
// CUDA headers), so each worker's batches can overlap with the others'.
//
// Called once, at the start of a worker thread; the stream stays the
// thread's current one for its life. A CPU or simulated device has no
// streams: nothing is done. A backend without a stream pool (or not built
// into this LibTorch) leaves the thread on the default stream and says so.

#include "absl/status/status.h"
#include "devices/device_info.h"

namespace infergate {

absl::Status UseOwnStream(const DeviceInfo& device);

}  // namespace infergate
