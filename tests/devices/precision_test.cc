#include "devices/precision.h"

#include <gtest/gtest.h>

#include <string>

#include "absl/strings/ascii.h"

namespace infergate {
namespace {

constexpr Precision kAll[] = {Precision::kAuto, Precision::kFp32, Precision::kFp16, Precision::kBf16};

std::string Short(DType d) {
  switch (d) {
    case DType::kFloat32: return "32";
    case DType::kFloat16: return "16";
    case DType::kBFloat16: return "bf";
    case DType::kFloat64: return "64";
    default: return "??";
  }
}

struct Row {
  const char* device;
  PrecisionTraits traits;
  // expected[request][model override], both in AUTO, FP32, FP16, BF16 order
  const char* expected[4][4];
};

// The whole table: each device kind (and capability) x each client request
// x each model-config override.
TEST(Precision, NamesParseInAnyCase) {
  for (Precision p : {Precision::kAuto, Precision::kFp32, Precision::kFp16, Precision::kBf16}) {
    EXPECT_EQ(ParsePrecisionName(PrecisionName(p)), p);
    EXPECT_EQ(ParsePrecisionName(absl::AsciiStrToLower(PrecisionName(p))), p);
  }
  EXPECT_EQ(ParsePrecisionName(""), Precision::kAuto);
  for (const char* bad : {"fp8", "FP 16", "float16", "half", "auto "})
    EXPECT_EQ(ParsePrecisionName(bad), std::nullopt) << bad;
}

TEST(Precision, WholeTable) {
  const Row rows[] = {
      {"cpu",
       {DeviceKind::kCpu, 0, 0},
       {{"32", "32", "16", "bf"}, {"32", "32", "32", "32"}, {"16", "16", "16", "16"}, {"bf", "bf", "bf", "bf"}}},
      {"cuda cc7.5",
       {DeviceKind::kCuda, 75, 0},
       {{"16", "32", "16", "16"}, {"32", "32", "32", "32"}, {"16", "16", "16", "16"}, {"16", "16", "16", "16"}}},
      {"cuda cc8.0",
       {DeviceKind::kCuda, 80, 0},
       {{"bf", "32", "16", "bf"}, {"32", "32", "32", "32"}, {"16", "16", "16", "16"}, {"bf", "bf", "bf", "bf"}}},
      {"cuda cc9.0",
       {DeviceKind::kCuda, 90, 0},
       {{"bf", "32", "16", "bf"}, {"32", "32", "32", "32"}, {"16", "16", "16", "16"}, {"bf", "bf", "bf", "bf"}}},
      {"mps macOS 13",
       {DeviceKind::kMps, 0, 13},
       {{"16", "32", "16", "16"}, {"32", "32", "32", "32"}, {"16", "16", "16", "16"}, {"16", "16", "16", "16"}}},
      {"mps macOS 14",
       {DeviceKind::kMps, 0, 14},
       {{"16", "32", "16", "bf"}, {"32", "32", "32", "32"}, {"16", "16", "16", "16"}, {"bf", "bf", "bf", "bf"}}},
  };
  for (const Row& row : rows) {
    for (int r = 0; r < 4; ++r) {
      for (int o = 0; o < 4; ++o) {
        EXPECT_EQ(Short(ResolveComputeDType(row.traits, kAll[r], kAll[o])), row.expected[r][o])
            << row.device << " request=" << PrecisionName(kAll[r]) << " override=" << PrecisionName(kAll[o]);
      }
    }
  }
}

TEST(Precision, Float64ModelsUnderAuto) {
  // Nobody asked: keep float64 where the device has it, float32 on MPS.
  EXPECT_EQ(ResolveComputeDType({DeviceKind::kCpu, 0, 0}, Precision::kAuto, Precision::kAuto, true), DType::kFloat64);
  EXPECT_EQ(ResolveComputeDType({DeviceKind::kCuda, 80, 0}, Precision::kAuto, Precision::kAuto, true), DType::kFloat64);
  EXPECT_EQ(ResolveComputeDType({DeviceKind::kMps, 0, 14}, Precision::kAuto, Precision::kAuto, true), DType::kFloat32);
  // Somebody asked: that wins.
  EXPECT_EQ(ResolveComputeDType({DeviceKind::kCpu, 0, 0}, Precision::kFp32, Precision::kAuto, true), DType::kFloat32);
  EXPECT_EQ(ResolveComputeDType({DeviceKind::kMps, 0, 14}, Precision::kAuto, Precision::kFp16, true), DType::kFloat16);
}

TEST(Precision, CastTargetNeverTouchesIntegersAndNormalisesFloat64) {
  for (DType compute : {DType::kFloat32, DType::kFloat16, DType::kBFloat16}) {
    for (DType t : {DType::kInt64, DType::kInt32, DType::kInt8, DType::kUInt8, DType::kBool}) {
      EXPECT_EQ(CastTarget(t, compute), t) << DTypeName(t);
    }
    for (DType t : {DType::kFloat64, DType::kFloat32, DType::kFloat16, DType::kBFloat16}) {
      EXPECT_EQ(CastTarget(t, compute), compute) << DTypeName(t);
    }
  }
  // What MPS runs in is never float64, so float64 never reaches it.
  for (Precision r : kAll) {
    for (Precision o : kAll) {
      for (bool f64 : {false, true}) {
        DType compute = ResolveComputeDType({DeviceKind::kMps, 0, 14}, r, o, f64);
        EXPECT_NE(CastTarget(DType::kFloat64, compute), DType::kFloat64);
      }
    }
  }
}

TEST(Precision, DefaultsPerDevice) {
  EXPECT_EQ(DefaultPrecision({DeviceKind::kCpu, 0, 0}), Precision::kFp32);
  EXPECT_EQ(DefaultPrecision({DeviceKind::kCuda, 86, 0}), Precision::kBf16);
  EXPECT_EQ(DefaultPrecision({DeviceKind::kCuda, 70, 0}), Precision::kFp16);
  EXPECT_EQ(DefaultPrecision({DeviceKind::kMps, 0, 14}), Precision::kFp16);
}

}  // namespace
}  // namespace infergate
