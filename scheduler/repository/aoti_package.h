#pragma once
// What an AOTInductor package (.pt2, made by torch._inductor's
// aoti_compile_and_package or package_aoti) holds: its compiled variants,
// each a model name under data/aotinductor/ with the device kind it was
// compiled for (the AOTI_DEVICE_KEY of its metadata), read from the zip's
// directory and the small metadata entries, without loading anything.
// PyTorch 2.6 writes entries from the archive's root ("data/aotinductor/
// model/..."); 2.7 and later put them all under one top folder named after
// the archive ("model/data/aotinductor/model/..."): both are read.
//
// Which variant serves a device (PickAotiVariant):
//   a real device       the variant compiled for its kind (one named after
//                       the kind first, e.g. "cuda", then any)
//   a simulated device  the variant named after its kind ("cuda", "mps"),
//                       which must be compiled for the CPU: a simulated
//                       device computes on the CPU, so it runs CPU code
//                       standing in for that kind's build
//   none                NOT_FOUND: the request falls back
//                       ("no_compiled_variant:<kind>")
//
// Pure functions; thread-safe.

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/zip_listing.h"
#include "devices/device_info.h"

namespace infergate {

struct AotiVariant {
  std::string name;            // the model name inside the package ("model", "cpu", ...)
  std::string device;          // the kind it was compiled for: "cpu", "cuda", ...
  uint64_t library_bytes = 0;  // its compiled library, weights included
  std::string signature;       // its "infergate.config" metadata ("" if none; aoti_signature.h)
  ZipEntry source;             // the zip entry of its generated C++ (name "" if the package has none)
  std::string folder;          // its files' folder in the zip: [<top>/]data/aotinductor/<name>/
  // Where its weights are kept outside the compiled library (a .blob file
  // beside it, or the package's data/constants/, which newer PyTorch writes
  // when asked to keep them out of the library); "" when they are in it.
  // LibTorch 2.6 reads only weights compiled into the library.
  std::string weights_outside;
};

// The variants in the package at `path`; INVALID_ARGUMENT for a file that
// is not a readable AOTInductor package, naming what is wrong.
absl::StatusOr<std::vector<AotiVariant>> ReadAotiVariants(const std::string& path);

// How many threads a CPU variant's parallel loops run on, each call: the
// largest N of the `#pragma omp parallel num_threads(N)` in its generated
// C++, which Inductor writes from the compiling process's
// torch.get_num_threads(). 0 when the loops are serial (compiled with one
// thread) or the package holds no source; an error when its source cannot
// be read.
absl::StatusOr<int> CompiledLoopThreads(const std::string& path, const AotiVariant& variant);
// The same, over the source text. Pure.
int MaxLoopThreads(absl::string_view source);

// The variant that serves `device`, per the rules above; NOT_FOUND naming
// the device and the variants there are.
absl::StatusOr<AotiVariant> PickAotiVariant(const std::vector<AotiVariant>& variants, const DeviceInfo& device);

}  // namespace infergate
