// What a simulated accelerator charges any servable, once (SimulatedServable):
// its memory reserved while the servable lives and refused past the
// device's capacity, its move charged on the device's link, and the part of
// each run the device computes held to the backend's rules and, with a
// compute scale, to a time of its own; the CPU and real devices pass
// through.
#include "scheduler/model/simulated_servable.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "common/thread_cpu_time.h"
#include "devices/device_failure.h"
#include "devices/simulated_run.h"
#include "scheduler/model/torch_status.h"

namespace infergate {
namespace {

// Holds `bytes`; each run computes on the device (a DeviceComputeScope, as
// the loaders open around their forward pass) a product in `dtype`, after
// placing its input in float64 and before converting its answer to float64
// (what the TorchScript loader does for a float64 input and output, on the
// host side of the device).
class Computes final : public Servable {
 public:
  Computes(uint64_t bytes, at::ScalarType dtype, std::chrono::microseconds transfer = std::chrono::microseconds(0))
      : bytes_(bytes), dtype_(dtype), transfer_(transfer) {}
  absl::StatusOr<std::vector<NamedTensor>> Run(const std::vector<at::Tensor>&) const override {
    ++runs;
    try {
      at::Tensor input = at::ones({4}, at::kDouble).to(dtype_);
      DeviceComputeScope on_device;
      at::Tensor y = input * 2;
      on_device.Check();
      return std::vector<NamedTensor>{{"y", y.to(at::kDouble).to(at::kFloat)}};
    } catch (const std::exception& e) {
      return StatusFromTorchException(e, "model 'm' failed: ");
    }
  }
  const InputSignature& signature() const override { return signature_; }
  DType compute_dtype() const override { return DType::kFloat32; }
  uint64_t resident_bytes() const override { return bytes_; }
  std::chrono::microseconds transfer_time() const override { return transfer_; }
  mutable int runs = 0;

 private:
  uint64_t bytes_;
  at::ScalarType dtype_;
  std::chrono::microseconds transfer_;
  InputSignature signature_;
};

// The kind of device failure `status` carries, if any.
std::optional<DeviceFailure> FailureKind(const absl::Status& status) {
  std::optional<DeviceFailureInfo> failure = DeviceFailureOf(status);
  if (!failure) return std::nullopt;
  return failure->kind;
}

DeviceInfo Simulated(DeviceKind kind, uint64_t capacity, const std::function<void(SimulationRules&)>& more = {}) {
  auto rules = std::make_shared<SimulationRules>();
  rules->device = {kind, 0};
  rules->memory = std::make_shared<MemoryLedger>(capacity);
  rules->transfer_bytes_per_second = 1e9;  // 1 ms per MB
  rules->transfer_latency = std::chrono::microseconds(2000);
  if (more) more(*rules);
  DeviceInfo info;
  info.id = {kind, 0};
  info.simulated = true;
  info.simulation = rules;
  return info;
}

TEST(SimulatedServable, TheCpuAndRealDevicesPassThrough) {
  auto inner = std::make_shared<Computes>(1000, at::kFloat, std::chrono::microseconds(0));
  DeviceInfo cpu;
  cpu.id = {DeviceKind::kCpu, 0};
  absl::StatusOr<std::shared_ptr<Servable>> same = SimulatedServable::Wrap(inner, cpu, "m");
  ASSERT_TRUE(same.ok()) << same.status();
  EXPECT_EQ(same->get(), inner.get());
  DeviceInfo real_cuda;
  real_cuda.id = {DeviceKind::kCuda, 0};
  same = SimulatedServable::Wrap(inner, real_cuda, "m");
  ASSERT_TRUE(same.ok()) << same.status();
  EXPECT_EQ(same->get(), inner.get());
}

TEST(SimulatedServable, ReservesItsBytesWhileItLivesAndChargesTheMove) {
  DeviceInfo cuda = Simulated(DeviceKind::kCuda, 10'000'000);
  const MemoryLedger& ledger = *cuda.simulation->memory;
  const auto loaders_own = std::chrono::microseconds(300);
  {
    const auto start = std::chrono::steady_clock::now();
    absl::StatusOr<std::shared_ptr<Servable>> wrapped =
        SimulatedServable::Wrap(std::make_shared<Computes>(4'000'000, at::kFloat, loaders_own), cuda, "m");
    const auto took = std::chrono::steady_clock::now() - start;
    ASSERT_TRUE(wrapped.ok()) << wrapped.status();
    EXPECT_EQ(ledger.used(), 4'000'000u);
    // 2 ms fixed and 4 MB at 1 GB/s: 6 ms slept, and counted beside the
    // loader's own placing time.
    const auto charge = SimulatedTransferTime(*cuda.simulation, 4'000'000);
    EXPECT_EQ(charge, std::chrono::microseconds(6000));
    EXPECT_GE(took, charge);
    EXPECT_GE((*wrapped)->transfer_time(), charge + loaders_own);
    EXPECT_EQ((*wrapped)->resident_bytes(), 4'000'000u);
    absl::StatusOr<std::vector<NamedTensor>> out = (*wrapped)->Run({});
    ASSERT_TRUE(out.ok()) << out.status();
    EXPECT_TRUE(at::equal((*out)[0].tensor, at::full({4}, 2.0f)));
  }
  EXPECT_EQ(ledger.used(), 0u);
}

TEST(SimulatedServable, AModelPastTheCapacityIsRefusedAsOutOfMemoryAndHoldsNothing) {
  DeviceInfo cuda = Simulated(DeviceKind::kCuda, 10'000'000);
  absl::StatusOr<std::shared_ptr<Servable>> first =
      SimulatedServable::Wrap(std::make_shared<Computes>(6'000'000, at::kFloat), cuda, "first");
  ASSERT_TRUE(first.ok()) << first.status();
  absl::StatusOr<std::shared_ptr<Servable>> second =
      SimulatedServable::Wrap(std::make_shared<Computes>(6'000'000, at::kFloat), cuda, "second");
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(FailureKind(second.status()), DeviceFailure::kOutOfMemory);
  EXPECT_NE(second.status().message().find("CUDA out of memory. Tried to allocate 6000000 bytes for the parameters "
                                           "of 'second' (cuda:0; 10000000 bytes total capacity; 6000000 bytes "
                                           "already allocated; simulated device)"),
            std::string::npos)
      << second.status();
  EXPECT_EQ(cuda.simulation->memory->used(), 6'000'000u);
}

TEST(SimulatedServable, EachRunIsHeldToTheBackendsRules) {
  // float64 on MPS: the run fails as MPS's would, a dtype failure.
  DeviceInfo mps = Simulated(DeviceKind::kMps, 10'000'000, [](SimulationRules& r) { r.reject_float64 = true; });
  auto float64 = std::make_shared<Computes>(1000, at::kDouble, std::chrono::microseconds(0));
  absl::StatusOr<std::shared_ptr<Servable>> on_mps = SimulatedServable::Wrap(float64, mps, "m");
  ASSERT_TRUE(on_mps.ok()) << on_mps.status();
  absl::StatusOr<std::vector<NamedTensor>> out = (*on_mps)->Run({});
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(FailureKind(out.status()), DeviceFailure::kDtype);
  EXPECT_NE(out.status().message().find("model 'm' failed: "), std::string::npos) << out.status();
  // WarmUp is watched as Run is.
  EXPECT_EQ(FailureKind((*on_mps)->WarmUp({}).status()), DeviceFailure::kDtype);
  EXPECT_EQ(float64->runs, 2);

  // An op the backend lacks: an unsupported-op failure naming it.
  DeviceInfo no_mul =
      Simulated(DeviceKind::kMps, 10'000'000, [](SimulationRules& r) { r.unsupported_ops = {"aten::mul"}; });
  absl::StatusOr<std::shared_ptr<Servable>> lacking =
      SimulatedServable::Wrap(std::make_shared<Computes>(1000, at::kFloat), no_mul, "m");
  ASSERT_TRUE(lacking.ok()) << lacking.status();
  out = (*lacking)->Run({});
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(FailureKind(out.status()), DeviceFailure::kUnsupportedOp);

  // The same model within the rules runs, though its input and answer
  // pass through float64 on the host side, outside the device's part.
  absl::StatusOr<std::shared_ptr<Servable>> fine =
      SimulatedServable::Wrap(std::make_shared<Computes>(1000, at::kFloat), mps, "m");
  ASSERT_TRUE(fine.ok()) << fine.status();
  EXPECT_TRUE((*fine)->Run({}).ok());
}

TEST(SimulatedServable, AnInjectedDeviceFaultFailsRunsAsALostDevice) {
  DeviceInfo cuda = Simulated(DeviceKind::kCuda, 10'000'000, [](SimulationRules& r) { r.fail_after_runs = 1; });
  absl::StatusOr<std::shared_ptr<Servable>> wrapped =
      SimulatedServable::Wrap(std::make_shared<Computes>(1000, at::kFloat), cuda, "m");
  ASSERT_TRUE(wrapped.ok()) << wrapped.status();
  EXPECT_TRUE((*wrapped)->Run({}).ok());
  absl::StatusOr<std::vector<NamedTensor>> out = (*wrapped)->Run({});
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(FailureKind(out.status()), DeviceFailure::kDeviceError);
}

// Spins the calling thread for `cpu` of CPU time (the next of `cpu`'s
// times at each run, the last one from then on), then answers (or fails as
// a refused run does, `fail`).
class Spins final : public Servable {
 public:
  Spins(std::vector<std::chrono::microseconds> cpu, bool fail) : cpu_(std::move(cpu)), fail_(fail) {}
  absl::StatusOr<std::vector<NamedTensor>> Run(const std::vector<at::Tensor>&) const override {
    const uint64_t start = ThreadCpuMicros();
    const auto cpu = cpu_[std::min(runs_++, cpu_.size() - 1)];
    volatile uint64_t spins = 0;
    while (ThreadCpuMicros() - start < static_cast<uint64_t>(cpu.count())) spins = spins + 1;
    if (fail_) return absl::InvalidArgumentError("refused");
    return std::vector<NamedTensor>{{"y", at::ones({1})}};
  }
  const InputSignature& signature() const override { return signature_; }
  DType compute_dtype() const override { return DType::kFloat32; }
  uint64_t resident_bytes() const override { return 1000; }
  std::chrono::microseconds transfer_time() const override { return std::chrono::microseconds(0); }

 private:
  std::vector<std::chrono::microseconds> cpu_;
  bool fail_;
  mutable size_t runs_ = 0;
  InputSignature signature_;
};

// How long one Run of `servable` takes on the calling thread.
std::chrono::microseconds TimedRun(const Servable& servable, bool* ok) {
  const auto start = std::chrono::steady_clock::now();
  *ok = servable.Run({}).ok();
  return std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - start);
}

TEST(SimulatedServable, AComputeScaleHoldsEachRunToThatManyTimesItsCpuTime) {
  const int threads = at::get_num_threads();
  at::set_num_threads(1);
  const auto cpu = std::chrono::milliseconds(20);
  struct Case {
    double scale;
    bool fail;
    std::chrono::microseconds at_least, below;  // below: 0 when unbounded
  };
  const Case cases[] = {
      // 20 ms of CPU charged as 60 ms of device time, however long the
      // host took to give the thread those 20 ms.
      {3, false, std::chrono::milliseconds(60), std::chrono::microseconds(0)},
      // A run that fails is not held: 20 ms of CPU, not the 1 s charge.
      {50, true, std::chrono::milliseconds(20), std::chrono::milliseconds(500)},
      // No scale: the run takes what it takes.
      {0, false, std::chrono::milliseconds(20), std::chrono::milliseconds(500)},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(testing::Message() << "scale " << c.scale << (c.fail ? ", failing" : ""));
    DeviceInfo cuda = Simulated(DeviceKind::kCuda, 10'000'000, [&](SimulationRules& r) { r.compute_scale = c.scale; });
    absl::StatusOr<std::shared_ptr<Servable>> wrapped = SimulatedServable::Wrap(
        std::make_shared<Spins>(std::vector<std::chrono::microseconds>{cpu}, c.fail), cuda, "m");
    ASSERT_TRUE(wrapped.ok()) << wrapped.status();
    bool ok = false;
    const std::chrono::microseconds took = TimedRun(**wrapped, &ok);
    EXPECT_EQ(ok, !c.fail);
    EXPECT_GE(took, c.at_least);
    if (c.below.count() > 0) {
      EXPECT_LT(took, c.below);
    }
  }
  at::set_num_threads(threads);
}

TEST(SimulatedServable, TheComputeTimeIsTheLeastCpuTimeARunHasTakenScaled) {
  const int threads = at::get_num_threads();
  at::set_num_threads(1);
  // Runs of 10, 2, then 10 ms of CPU (the last as contention for memory
  // lengthens a run's CPU time): charged 100, 20, then 20 ms at a scale of
  // 10, not 100 again.
  DeviceInfo cuda = Simulated(DeviceKind::kCuda, 10'000'000, [](SimulationRules& r) { r.compute_scale = 10; });
  const std::vector<std::chrono::microseconds> cpu = {std::chrono::milliseconds(10), std::chrono::milliseconds(2),
                                                      std::chrono::milliseconds(10)};
  absl::StatusOr<std::shared_ptr<Servable>> wrapped =
      SimulatedServable::Wrap(std::make_shared<Spins>(cpu, false), cuda, "m");
  ASSERT_TRUE(wrapped.ok()) << wrapped.status();
  bool ok = false;
  EXPECT_GE(TimedRun(**wrapped, &ok), std::chrono::milliseconds(100));
  EXPECT_GE(TimedRun(**wrapped, &ok), std::chrono::milliseconds(20));
  const std::chrono::microseconds third = TimedRun(**wrapped, &ok);
  EXPECT_GE(third, std::chrono::milliseconds(20));
  EXPECT_LT(third, std::chrono::milliseconds(80));
  at::set_num_threads(threads);
}

TEST(SimulatedServable, EveryCopyOfAModelOnADeviceIsChargedTheModelsLeastRunTime) {
  const int threads = at::get_num_threads();
  at::set_num_threads(1);
  // A copy of m's version 1 that ran in 2 ms of CPU, then a second copy of
  // the same file (a reload) whose first run takes 10 ms: charged 20 ms at
  // a scale of 10, the file's least, not 100 ms from its own first run.
  // Another model's, or another version's, first run of 10 ms is its own:
  // 100 ms.
  DeviceInfo cuda = Simulated(DeviceKind::kCuda, 10'000'000, [](SimulationRules& r) { r.compute_scale = 10; });
  auto spins = [](int64_t us) { return std::make_shared<Spins>(std::vector{std::chrono::microseconds(us)}, false); };
  bool ok = false;
  {
    absl::StatusOr<std::shared_ptr<Servable>> first =
        SimulatedServable::Wrap(spins(2000), cuda, "m", "/r/m/1/model.pt");
    ASSERT_TRUE(first.ok()) << first.status();
    EXPECT_GE(TimedRun(**first, &ok), std::chrono::milliseconds(20));
  }
  absl::StatusOr<std::shared_ptr<Servable>> reloaded =
      SimulatedServable::Wrap(spins(10'000), cuda, "m", "/r/m/1/model.pt");
  ASSERT_TRUE(reloaded.ok()) << reloaded.status();
  const std::chrono::microseconds again = TimedRun(**reloaded, &ok);
  EXPECT_TRUE(ok);
  EXPECT_GE(again, std::chrono::milliseconds(10));
  EXPECT_LT(again, std::chrono::milliseconds(80));
  for (const auto& [model, file] : {std::pair{"n", "/r/n/1/model.pt"}, std::pair{"m", "/r/m/2/model.pt"}}) {
    absl::StatusOr<std::shared_ptr<Servable>> other = SimulatedServable::Wrap(spins(10'000), cuda, model, file);
    ASSERT_TRUE(other.ok()) << other.status();
    EXPECT_GE(TimedRun(**other, &ok), std::chrono::milliseconds(100)) << file;
  }
  at::set_num_threads(threads);
}

}  // namespace
}  // namespace infergate
