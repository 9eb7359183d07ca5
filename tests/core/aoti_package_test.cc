#include "model_store/aoti_package.h"

#include <gtest/gtest.h>

namespace infergate {
namespace {

DeviceInfo Device(DeviceKind kind, bool simulated) {
  DeviceInfo d;
  d.id = DeviceId{kind, 0};
  d.simulated = simulated;
  return d;
}

// The variant rule, as a table: (variants, device) -> the variant's name, or "" for none.
TEST(AotiPackageTest, PicksTheVariantBuiltForTheDevice) {
  const std::vector<AotiVariant> cpu_only = {{"model", "cpu", 1, "", {}}};
  const std::vector<AotiVariant> both = {{"cpu", "cpu", 1, "", {}}, {"cuda", "cuda", 1, "", {}}};
  const std::vector<AotiVariant> stand_in = {{"cpu", "cpu", 1, "", {}}, {"cuda", "cpu", 1, "", {}}};
  const std::vector<AotiVariant> unnamed_cuda = {{"model", "cuda", 1, "", {}}};
  struct Case {
    const std::vector<AotiVariant>* variants;
    DeviceKind kind;
    bool simulated;
    const char* picked;
  } cases[] = {
      {&cpu_only, DeviceKind::kCpu, false, "model"},
      {&cpu_only, DeviceKind::kCuda, false, ""},
      {&cpu_only, DeviceKind::kCuda, true, ""},  // a simulated device needs a variant named for it
      {&both, DeviceKind::kCpu, false, "cpu"},
      {&both, DeviceKind::kCuda, false, "cuda"},
      {&both, DeviceKind::kCuda, true, ""},   // its cuda build is GPU code: not for a simulated device
      {&both, DeviceKind::kMps, false, ""},
      {&stand_in, DeviceKind::kCuda, true, "cuda"},
      {&stand_in, DeviceKind::kCuda, false, ""},  // a CPU build named cuda never runs on a real GPU
      {&stand_in, DeviceKind::kMps, true, ""},
      {&unnamed_cuda, DeviceKind::kCuda, false, "model"},
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
      {"#pragma omp parallel num_threads(4)\n#pragma omp parallel num_threads(16)\n#pragma omp parallel num_threads(8)", 16},
      {"#pragma omp parallel num_threads(2)\n  int x = num_threads(64);\n", 2},  // not a pragma's clause
      {"// num_threads(32) in a comment\n#pragma omp parallel num_threads(3)", 3},
      {"#pragma omp parallel num_threads(12", 0},  // cut off
      {"#pragma omp parallel num_threads(n)", 0},
      {"#pragma omp parallel num_threads(99999999999999999999)", 0},  // no such count
      {"num_threads(7)", 0},
  };
  for (const auto& c : cases) EXPECT_EQ(MaxLoopThreads(c.source), c.threads) << c.source;
}

TEST(AotiPackageTest, AFileThatIsNotAPackageSaysSo) {
  absl::StatusOr<std::vector<AotiVariant>> got = ReadAotiVariants("/nonexistent/model.pt2");
  EXPECT_EQ(got.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(got.status().message().find("not an AOTInductor package"), std::string::npos) << got.status();
}

}  // namespace
}  // namespace infergate
