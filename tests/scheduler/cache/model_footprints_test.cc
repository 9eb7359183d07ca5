#include "scheduler/cache/model_footprints.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "scheduler/routing/unsupported_ops.h"

namespace infergate {
namespace {

namespace fs = std::filesystem;

constexpr char kTorch[] = "1.13.1";
constexpr char kFile[] = "4096:1700000000000000000";

class ModelFootprintsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("ig_footprints_" + std::to_string(::getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    path_ = (dir_ / "state").string();
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string FileText() const {
    std::ifstream in(path_);
    std::stringstream text;
    text << in.rdbuf();
    return text.str();
  }

  fs::path dir_;
  std::string path_;
};

// First time: the model file's size, scaled from the float32 it stores to
// the compute dtype's width; nothing known about activations yet.
TEST_F(ModelFootprintsTest, TheFirstEstimateIsTheFileSizeTimesTheDTypeFactor) {
  ModelFootprints table(std::make_shared<StateFile>(""), kTorch);
  Footprint fp32 = table.Expect("m", kFile, 400'000'000, DeviceKind::kCuda, DType::kFloat32);
  EXPECT_EQ(fp32.parameter_bytes, 400'000'000u);
  EXPECT_EQ(fp32.activation_bytes, 0u);
  EXPECT_NE(fp32.source.find("estimated from the 400000000-byte model file"), std::string::npos) << fp32.source;
  EXPECT_EQ(table.Expect("m", kFile, 400'000'000, DeviceKind::kCuda, DType::kFloat16).parameter_bytes, 200'000'000u);
  EXPECT_EQ(table.Expect("m", kFile, 400'000'000, DeviceKind::kMps, DType::kBFloat16).parameter_bytes, 200'000'000u);
  EXPECT_EQ(table.Expect("m", kFile, 400'000'000, DeviceKind::kCpu, DType::kFloat64).parameter_bytes, 800'000'000u);
}

// What loads and warm-ups measured is used from then on, also after a
// restart, per device kind and dtype and per model file.
TEST_F(ModelFootprintsTest, LearnedSizesSurviveARestartAndBeatTheEstimate) {
  {
    auto state = std::make_shared<StateFile>(path_);
    ModelFootprints table(state, kTorch);
    ASSERT_TRUE(state->Load().ok());
    ASSERT_TRUE(table.Load().ok());
    table.RecordParameters("m", kFile, DeviceKind::kCuda, DType::kFloat16, 123'456);
    table.RecordActivations("m", kFile, DeviceKind::kCuda, DType::kFloat16, 7'000);
    table.RecordActivations("m", kFile, DeviceKind::kCuda, DType::kFloat16, 5'000);  // the largest is kept
    EXPECT_TRUE(state->last_write_status().ok()) << state->last_write_status();
  }
  auto state = std::make_shared<StateFile>(path_);
  ModelFootprints table(state, kTorch);
  ASSERT_TRUE(state->Load().ok());
  ASSERT_TRUE(table.Load().ok());
  Footprint learned = table.Expect("m", kFile, 999'999'999, DeviceKind::kCuda, DType::kFloat16);
  EXPECT_EQ(learned.parameter_bytes, 123'456u);
  EXPECT_EQ(learned.activation_bytes, 7'000u);
  EXPECT_EQ(learned.total(), 130'456u);
  EXPECT_EQ(learned.source, "learned from an earlier load");
  // Another dtype, device kind or file is estimated afresh.
  EXPECT_EQ(table.Expect("m", kFile, 1000, DeviceKind::kCuda, DType::kFloat32).parameter_bytes, 1000u);
  EXPECT_EQ(table.Expect("m", kFile, 1000, DeviceKind::kMps, DType::kFloat16).parameter_bytes, 500u);
  EXPECT_EQ(table.Expect("m", "1:2", 1000, DeviceKind::kCuda, DType::kFloat16).parameter_bytes, 500u);
  // Another LibTorch may lay tensors out differently: estimated again.
  ModelFootprints newer(state, "2.1.0");
  ASSERT_TRUE(newer.Load().ok());
  EXPECT_EQ(newer.Expect("m", kFile, 1000, DeviceKind::kCuda, DType::kFloat16).parameter_bytes, 500u);
}

// Device limits and footprints share one state file; writing either keeps
// the other, and a version 2 file of limits is read and rewritten tagged.
TEST_F(ModelFootprintsTest, LimitsAndFootprintsShareTheStateFile) {
  std::ofstream(path_) << "# infergate learned device limits v2\nmps\tcnn\t" << kFile << "\t" << kTorch
                       << "\tunsupported_op:aten::max_pool2d\n";
  {
    auto state = std::make_shared<StateFile>(path_);
    UnsupportedOpTable limits(state, kTorch);
    ModelFootprints footprints(state, kTorch);
    ASSERT_TRUE(limits.Load().ok());
    ASSERT_TRUE(footprints.Load().ok());
    EXPECT_TRUE(limits.Lookup("cnn", kFile, DeviceKind::kMps).has_value());
    footprints.RecordParameters("cnn", kFile, DeviceKind::kCuda, DType::kFloat16, 4096);
    limits.Record("mlp", kFile, DeviceKind::kMps, FallbackReason{FallbackKind::kDtype, "float64"});
    footprints.RecordActivations("cnn", kFile, DeviceKind::kCuda, DType::kFloat16, 512);
  }
  std::string text = FileText();
  EXPECT_NE(text.find("limit\tmps\tcnn\t"), std::string::npos) << text;
  EXPECT_NE(text.find("limit\tmps\tmlp\t"), std::string::npos) << text;
  EXPECT_NE(text.find(absl::StrCat("footprint\tcuda\tFLOAT16\tcnn\t", kFile, "\t", kTorch, "\t4096\t512")),
            std::string::npos)
      << text;
  auto state = std::make_shared<StateFile>(path_);
  UnsupportedOpTable limits(state, kTorch);
  ModelFootprints footprints(state, kTorch);
  ASSERT_TRUE(limits.Load().ok());
  ASSERT_TRUE(footprints.Load().ok());
  EXPECT_EQ(limits.ForKind(DeviceKind::kMps).size(), 2u);
  EXPECT_EQ(footprints.Expect("cnn", kFile, 1, DeviceKind::kCuda, DType::kFloat16).total(), 4608u);
}

TEST_F(ModelFootprintsTest, AMalformedFootprintIsAnErrorNamingTheLine) {
  std::ofstream(path_) << "footprint\tcuda\tFLOAT16\tm\t" << kFile << "\t" << kTorch << "\tlots\t0\n";
  auto state = std::make_shared<StateFile>(path_);
  ModelFootprints table(state, kTorch);
  ASSERT_TRUE(state->Load().ok());
  absl::Status s = table.Load();
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(s.message().find("model footprint 1 is malformed"), absl::string_view::npos) << s;
}

}  // namespace
}  // namespace infergate
