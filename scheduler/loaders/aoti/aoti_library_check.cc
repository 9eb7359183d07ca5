#include "scheduler/loaders/aoti/aoti_library_check.h"

#include <dlfcn.h>
#include <elf.h>
#include <fcntl.h>
#include <link.h>
#include <sys/stat.h>
#include <torch/version.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <optional>
#include <set>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"

namespace infergate {
namespace {

// No dynamic section or symbol table of a real library comes near this;
// a larger one is a damaged (or hostile) file, not read into memory.
constexpr uint64_t kMaxTableBytes = 64ull << 20;

bool IsLibTorchName(const std::string& name) {
  return absl::StartsWith(name, "libtorch") || absl::StartsWith(name, "libc10");
}

std::string BaseName(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

// Reads [offset, offset + size) of `fd`, a file of `file_size` bytes.
absl::StatusOr<std::string> ReadRange(int fd, uint64_t file_size, uint64_t offset, uint64_t size, const char* what) {
  if (size > kMaxTableBytes) return absl::InvalidArgumentError(absl::StrCat(what, ": ", size, " bytes is implausible"));
  if (offset > file_size || size > file_size - offset) {
    return absl::InvalidArgumentError(absl::StrCat(what, " lies outside the file"));
  }
  std::string bytes(size, '\0');
  size_t done = 0;
  while (done < size) {
    const ssize_t n = pread(fd, bytes.data() + done, size - done, static_cast<off_t>(offset + done));
    if (n <= 0) return absl::InvalidArgumentError(absl::StrCat(what, ": cannot be read"));
    done += static_cast<size_t>(n);
  }
  return bytes;
}

// The NUL-terminated string at `offset` of a string table, or nullopt.
std::optional<std::string> StringAt(const std::string& table, uint64_t offset) {
  if (offset >= table.size()) return std::nullopt;
  const size_t end = table.find('\0', offset);
  if (end == std::string::npos) return std::nullopt;
  return table.substr(offset, end - offset);
}

// This process's LibTorch libraries: for each loaded object whose file is
// libtorch*/libc10*, its soname and file name.
std::vector<std::string> LoadedLibTorchNames() {
  std::set<std::string> paths;
  dl_iterate_phdr(
      [](dl_phdr_info* info, size_t, void* out) {
        const std::string path = info->dlpi_name ? info->dlpi_name : "";
        if (!path.empty() && IsLibTorchName(BaseName(path))) static_cast<std::set<std::string>*>(out)->insert(path);
        return 0;
      },
      &paths);
  std::set<std::string> names;
  for (const std::string& path : paths) {
    names.insert(BaseName(path));
    if (absl::StatusOr<ElfLinkage> linkage = ReadElfLinkage(path); linkage.ok() && !linkage->soname.empty()) {
      names.insert(linkage->soname);
    }
  }
  return {names.begin(), names.end()};
}

bool DefinedInThisProcess(const std::string& name) { return dlsym(RTLD_DEFAULT, name.c_str()) != nullptr; }

}  // namespace

absl::StatusOr<ElfLinkage> ReadElfLinkage(const std::string& path) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return absl::NotFoundError(absl::StrCat(path, ": ", std::strerror(errno)));
  absl::Cleanup close_fd = [fd] { close(fd); };
  struct stat st{};
  if (fstat(fd, &st) != 0) return absl::NotFoundError(absl::StrCat(path, ": ", std::strerror(errno)));
  const uint64_t file_size = static_cast<uint64_t>(st.st_size);

  absl::StatusOr<std::string> header = ReadRange(fd, file_size, 0, sizeof(Elf64_Ehdr), "the ELF header");
  if (!header.ok()) return absl::InvalidArgumentError(absl::StrCat(path, ": not an ELF file"));
  Elf64_Ehdr eh;
  std::memcpy(&eh, header->data(), sizeof eh);
  if (std::memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0)
    return absl::InvalidArgumentError(absl::StrCat(path, ": not an ELF file"));
  if (eh.e_ident[EI_CLASS] != ELFCLASS64 || eh.e_ident[EI_DATA] != ELFDATA2LSB) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": not a 64-bit little-endian ELF file"));
  }
  if (eh.e_shentsize != sizeof(Elf64_Shdr) || eh.e_shnum == 0) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": no section headers"));
  }
  absl::StatusOr<std::string> table =
      ReadRange(fd, file_size, eh.e_shoff, uint64_t{eh.e_shnum} * sizeof(Elf64_Shdr), "the section headers");
  if (!table.ok()) return absl::InvalidArgumentError(absl::StrCat(path, ": ", table.status().message()));
  std::vector<Elf64_Shdr> sections(eh.e_shnum);
  std::memcpy(sections.data(), table->data(), table->size());

  auto section_bytes = [&](size_t index, const char* what) -> absl::StatusOr<std::string> {
    if (index >= sections.size()) return absl::InvalidArgumentError(absl::StrCat(what, ": no such section"));
    if (sections[index].sh_type == SHT_NOBITS) return std::string();
    return ReadRange(fd, file_size, sections[index].sh_offset, sections[index].sh_size, what);
  };
  ElfLinkage linkage;
  std::map<uint64_t, std::string> unique_symbols;  // by index in the dynamic symbol table
  size_t dynsym_index = sections.size();
  for (size_t i = 0; i < sections.size(); ++i) {
    if (sections[i].sh_type == SHT_DYNSYM) dynsym_index = i;
    const Elf64_Shdr& s = sections[i];
    if (s.sh_type != SHT_DYNAMIC && s.sh_type != SHT_DYNSYM) continue;
    const char* what = s.sh_type == SHT_DYNAMIC ? "the dynamic section" : "the dynamic symbol table";
    absl::StatusOr<std::string> entries = section_bytes(i, what);
    absl::StatusOr<std::string> strings = section_bytes(s.sh_link, "the dynamic string table");
    if (!entries.ok()) return absl::InvalidArgumentError(absl::StrCat(path, ": ", entries.status().message()));
    if (!strings.ok()) return absl::InvalidArgumentError(absl::StrCat(path, ": ", strings.status().message()));
    if (s.sh_type == SHT_DYNAMIC) {
      for (size_t at = 0; at + sizeof(Elf64_Dyn) <= entries->size(); at += sizeof(Elf64_Dyn)) {
        Elf64_Dyn d;
        std::memcpy(&d, entries->data() + at, sizeof d);
        if (d.d_tag == DT_NULL) break;
        if (d.d_tag == DT_FLAGS_1 && (d.d_un.d_val & DF_1_NODELETE) != 0) linkage.marked_nodelete = true;
        if (d.d_tag != DT_NEEDED && d.d_tag != DT_SONAME) continue;
        std::optional<std::string> name = StringAt(*strings, d.d_un.d_val);
        if (!name) return absl::InvalidArgumentError(absl::StrCat(path, ": a dynamic entry names no string"));
        if (d.d_tag == DT_NEEDED) {
          linkage.needed.push_back(*std::move(name));
        } else {
          linkage.soname = *std::move(name);
        }
      }
    } else {
      for (size_t at = 0; at + sizeof(Elf64_Sym) <= entries->size(); at += sizeof(Elf64_Sym)) {
        Elf64_Sym sym;
        std::memcpy(&sym, entries->data() + at, sizeof sym);
        if (sym.st_shndx != SHN_UNDEF && ELF64_ST_BIND(sym.st_info) == STB_GNU_UNIQUE) {
          if (std::optional<std::string> name = StringAt(*strings, sym.st_name)) {
            unique_symbols.emplace(at / sizeof(Elf64_Sym), *std::move(name));
          }
        }
        if (sym.st_shndx != SHN_UNDEF || sym.st_name == 0 || ELF64_ST_BIND(sym.st_info) == STB_WEAK) continue;
        std::optional<std::string> name = StringAt(*strings, sym.st_name);
        if (!name) return absl::InvalidArgumentError(absl::StrCat(path, ": a symbol names no string"));
        linkage.undefined_names.push_back(*std::move(name));
      }
    }
  }
  // The GNU unique symbols it defines that its own relocations name.
  std::set<std::string> bound;
  for (size_t i = 0; i < sections.size() && !unique_symbols.empty(); ++i) {
    if (sections[i].sh_type != SHT_RELA || sections[i].sh_link != dynsym_index) continue;
    absl::StatusOr<std::string> relocations = section_bytes(i, "a relocation table");
    if (!relocations.ok()) return absl::InvalidArgumentError(absl::StrCat(path, ": ", relocations.status().message()));
    for (size_t at = 0; at + sizeof(Elf64_Rela) <= relocations->size(); at += sizeof(Elf64_Rela)) {
      Elf64_Rela r;
      std::memcpy(&r, relocations->data() + at, sizeof r);
      if (auto it = unique_symbols.find(ELF64_R_SYM(r.r_info)); it != unique_symbols.end()) bound.insert(it->second);
    }
  }
  linkage.bound_unique_names.assign(bound.begin(), bound.end());
  return linkage;
}

absl::Status CheckAotiLinkage(const ElfLinkage& linkage, const std::vector<std::string>& loaded_libtorch_names,
                              bool (*defined)(const std::string& name), const std::string& what,
                              const std::string& server_version) {
  std::vector<std::string> foreign;
  for (const std::string& needed : linkage.needed) {
    if (!IsLibTorchName(needed)) continue;
    if (std::find(loaded_libtorch_names.begin(), loaded_libtorch_names.end(), needed) == loaded_libtorch_names.end()) {
      foreign.push_back(needed);
    }
  }
  if (!foreign.empty()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "the compiled library of ", what, " links ", absl::StrJoin(foreign, ", "),
        ", a LibTorch other than this server's (LibTorch ", server_version, ", loaded as ",
        loaded_libtorch_names.empty() ? std::string("nothing") : absl::StrJoin(loaded_libtorch_names, ", "),
        "): opening it would bring a second LibTorch into the process. Export the package with PyTorch ",
        server_version,
        " where it is the only one installed, or with inductor_configs "
        "{\"aot_inductor.link_libtorch\": False}"));
  }
  std::vector<std::string> missing;
  for (const std::string& name : linkage.undefined_names) {
    if (absl::StartsWith(name, "aoti_") && !defined(name)) missing.push_back(name);
  }
  if (!missing.empty()) {
    const size_t shown = std::min<size_t>(missing.size(), 4);
    std::string list = absl::StrJoin(missing.begin(), missing.begin() + static_cast<ptrdiff_t>(shown), ", ");
    if (missing.size() > shown) absl::StrAppend(&list, " and ", missing.size() - shown, " more");
    return absl::FailedPreconditionError(absl::StrCat(
        "the compiled library of ", what, " calls AOTInductor runtime functions that this server's LibTorch ",
        server_version, " lacks (", list, "): it was compiled by a PyTorch newer than ", server_version,
        " (a package records no PyTorch version of its own). Export it with PyTorch ", server_version,
        ", or serve it with infergate built against the PyTorch that exported it"));
  }
  return absl::OkStatus();
}

bool StaysLoadedOnceOpened(const ElfLinkage& linkage) {
  if (linkage.marked_nodelete) return true;
  // glibc marks the object a GNU unique symbol is found in as never to be
  // unloaded; one the process defines already (libstdc++'s) is found there.
  for (const std::string& name : linkage.bound_unique_names) {
    if (!DefinedInThisProcess(name)) return true;
  }
  return false;
}

absl::StatusOr<ElfLinkage> CheckAotiLibraryFitsThisLibTorch(const std::string& library, const std::string& what) {
  absl::StatusOr<ElfLinkage> linkage = ReadElfLinkage(library);
  if (!linkage.ok()) return ElfLinkage{};  // the loader's own error says more
  static const std::vector<std::string>* const loaded = new std::vector<std::string>(LoadedLibTorchNames());
  RETURN_IF_ERROR(CheckAotiLinkage(*linkage, *loaded, DefinedInThisProcess, what, TORCH_VERSION));
  return linkage;
}

}  // namespace infergate
