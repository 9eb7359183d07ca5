#pragma once
// What this server answers for the Open Inference Protocol extensions it
// does not serve as Triton does, so that a Triton client calling them gets
// a clear answer instead of a bare UNIMPLEMENTED:
//
//   shared memory (system and CUDA)  no region is ever registered: status
//       lists none (NOT_FOUND for a named one), register is refused with
//       UNIMPLEMENTED and the reason, unregister of every region is OK and
//       of a named one NOT_FOUND
//   trace settings                   UNAVAILABLE: requests are not traced
//   log settings                     served: read, and change the level at
//       run time (log_settings.h)
//
// Shared by the gRPC and REST front ends, which check the caller's token
// first (log changes need the admin token).
//
// Threading: every function may be called from any thread.

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "service/open_inference/log_settings.h"

namespace infergate {

enum class SharedMemoryKind { kSystem, kCuda };

absl::Status SharedMemoryStatus(SharedMemoryKind kind, absl::string_view name);
absl::Status SharedMemoryRegister(SharedMemoryKind kind, absl::string_view name);
absl::Status SharedMemoryUnregister(SharedMemoryKind kind, absl::string_view name);

// Applies `changes` (none: only reads) to the process's log level and
// returns every setting as it now is. One change at a time.
absl::StatusOr<LogSettings> ChangeLogSettings(const LogSettings& changes);

}  // namespace infergate
