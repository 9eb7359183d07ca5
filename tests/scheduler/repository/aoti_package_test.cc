#include "scheduler/repository/aoti_package.h"

#include <gtest/gtest.h>

#include <fstream>

#include "tests/common/scratch_dir.h"
#include "tests/common/zip_writer.h"

namespace infergate {
namespace {

DeviceInfo Device(DeviceKind kind, bool simulated) {
  DeviceInfo d;
  d.id = DeviceId{kind, 0};
  d.simulated = simulated;
  return d;
}

AotiVariant V(const std::string& name, const std::string& device) {
  AotiVariant v;
  v.name = name;
  v.device = device;
  v.library_bytes = 1;
  return v;
}

// The variant rule, as a table: (variants, device) -> the variant's name, or "" for none.
TEST(AotiPackageTest, PicksTheVariantBuiltForTheDevice) {
  const std::vector<AotiVariant> cpu_only = {V("model", "cpu")};
  const std::vector<AotiVariant> both = {V("cpu", "cpu"), V("cuda", "cuda")};
  const std::vector<AotiVariant> stand_in = {V("cpu", "cpu"), V("cuda", "cpu")};
  const std::vector<AotiVariant> unnamed_cuda = {V("model", "cuda")};
  struct Case {
    const std::vector<AotiVariant>* variants;
    DeviceKind kind;
    bool simulated;
    const char* picked;
  } cases[] = {
      {&cpu_only, DeviceKind::kCpu, false, "model"}, {&cpu_only, DeviceKind::kCuda, false, ""},
      {&cpu_only, DeviceKind::kCuda, true, ""},  // a simulated device needs a variant named for it
      {&both, DeviceKind::kCpu, false, "cpu"},       {&both, DeviceKind::kCuda, false, "cuda"},
      {&both, DeviceKind::kCuda, true, ""},  // its cuda build is GPU code: not for a simulated device
      {&both, DeviceKind::kMps, false, ""},          {&stand_in, DeviceKind::kCuda, true, "cuda"},
      {&stand_in, DeviceKind::kCuda, false, ""},  // a CPU build named cuda never runs on a real GPU
      {&stand_in, DeviceKind::kMps, true, ""},       {&unnamed_cuda, DeviceKind::kCuda, false, "model"},
      {&unnamed_cuda, DeviceKind::kCpu, false, ""},
  };
  for (const Case& c : cases) {
    absl::StatusOr<AotiVariant> got = PickAotiVariant(*c.variants, Device(c.kind, c.simulated));
    const std::string where = std::string(DeviceKindName(c.kind)) + (c.simulated ? " (simulated)" : "");
    if (*c.picked) {
      ASSERT_TRUE(got.ok()) << where << ": " << got.status();
      EXPECT_EQ(got->name, c.picked) << where;
    } else {
      EXPECT_EQ(got.status().code(), absl::StatusCode::kNotFound) << where << " picked " << got->name;
    }
  }
}

// The threads a CPU build's loops run on, read off its generated C++: the
// largest num_threads(N) of an OpenMP pragma, 0 when its loops are serial.
TEST(AotiPackageTest, ReadsHowTheCompiledLoopsAreThreaded) {
  const struct {
    const char* source;
    int threads;
  } cases[] = {
      {"", 0},
      {"void kernel() { for (int i = 0; i < 8; ++i) {} }", 0},
      {"    #pragma omp parallel num_threads(2)\n    {", 2},
      {"#pragma omp parallel num_threads(4)\n#pragma omp parallel num_threads(16)\n#pragma omp parallel num_threads(8)",
       16},
      {"#pragma omp parallel num_threads(2)\n  int x = num_threads(64);\n", 2},  // not a pragma's clause
      {"// num_threads(32) in a comment\n#pragma omp parallel num_threads(3)", 3},
      {"#pragma omp parallel num_threads(12", 0},  // cut off
      {"#pragma omp parallel num_threads(n)", 0},
      {"#pragma omp parallel num_threads(99999999999999999999)", 0},  // no such count
      {"num_threads(7)", 0},
  };
  for (const auto& c : cases) EXPECT_EQ(MaxLoopThreads(c.source), c.threads) << c.source;
}

// Both layouts PyTorch writes: entries from the archive's root (2.6), and
// all under one top folder named after the archive (2.7 and later); and
// where a variant's weights are kept outside its library.
TEST(AotiPackageTest, ReadsBothLayoutsAndWhereWeightsAreKept) {
  const testing::ScratchDir dir("ig_aoti_layout_");
  auto package = [&](const std::string& name, const std::vector<testing::ZipWriterEntry>& entries) {
    const std::string path = dir.path() + "/" + name + ".pt2";
    std::ofstream(path, std::ios::binary) << testing::ZipOf(entries);
    return path;
  };
  const std::string metadata = R"({"AOTI_DEVICE_KEY": "cpu"})";
  const struct {
    std::string package;
    std::string folder;
    std::string weights_outside;
  } cases[] = {
      {package("root", {{"version", "1"},
                        {"data/aotinductor/model/h_metadata.json", metadata},
                        {"data/aotinductor/model/h.so", "library"}}),
       "data/aotinductor/model/", ""},
      {package("top", {{"model/version", "1"},
                       {"model/data/aotinductor/model/h_metadata.json", metadata},
                       {"model/data/aotinductor/model/h.so", "library"},
                       {"model/data/aotinductor/model/h.cpp", "// source"}}),
       "model/data/aotinductor/model/", ""},
      {package("blob", {{"pkg/data/aotinductor/model/h_metadata.json", metadata},
                        {"pkg/data/aotinductor/model/h.so", "library"},
                        {"pkg/data/aotinductor/model/h.wrapper_weights.blob", "weights"}}),
       "pkg/data/aotinductor/model/", "pkg/data/aotinductor/model/h.wrapper_weights.blob"},
      {package("constants", {{"data/aotinductor/model/h_metadata.json", metadata},
                             {"data/aotinductor/model/h.so", "library"},
                             {"data/constants/", ""},
                             {"data/constants/weight_0", "weights"}}),
       "data/aotinductor/model/", "data/constants/weight_0"},
  };
  for (const auto& c : cases) {
    absl::StatusOr<std::vector<AotiVariant>> got = ReadAotiVariants(c.package);
    ASSERT_TRUE(got.ok()) << c.package << ": " << got.status();
    ASSERT_EQ(got->size(), 1u) << c.package;
    EXPECT_EQ((*got)[0].name, "model") << c.package;
    EXPECT_EQ((*got)[0].folder, c.folder) << c.package;
    EXPECT_EQ((*got)[0].library_bytes, 7u) << c.package;
    EXPECT_EQ((*got)[0].weights_outside, c.weights_outside) << c.package;
  }
  // Top folders that differ are no package layout.
  absl::StatusOr<std::vector<AotiVariant>> mixed = ReadAotiVariants(package(
      "mixed", {{"a/data/aotinductor/model/h_metadata.json", metadata}, {"b/data/aotinductor/model/h.so", "library"}}));
  EXPECT_EQ(mixed.status().code(), absl::StatusCode::kInvalidArgument) << mixed.status();
}

TEST(AotiPackageTest, AFileThatIsNotAPackageSaysSo) {
  absl::StatusOr<std::vector<AotiVariant>> got = ReadAotiVariants("/nonexistent/model.pt2");
  EXPECT_EQ(got.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(got.status().message().find("not an AOTInductor package"), std::string::npos) << got.status();
}

}  // namespace
}  // namespace infergate
