// The accuracy contract's arithmetic and its state-file form: tolerances,
// verdicts, measurements compared on real tensors, ledger lines.

#include "scheduler/model/accuracy_tolerance.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>

#include "devices/system_info.h"
#include "scheduler/model/check_inputs.h"
#include "scheduler/model/string_tensor.h"
#include "scheduler/model/warmup_samples.h"
#include "scheduler/routing/accuracy_ledger.h"
#include "scheduler/routing/output_comparison.h"

namespace infergate {
namespace {

TEST(AccuracyTolerance, DefaultsPerDtypeAndOverridesPerOutput) {
  v1::AccuracyConfig config;
  EXPECT_DOUBLE_EQ(ToleranceFor(config, DType::kFloat16, "y").max_rel_error, 1e-2);
  EXPECT_DOUBLE_EQ(ToleranceFor(config, DType::kBFloat16, "y").max_rel_error, 5e-2);
  config.set_max_rel_error(0.2);
  v1::OutputTolerance* o = config.add_outputs();
  o->set_name("logits");
  o->set_max_abs_error(3);
  Tolerance y = ToleranceFor(config, DType::kFloat16, "y");
  Tolerance logits = ToleranceFor(config, DType::kFloat16, "logits");
  EXPECT_DOUBLE_EQ(y.max_rel_error, 0.2);
  EXPECT_DOUBLE_EQ(y.max_abs_error, 1e-3);
  EXPECT_DOUBLE_EQ(logits.max_abs_error, 3);
  EXPECT_DOUBLE_EQ(logits.max_rel_error, 0.2);
}

TEST(AccuracyTolerance, VerdictNamesTheWorstOutput) {
  v1::AccuracyConfig config;
  AccuracyMeasurement m;
  m.outputs.push_back({"a", 0.001, 1.0, false});  // allowed 0.011
  m.outputs.push_back({"b", 0.6, 0.69, false});   // the BF16 convolution bug's size
  AccuracyVerdict v = Judge(m, config, DType::kBFloat16);
  EXPECT_FALSE(v.passed);
  EXPECT_EQ(v.worst_output, "b");
  EXPECT_NEAR(v.relative_error, 0.6 / 0.69, 1e-9);
  EXPECT_NE(v.Describe().find("output 'b'"), std::string::npos) << v.Describe();

  m.outputs[1].max_abs_error = 0.01;  // within 0.01 + 0.05 * 0.69
  EXPECT_TRUE(Judge(m, config, DType::kBFloat16).passed);
  m.outputs[1].new_non_finite = true;
  v = Judge(m, config, DType::kBFloat16);
  EXPECT_FALSE(v.passed);
  EXPECT_NE(v.Describe().find("NaN or inf"), std::string::npos);

  AccuracyMeasurement broken;
  broken.problem = "the model fails in float16: expected Half";
  EXPECT_FALSE(Judge(broken, config, DType::kFloat16).passed);
  EXPECT_FALSE(Judge(AccuracyMeasurement{}, config, DType::kFloat16).passed);  // nothing compared
  AccuracyMeasurement fine;
  fine.outputs.push_back({"y", 0.001, 1.0, false});
  AccuracyMeasurement worse_but_passing;
  worse_but_passing.outputs.push_back({"y", 0.009, 1.0, false});
  EXPECT_EQ(&Worse(fine, broken, config, DType::kFloat16), &broken);
  EXPECT_EQ(&Worse(fine, worse_but_passing, config, DType::kFloat16), &worse_but_passing);
  EXPECT_EQ(&Worse(worse_but_passing, fine, config, DType::kFloat16), &worse_but_passing);
}

TEST(OutputComparison, MeasuresErrorsMagnitudesAndNewNonFinite) {
  at::Tensor ref = torch::tensor({1.0f, -4.0f, 2.0f, std::numeric_limits<float>::quiet_NaN()});
  at::Tensor cand = torch::tensor({1.5f, -4.0f, 2.0f, std::numeric_limits<float>::quiet_NaN()});
  AccuracyMeasurement m = CompareOutputs({{"y", ref}}, {{"y", cand}});
  ASSERT_TRUE(m.problem.empty()) << m.problem;
  ASSERT_EQ(m.outputs.size(), 1u);
  EXPECT_DOUBLE_EQ(m.outputs[0].max_abs_error, 0.5);
  EXPECT_DOUBLE_EQ(m.outputs[0].reference_magnitude, 4.0);
  EXPECT_FALSE(m.outputs[0].new_non_finite);  // NaN where FP32 had NaN too

  at::Tensor inf = torch::tensor({1.0f, std::numeric_limits<float>::infinity(), 2.0f, 0.0f});
  EXPECT_TRUE(CompareOutputs({{"y", ref}}, {{"y", inf}}).outputs[0].new_non_finite);
  EXPECT_FALSE(CompareOutputs({{"y", ref}}, {{"z", cand}}).problem.empty());
  EXPECT_FALSE(CompareOutputs({{"y", ref}}, {{"y", cand.reshape({2, 2})}}).problem.empty());
}

// String outputs have no error to measure: the same strings pass with no
// error, other strings (or a string against numbers) are the check's problem.
TEST(OutputComparison, StringOutputsMustBeTheSameStrings) {
  const at::Tensor words = MakeStringTensor({"cat", "", "dög"}, {3});
  AccuracyMeasurement same = CompareOutputs({{"label", words}}, {{"label", MakeStringTensor({"cat", "", "dög"}, {3})}});
  ASSERT_TRUE(same.problem.empty()) << same.problem;
  ASSERT_EQ(same.outputs.size(), 1u);
  EXPECT_EQ(same.outputs[0], (OutputError{"label", 0, 0, false}));
  for (const at::Tensor& other :
       {MakeStringTensor({"cat", "", "dog"}, {3}), MakeStringTensor({"cat", " ", "dög"}, {3}), at::zeros({3})}) {
    AccuracyMeasurement m = CompareOutputs({{"label", words}}, {{"label", other}});
    EXPECT_EQ(m.problem, "output 'label' holds other strings in reduced precision than in FP32");
  }
  EXPECT_FALSE(CompareOutputs({{"label", at::zeros({3})}}, {{"label", words}}).problem.empty());
}

TEST(AccuracyLedger, LinesRoundTripWithAwkwardNames) {
  AccuracyKey key{"m;odel=1/x%",     std::string(64, 'a'), DeviceKind::kMps,
                  "cpu:x86_64+avx2", DType::kBFloat16,     "generated:x:FLOAT32[2,8][-1,1)"};
  AccuracyMeasurement m;
  m.outputs.push_back({"out\t1", 0.125, 3.5, false});
  m.outputs.push_back({"o;2", std::numeric_limits<double>::infinity(), 1e-30, true});
  std::string line = AccuracyLedger::Render(key, "2.6.0", m);
  std::optional<AccuracyLedger::Entry> back = AccuracyLedger::Parse(line);
  ASSERT_TRUE(back.has_value()) << line;
  EXPECT_EQ(back->key, key);
  EXPECT_EQ(back->libtorch, "2.6.0");
  EXPECT_EQ(back->measurement, m);

  AccuracyMeasurement broken;
  broken.problem = "fails: a\tb\nc";
  back = AccuracyLedger::Parse(AccuracyLedger::Render(key, "2.6.0", broken));
  ASSERT_TRUE(back.has_value());
  EXPECT_EQ(back->measurement, broken);

  for (const char* bad :
       {"", "mps\tx", "mps\tsig\tFLOAT16\tm\td\tin\t2.6\toutputs=", "tpu\ts\tFLOAT16\tm\td\ti\t2.6\tproblem=x",
        "mps\ts\tFLOAT16\tm\td\ti\t2.6\toutputs=y=1/2", "mps\ts\tFLOAT16\tm%Z\td\ti\t2.6\tproblem=x"}) {
    EXPECT_FALSE(AccuracyLedger::Parse(bad).has_value()) << bad;
  }
}

TEST(AccuracyLedger, KeptAcrossRestartsForThisLibTorchOnly) {
  std::string path = (std::filesystem::temp_directory_path() / ("ig_ledger_" + std::to_string(getpid()))).string();
  std::filesystem::remove(path);
  AccuracyKey key{"m", "d", DeviceKind::kCuda, "sig", DType::kFloat16, "in"};
  AccuracyMeasurement m;
  m.outputs.push_back({"y", 0.5, 1.0, false});
  {
    auto file = std::make_shared<StateFile>(path);
    ASSERT_TRUE(file->Load().ok());
    AccuracyLedger ledger(file, "2.6.0");
    ASSERT_TRUE(ledger.Load().ok());
    ledger.Record(key, m);
  }
  {
    auto file = std::make_shared<StateFile>(path);
    ASSERT_TRUE(file->Load().ok());
    AccuracyLedger same(file, "2.6.0");
    ASSERT_TRUE(same.Load().ok());
    EXPECT_EQ(same.Find(key), m);
    AccuracyKey other = key;
    other.device_signature = "another";
    EXPECT_FALSE(same.Find(other).has_value());
  }
  {
    auto file = std::make_shared<StateFile>(path);
    ASSERT_TRUE(file->Load().ok());
    AccuracyLedger newer(file, "2.7.0");
    ASSERT_TRUE(newer.Load().ok());
    EXPECT_FALSE(newer.Find(key).has_value());
  }
  std::filesystem::remove(path);
}

TEST(CheckInputs, GeneratedWithinDeclaredShapesAndRangesRepeatably) {
  InputSignature sig;
  sig.max_batch_size = 8;
  sig.inputs.push_back({"x", DType::kFloat32, std::vector<int64_t>{-1, 3}});
  sig.inputs.push_back({"ids", DType::kInt64, std::vector<int64_t>{5}});
  v1::ModelConfig model_config;
  v1::AccuracyConfig& config = *model_config.mutable_accuracy();
  v1::InputRange* r = config.add_inputs();
  r->set_name("ids");
  r->set_min(100);
  r->set_max(103);
  absl::StatusOr<CheckInputs> a = MakeCheckInputs(sig, model_config, {});
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_EQ(a->tensors.size(), 2u);
  EXPECT_EQ(a->tensors[0].sizes(), (std::vector<int64_t>{2, 8, 3}));
  EXPECT_GE(a->tensors[0].min().item<float>(), -1.0f);
  EXPECT_LT(a->tensors[0].max().item<float>(), 1.0f);
  EXPECT_GE(a->tensors[1].min().item<int64_t>(), 100);
  EXPECT_LE(a->tensors[1].max().item<int64_t>(), 103);
  absl::StatusOr<CheckInputs> b = MakeCheckInputs(sig, model_config, {});
  ASSERT_TRUE(b.ok());
  EXPECT_TRUE(a->tensors[0].equal(b->tensors[0]));
  EXPECT_EQ(a->fingerprint, b->fingerprint);

  sig.inputs[1].dims.reset();
  EXPECT_TRUE(absl::IsFailedPrecondition(MakeCheckInputs(sig, model_config, {}).status()));
  config.set_sample_inputs("../etc/passwd");
  EXPECT_TRUE(absl::IsInvalidArgument(MakeCheckInputs(sig, model_config, {}).status()));
  config.set_sample_inputs("absent.pt");
  absl::Status missing = MakeCheckInputs(sig, model_config, {"/nonexistent"}).status();
  EXPECT_TRUE(absl::IsInvalidArgument(missing));
  EXPECT_NE(missing.message().find("accuracy.sample_inputs"), std::string::npos);
}

// Triton's warm-up samples: zeros, fixed-seed random values and a file's
// row, repeated to the batch size; the first sample is also what the
// accuracy check runs on when there is no sample file.
TEST(CheckInputs, WarmupSamplesGiveTheirRowsAndAreTheCheckInputs) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::path(::testing::TempDir()) / "ig_warmup_samples";
  fs::remove_all(dir);
  fs::create_directories(dir / "warmup");
  const int32_t row[4] = {1, 2, 3, 4};
  std::ofstream(dir / "warmup" / "ids.bin", std::ios::binary).write(reinterpret_cast<const char*>(row), sizeof(row));
  std::ofstream(dir / "warmup" / "short.bin", std::ios::binary).write("abc", 3);
  std::ofstream(dir / "warmup" / "text.bin", std::ios::binary).write("\x02\0\0\0hi\0\0\0\0", 10);

  InputSignature sig;
  sig.max_batch_size = 8;
  sig.inputs.push_back({"x", DType::kFloat32, std::vector<int64_t>{3}});
  sig.inputs.push_back({"ids", DType::kInt32, std::vector<int64_t>{4}});
  v1::ModelConfig config;
  v1::WarmupSample* sample = config.add_warmup_samples();
  sample->set_name("s");
  sample->set_batch_size(3);
  // The sample's order is not the model's: the signature's order wins.
  v1::WarmupInput* ids = sample->add_inputs();
  ids->set_name("ids");
  ids->set_dtype(v1::INT32);
  ids->add_dims(4);
  ids->set_source(v1::WarmupInput::DATA_FILE);
  ids->set_data_file("ids.bin");
  v1::WarmupInput* x = sample->add_inputs();
  x->set_name("x");
  x->set_dtype(v1::FLOAT32);
  x->add_dims(3);
  x->set_source(v1::WarmupInput::RANDOM_DATA);

  absl::StatusOr<CheckInputs> made = MakeCheckInputs(sig, config, {dir.string()});
  ASSERT_TRUE(made.ok()) << made.status();
  ASSERT_EQ(made->tensors.size(), 2u);
  EXPECT_EQ(made->tensors[0].sizes(), (std::vector<int64_t>{3, 3}));
  EXPECT_GE(made->tensors[0].min().item<float>(), -1.0f);
  EXPECT_LT(made->tensors[0].max().item<float>(), 1.0f);
  EXPECT_TRUE(made->tensors[0][0].equal(made->tensors[0][2])) << "one row, repeated";
  EXPECT_TRUE(made->tensors[1].equal(at::tensor({1, 2, 3, 4}, at::kInt).repeat({3, 1})));
  EXPECT_EQ(made->fingerprint.rfind("warmup:s:", 0), 0u) << made->fingerprint;
  EXPECT_EQ(MakeCheckInputs(sig, config, {dir.string()})->fingerprint, made->fingerprint);
  EXPECT_TRUE(UsesWarmupSample(config));

  x->set_source(v1::WarmupInput::ZERO_DATA);
  absl::StatusOr<WarmupTensors> zeros = MakeWarmupTensors(sig, *sample, 0, dir.string());
  ASSERT_TRUE(zeros.ok()) << zeros.status();
  EXPECT_EQ(zeros->tensors[0].abs().sum().item<float>(), 0.0f);

  // A file that is not one row's size, or missing, names the sample and input.
  ids->set_data_file("short.bin");
  absl::Status wrong = MakeWarmupTensors(sig, *sample, 0, dir.string()).status();
  EXPECT_NE(wrong.message().find("warmup_samples[0].inputs[\"ids\"].data_file"), std::string::npos) << wrong;
  EXPECT_NE(wrong.message().find("holds 3 bytes; one row of INT32 [4] is 16"), std::string::npos) << wrong;
  ids->set_data_file("absent.bin");
  EXPECT_TRUE(absl::IsInvalidArgument(MakeWarmupTensors(sig, *sample, 0, dir.string()).status()));
  // An input the sample leaves out.
  sample->mutable_inputs()->RemoveLast();
  absl::Status left_out = MakeWarmupTensors(sig, *sample, 0, dir.string()).status();
  EXPECT_NE(left_out.message().find("gives no data for input 'x'"), std::string::npos) << left_out;

  // Strings: from a file of 4-byte lengths, repeated per row; such a sample
  // is run at warm-up but is not the accuracy check's input.
  InputSignature text;
  text.max_batch_size = 4;
  text.inputs.push_back({"t", DType::kBytes, std::vector<int64_t>{2}});
  v1::ModelConfig text_config;
  v1::WarmupSample* words = text_config.add_warmup_samples();
  words->set_batch_size(2);
  v1::WarmupInput* t = words->add_inputs();
  t->set_name("t");
  t->set_dtype(v1::BYTES);
  t->add_dims(2);
  t->set_source(v1::WarmupInput::DATA_FILE);
  t->set_data_file("text.bin");
  absl::StatusOr<WarmupTensors> strings = MakeWarmupTensors(text, *words, 0, dir.string());
  ASSERT_TRUE(strings.ok()) << strings.status();
  EXPECT_EQ(strings->tensors[0].sizes(), (std::vector<int64_t>{2, 2}));
  std::vector<std::string> got;
  for (absl::string_view v : StringElements(strings->tensors[0])) got.emplace_back(v);
  EXPECT_EQ(got, (std::vector<std::string>{"hi", "", "hi", ""}));
  EXPECT_FALSE(UsesWarmupSample(text_config));
  fs::remove_all(dir);
}

TEST(CpuInstructionSet, NamesTheExtensionsThatPickKernels) {
  EXPECT_EQ(CpuInstructionSetFrom("processor : 0\nflags : fpu sse avx avx2 avx512f avx512_bf16 amx_tile\n", "x86_64"),
            "x86_64+avx+avx2+avx512f+avx512_bf16+amx_tile");
  EXPECT_EQ(CpuInstructionSetFrom("Features : fp asimd asimdhp bf16\n", "aarch64"), "aarch64+asimd+asimdhp+bf16");
  EXPECT_EQ(CpuInstructionSetFrom("", ""), "unknown");
}

}  // namespace
}  // namespace infergate
