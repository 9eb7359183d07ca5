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
  const std::vector<AotiVariant> cpu_only = {{"model", "cpu", 1, ""}};
  const std::vector<AotiVariant> both = {{"cpu", "cpu", 1, ""}, {"cuda", "cuda", 1, ""}};
  const std::vector<AotiVariant> stand_in = {{"cpu", "cpu", 1, ""}, {"cuda", "cpu", 1, ""}};
  const std::vector<AotiVariant> unnamed_cuda = {{"model", "cuda", 1, ""}};
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

TEST(AotiPackageTest, AFileThatIsNotAPackageSaysSo) {
  absl::StatusOr<std::vector<AotiVariant>> got = ReadAotiVariants("/nonexistent/model.pt2");
  EXPECT_EQ(got.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(got.status().message().find("not an AOTInductor package"), std::string::npos) << got.status();
}

}  // namespace
}  // namespace infergate
