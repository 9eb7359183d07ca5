#include "devices/precision.h"

#include <gtest/gtest.h>

namespace infergate {
namespace {

PrecisionTraits Cpu() { return {DeviceKind::kCpu, 0, 0}; }
PrecisionTraits Cuda(int cc) { return {DeviceKind::kCuda, cc, 0}; }
PrecisionTraits Mps(int macos) { return {DeviceKind::kMps, 0, macos}; }

TEST(Precision, DefaultsFollowTheDesign) {
  EXPECT_EQ(ResolveComputeDType(Cpu(), Precision::kAuto, Precision::kAuto), DType::kFloat32);
  EXPECT_EQ(ResolveComputeDType(Cuda(80), Precision::kAuto, Precision::kAuto), DType::kBFloat16);
  EXPECT_EQ(ResolveComputeDType(Cuda(75), Precision::kAuto, Precision::kAuto), DType::kFloat16);
  EXPECT_EQ(ResolveComputeDType(Mps(13), Precision::kAuto, Precision::kAuto), DType::kFloat16);
  EXPECT_EQ(ResolveComputeDType(Mps(14), Precision::kAuto, Precision::kAuto), DType::kFloat16);
}

TEST(Precision, Bf16OnlyWhereTheDeviceHasIt) {
  EXPECT_EQ(ResolveComputeDType(Cuda(86), Precision::kBf16, Precision::kAuto), DType::kBFloat16);
  EXPECT_EQ(ResolveComputeDType(Cuda(75), Precision::kBf16, Precision::kAuto), DType::kFloat16);
  EXPECT_EQ(ResolveComputeDType(Mps(13), Precision::kBf16, Precision::kAuto), DType::kFloat16);
  EXPECT_EQ(ResolveComputeDType(Mps(14), Precision::kBf16, Precision::kAuto), DType::kBFloat16);
  EXPECT_EQ(ResolveComputeDType(Cpu(), Precision::kBf16, Precision::kAuto), DType::kBFloat16);
}

TEST(Precision, ClientWinsOverModelOverride) {
  EXPECT_EQ(ResolveComputeDType(Cpu(), Precision::kAuto, Precision::kBf16), DType::kBFloat16);
  EXPECT_EQ(ResolveComputeDType(Cpu(), Precision::kFp32, Precision::kBf16), DType::kFloat32);
  EXPECT_EQ(ResolveComputeDType(Cuda(80), Precision::kFp16, Precision::kFp32), DType::kFloat16);
}

TEST(Precision, Float64ModelsKeepFloat64OnTheCpuUnderAuto) {
  EXPECT_EQ(ResolveComputeDType(Cpu(), Precision::kAuto, Precision::kAuto, true), DType::kFloat64);
  EXPECT_EQ(ResolveComputeDType(Cpu(), Precision::kFp32, Precision::kAuto, true), DType::kFloat32);
  EXPECT_EQ(ResolveComputeDType(Mps(14), Precision::kAuto, Precision::kAuto, true), DType::kFloat16);
}

}  // namespace
}  // namespace infergate
