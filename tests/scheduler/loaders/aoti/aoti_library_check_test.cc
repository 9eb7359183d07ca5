// The check that a .pt2 package's compiled library fits this server's
// LibTorch (aoti_library_check.h): as a table on the pure part, and the
// ELF reader on this process's own LibTorch files and on damaged files.
#include "scheduler/loaders/aoti/aoti_library_check.h"

#include <c10/core/DeviceType.h>
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

namespace infergate {
namespace {

bool DefinesOnlyOldFunctions(const std::string& name) {
  return name == "aoti_torch_empty_strided" || name == "aoti_torch_delete_tensor_object";
}

ElfLinkage L(std::vector<std::string> needed, std::vector<std::string> undefined) {
  ElfLinkage linkage;
  linkage.needed = std::move(needed);
  linkage.undefined_names = std::move(undefined);
  return linkage;
}

struct LinkageRow {
  const char* name;
  ElfLinkage linkage;
  std::vector<std::string> loaded;
  absl::StatusCode code;
  std::vector<std::string> message_names;  // each must appear in the message
};

TEST(AotiLibraryCheckTest, PackagesAgainstTheServersLibTorchAsATable) {
  const std::vector<std::string> pypi = {"libc10.so", "libtorch.so", "libtorch_cpu.so"};
  const std::vector<std::string> debian = {"libc10.so.2.6", "libtorch.so.2.6", "libtorch_cpu.so.2.6"};
  // clang-format off: a table, one row a line
  const std::vector<LinkageRow> rows = {
      {"links no LibTorch, calls known functions", L({"libstdc++.so.6", "libc.so.6"}, {"aoti_torch_empty_strided", "memcpy"}),
       pypi, absl::StatusCode::kOk, {}},
      {"links the LibTorch loaded, by its soname", L({"libtorch.so", "libc10.so"}, {}), pypi, absl::StatusCode::kOk, {}},
      {"links Debian's LibTorch into a PyPI server", L({"libtorch.so.2.6", "libc10.so.2.6", "libc.so.6"}, {}), pypi,
       absl::StatusCode::kFailedPrecondition, {"libtorch.so.2.6, libc10.so.2.6", "second LibTorch", "9.9.9", "libtorch.so"}},
      {"links PyPI's LibTorch into a Debian server", L({"libtorch.so"}, {}), debian,
       absl::StatusCode::kFailedPrecondition, {"links libtorch.so,", "link_libtorch"}},
      {"calls a runtime function this LibTorch lacks", L({}, {"aoti_torch_empty_strided", "aoti_torch_from_2099"}),
       pypi, absl::StatusCode::kFailedPrecondition, {"aoti_torch_from_2099", "newer than 9.9.9", "records no PyTorch version"}},
      {"an unknown function that is not AOTInductor's is the loader's business", L({}, {"some_other_symbol"}), pypi,
       absl::StatusCode::kOk, {}},
      {"many missing functions: four named and a count",
       L({}, {"aoti_a", "aoti_b", "aoti_c", "aoti_d", "aoti_e", "aoti_f"}), pypi,
       absl::StatusCode::kFailedPrecondition, {"aoti_a, aoti_b, aoti_c, aoti_d and 2 more"}},
  };
  // clang-format on
  for (const LinkageRow& row : rows) {
    SCOPED_TRACE(row.name);
    const absl::Status got =
        CheckAotiLinkage(row.linkage, row.loaded, DefinesOnlyOldFunctions, "variant 'cpu'", "9.9.9");
    EXPECT_EQ(got.code(), row.code) << got;
    for (const std::string& name : row.message_names) EXPECT_NE(got.message().find(name), std::string::npos) << got;
    if (!got.ok()) {
      EXPECT_NE(got.message().find("variant 'cpu'"), std::string::npos) << got;
    }
  }
}

TEST(AotiLibraryCheckTest, WhatStaysLoadedAfterClose) {
  ElfLinkage plain;
  EXPECT_FALSE(StaysLoadedOnceOpened(plain));
  ElfLinkage nodelete;
  nodelete.marked_nodelete = true;
  EXPECT_TRUE(StaysLoadedOnceOpened(nodelete));
  // A unique symbol the process defines already (libstdc++'s) binds there,
  // not in the library; one of the library's own binds in it.
  ElfLinkage shares_libstdcxx;
  shares_libstdcxx.bound_unique_names = {"_ZSt19piecewise_construct"};
  EXPECT_FALSE(StaysLoadedOnceOpened(shares_libstdcxx));
  ElfLinkage own;
  own.bound_unique_names = {"_ZSt19piecewise_construct", "inductor_flag_nobody_else_defines"};
  EXPECT_TRUE(StaysLoadedOnceOpened(own));
}

// The file of the loaded library that defines `symbol`.
std::string LibraryDefining(const void* symbol) {
  Dl_info info{};
  if (dladdr(symbol, &info) == 0 || info.dli_fname == nullptr) return "";
  return info.dli_fname;
}

TEST(AotiLibraryCheckTest, ReadsThisProcesssLibTorch) {
  const std::string c10 = LibraryDefining(reinterpret_cast<const void*>(&c10::DeviceTypeName));
  ASSERT_FALSE(c10.empty());
  absl::StatusOr<ElfLinkage> linkage = ReadElfLinkage(c10);
  ASSERT_TRUE(linkage.ok()) << linkage.status();
  EXPECT_EQ(linkage->soname.rfind("libc10", 0), 0u) << linkage->soname;
  bool needs_libc = false;
  for (const std::string& n : linkage->needed) needs_libc |= n == "libc.so.6";
  EXPECT_TRUE(needs_libc);
  EXPECT_FALSE(linkage->undefined_names.empty());  // at least libc's functions
  // The loaded libc10 fits the process that loaded it.
  EXPECT_TRUE(CheckAotiLibraryFitsThisLibTorch(c10, "libc10").ok());
}

TEST(AotiLibraryCheckTest, DamagedFilesAreRefusedNotRead) {
  const std::string dir = ::testing::TempDir();
  const std::string text = dir + "/not_elf.so";
  std::ofstream(text) << "this is not a shared library\n";
  EXPECT_EQ(ReadElfLinkage(text).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ReadElfLinkage(dir + "/no_such_file.so").status().code(), absl::StatusCode::kNotFound);

  // A real library cut short: its section headers lie past the end.
  const std::string c10 = LibraryDefining(reinterpret_cast<const void*>(&c10::DeviceTypeName));
  ASSERT_FALSE(c10.empty());
  std::ifstream in(c10, std::ios::binary);
  std::string head(4096, '\0');
  in.read(head.data(), static_cast<std::streamsize>(head.size()));
  const std::string cut = dir + "/cut.so";
  std::ofstream(cut, std::ios::binary).write(head.data(), static_cast<std::streamsize>(head.size()));
  absl::StatusOr<ElfLinkage> got = ReadElfLinkage(cut);
  EXPECT_EQ(got.status().code(), absl::StatusCode::kInvalidArgument) << got.status();
  // The check leaves what it cannot read to the loader.
  absl::StatusOr<ElfLinkage> left = CheckAotiLibraryFitsThisLibTorch(cut, "variant 'cpu'");
  ASSERT_TRUE(left.ok()) << left.status();
  EXPECT_TRUE(left->needed.empty());
}

}  // namespace
}  // namespace infergate
