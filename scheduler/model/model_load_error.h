#pragma once
// What a client and an operator are told when LibTorch cannot load a model
// file: a pure function of the model, the file and LibTorch's message.
//
// The failures that mean "this file needs a newer LibTorch" (an op this
// LibTorch lacks, a file format newer than it reads) are FAILED_PRECONDITION
// naming the op or the version and the server's LibTorch version, with the
// TorchScript source and C++ stack that LibTorch adds left out. Anything
// else (a corrupt archive, a file that is not TorchScript) is
// FAILED_PRECONDITION with LibTorch's first line. Never INTERNAL: the server
// is fine, the file is not servable by it.

#include <string>

#include "absl/status/status.h"

namespace infergate {

absl::Status ModelLoadError(const std::string& model, const std::string& path, const std::string& libtorch_message,
                            const std::string& libtorch_version);

}  // namespace infergate
