#pragma once
// What a .pt2 package's compiled library asks of the process that opens
// it, checked before it is opened: an AOTInductor library is native code
// built against one LibTorch, and opening one built against another can
// end the process rather than fail the load.
//
// Two things are read from the library's ELF dynamic section and symbol
// table (its file, not loaded):
// - the LibTorch libraries it links (NEEDED entries named libtorch* or
//   libc10*, which AOTInductor adds unless the package was exported with
//   aot_inductor.link_libtorch=False): each must be one this process has
//   loaded already, under that name. One that is not would bring a second
//   LibTorch into the process (a package exported beside Debian's
//   libtorch.so.2.6 and opened by a server on PyPI's libtorch.so aborted
//   it);
// - the AOTInductor runtime functions it calls (undefined aoti_* symbols):
//   each must be one this server's LibTorch defines; a package from a newer
//   PyTorch calls functions an older LibTorch lacks.
// A refusal names the library, what it asks for, and this server's
// LibTorch version. A package records no PyTorch version of its own, so
// the message says which functions or libraries show it came from another.
//
// Thread-safety: a free function; the set of loaded LibTorch libraries is
// read once per process (under a static's initialisation lock).

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace infergate {

// The dynamic linking facts of an ELF shared library, read from its file.
struct ElfLinkage {
  std::string soname;                           // DT_SONAME, "" when none
  std::vector<std::string> needed;              // DT_NEEDED, in order
  std::vector<std::string> undefined_names;     // undefined, non-weak dynamic symbols
  bool marked_nodelete = false;                 // DF_1_NODELETE
  std::vector<std::string> bound_unique_names;  // GNU unique symbols it defines and its relocations name
};

// INVALID_ARGUMENT naming the fault for a file that is not a 64-bit
// little-endian ELF shared library or whose tables point outside it;
// NOT_FOUND when it cannot be opened.
absl::StatusOr<ElfLinkage> ReadElfLinkage(const std::string& path);

// The linkage of `library` (a compiled model's .so) when this process can
// open it; FAILED_PRECONDITION saying why not (see above). `what` names it
// in the message ("variant 'cpu'"). A file whose tables cannot be read is
// left to the loader, which reports its own error: its linkage is then
// empty.
absl::StatusOr<ElfLinkage> CheckAotiLibraryFitsThisLibTorch(const std::string& library, const std::string& what);

// Whether dlclose would leave `linkage`'s library mapped until the process
// exits, once this process has opened it: it is marked DF_1_NODELETE, or
// binds a GNU unique symbol of its own that the process does not already
// define (g++ makes inline variables and some template statics such, and
// glibc then never unloads the library). Libraries PyTorch 2.15's
// AOTInductor writes are such (its inductor_cpu_integer_div_error_flag);
// 2.6's are not.
bool StaysLoadedOnceOpened(const ElfLinkage& linkage);

// The pure part of the check, for tests: `linkage` against the sonames of
// the LibTorch libraries loaded and a lookup of runtime functions.
absl::Status CheckAotiLinkage(const ElfLinkage& linkage, const std::vector<std::string>& loaded_libtorch_names,
                              bool (*defined)(const std::string& name), const std::string& what,
                              const std::string& server_version);

}  // namespace infergate
