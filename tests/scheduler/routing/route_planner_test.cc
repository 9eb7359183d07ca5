// Every routing decision, as one table: requested device, auto, absent and
// out-of-service devices, allow-lists, learned limits, and fallback policy.

#include "scheduler/routing/route_planner.h"

#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "tests/scheduler/fake_servable.h"

namespace infergate {
namespace {

using testing::FakeDevices;
using testing::TempRepository;

const std::map<std::string, std::string> kModels = {
    {"any", "inputs { name: \"x\" dtype: FLOAT32 dims: [4] }"},
    {"cpu_only", "inputs { name: \"x\" dtype: FLOAT32 dims: [4] } allowed_devices: [CPU]"},
    {"gpu_only", "inputs { name: \"x\" dtype: FLOAT32 dims: [4] } allowed_devices: [CUDA]"},
};

class RoutePlannerTest : public ::testing::Test {
 protected:
  RoutePlannerTest()
      : repo_(kModels),
        repository_(repo_.root()),
        devices_(FakeDevices(/*cuda=*/true, /*mps=*/true)),
        learned_("", "test"),
        planner_(repository_, devices_, learned_, {}, nullptr) {
    EXPECT_TRUE(repository_.Scan().ok());
    // Learned for the file that answers for "any" (its latest version).
    learned_.Record("any", repository_.Lookup("any")->states.back().stamp.ContentKey(), DeviceKind::kMps,
                    {FallbackKind::kUnsupportedOp, "aten::fft_r2c"});
  }

  TempRepository repo_;
  ModelRepository repository_;
  DeviceRegistry devices_;
  UnsupportedOpTable learned_;
  RoutePlanner planner_;
};

struct RouteRow {
  const char* model;
  const char* device;
  bool allow_fallback;
  absl::StatusCode code;
  const char* runs_on;  // when OK
  const char* reason;   // "" = ran where asked
};

TEST_F(RoutePlannerTest, EveryDecisionInOneTable) {
  using C = absl::StatusCode;
  const RouteRow rows[] = {
      {"any", "cpu", true, C::kOk, "cpu", ""},
      {"any", "cuda:0", true, C::kOk, "cuda:0", ""},
      {"any", "CUDA", false, C::kOk, "cuda:0", ""},
      {"any", "", true, C::kOk, "cuda:0", ""},  // cold start: CUDA first, MPS is learned-out
      {"any", "auto", false, C::kOk, "cuda:0", ""},
      {"any", "cuda:3", true, C::kOk, "cpu", "device_unavailable:cuda:3"},
      {"any", "cuda:3", false, C::kFailedPrecondition, "", ""},
      {"any", "mps", true, C::kOk, "cpu", "unsupported_op:aten::fft_r2c"},
      {"any", "mps", false, C::kFailedPrecondition, "", ""},
      {"cpu_only", "cuda:0", true, C::kOk, "cpu", "device_not_allowed:cuda:0"},
      {"cpu_only", "cuda:0", false, C::kFailedPrecondition, "", ""},
      {"cpu_only", "auto", true, C::kOk, "cpu", ""},
      {"gpu_only", "cuda:0", false, C::kOk, "cuda:0", ""},
      {"gpu_only", "cuda:7", true, C::kFailedPrecondition, "", ""},  // may not fall back to the cpu
      {"gpu_only", "cpu", true, C::kFailedPrecondition, "", ""},
      {"any", "tpu", true, C::kInvalidArgument, "", ""},
      {"nosuch", "cpu", true, C::kNotFound, "", ""},
  };
  for (const RouteRow& row : rows) {
    SCOPED_TRACE(absl::StrCat(row.model, " on '", row.device, "' fallback ", row.allow_fallback ? "ALLOW" : "DENY"));
    absl::StatusOr<Route> route = planner_.Plan({row.model, "", row.device, Precision::kAuto, row.allow_fallback});
    ASSERT_EQ(route.status().code(), row.code) << route.status();
    if (!route.ok()) {
      // Every refusal names the field or the model at fault.
      const std::string message(route.status().message());
      EXPECT_TRUE(message.find("device") != std::string::npos || message.find(row.model) != std::string::npos)
          << message;
      continue;
    }
    EXPECT_EQ(route->device.id.ToString(), row.runs_on);
    EXPECT_EQ(route->fallback ? route->fallback->ToString() : "", row.reason);
  }
}

TEST_F(RoutePlannerTest, VersionsAreCheckedBeforeDevices) {
  EXPECT_EQ(planner_.Plan({"any", "1", "cpu", Precision::kAuto, true})->version, 1);
  EXPECT_EQ(planner_.Plan({"any", "9", "cpu", Precision::kAuto, true}).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(planner_.Plan({"any", "v1", "tpu", Precision::kAuto, true}).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_F(RoutePlannerTest, DeviceOutOfServiceSendsWorkToTheCpuAndAutoSkipsIt) {
  devices_.MarkUnhealthy({DeviceKind::kCuda, 0}, std::chrono::steady_clock::now() + std::chrono::minutes(1));
  absl::StatusOr<Route> asked = planner_.Plan({"any", "", "cuda:0", Precision::kAuto, true});
  ASSERT_TRUE(asked.ok()) << asked.status();
  EXPECT_EQ(asked->device.id.ToString(), "cpu");
  EXPECT_EQ(asked->fallback->ToString(), "device_out_of_service:cuda:0");
  absl::StatusOr<Route> denied = planner_.Plan({"any", "", "cuda:0", Precision::kAuto, false});
  EXPECT_EQ(denied.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(denied.status().message().find("out of service"), absl::string_view::npos) << denied.status();
  EXPECT_EQ(planner_.Plan({"any", "", "auto", Precision::kAuto, true})->device.id.ToString(), "cpu");
}

TEST_F(RoutePlannerTest, AutoPrefersWhereTheModelIsResidentAndIdle) {
  RoutePlanner probing(repository_, devices_, learned_, {}, [](const Route& there, RouteCandidate* c) {
    c->resident = there.device.id.kind == DeviceKind::kCpu;
    c->latency_us = 100;
  });
  EXPECT_EQ(probing.Plan({"cpu_only", "", "", Precision::kAuto, true})->device.id.ToString(), "cpu");
  // Resident on the cpu, cold on cuda: loading costs more than running here.
  EXPECT_EQ(probing.Plan({"gpu_only", "", "", Precision::kAuto, true})->device.id.ToString(), "cuda:0");
  absl::StatusOr<Route> any = probing.Plan({"any", "", "", Precision::kAuto, true});
  EXPECT_EQ(any->device.id.ToString(), "cpu");
  EXPECT_FALSE(any->fallback.has_value());
}

TEST_F(RoutePlannerTest, PrecisionIsResolvedPerDevice) {
  EXPECT_EQ(planner_.Plan({"any", "", "cuda:0", Precision::kAuto, true})->dtype, DType::kBFloat16);
  EXPECT_EQ(planner_.Plan({"any", "", "cpu", Precision::kAuto, true})->dtype, DType::kFloat32);
  EXPECT_EQ(planner_.Plan({"any", "", "cpu", Precision::kFp16, true})->dtype, DType::kFloat16);
}

// A compiled package's precision was fixed at export: float32 for its own
// version wherever `auto` would reduce it, TorchScript versions unchanged.
TEST_F(RoutePlannerTest, ACompiledPackageComputesInFloat32) {
  std::shared_ptr<const ModelEntry> any = repository_.Lookup("any");
  const PrecisionTraits cuda = devices_.PrecisionOf(DeviceId{DeviceKind::kCuda, 0}).value();
  FileStamp torchscript;
  torchscript.size = 1;
  FileStamp package = torchscript;
  package.package = true;
  EXPECT_EQ(RoutePlanner::ComputeDType(*any, torchscript, cuda, Precision::kAuto), DType::kBFloat16);
  EXPECT_EQ(RoutePlanner::ComputeDType(*any, package, cuda, Precision::kAuto), DType::kFloat32);
  // A client's explicit ask still resolves as asked (the load then refuses it).
  EXPECT_EQ(RoutePlanner::ComputeDType(*any, package, cuda, Precision::kFp16), DType::kFloat16);
}

TEST_F(RoutePlannerTest, FallBackToCpuAfterAFailureHonoursDenyAndAllowLists) {
  Route on_cuda = *planner_.Plan({"any", "", "cuda:0", Precision::kAuto, true});
  FallbackReason oom{FallbackKind::kOutOfMemory, ""};
  absl::StatusOr<Route> moved = planner_.FallBackToCpu(on_cuda, oom, Precision::kAuto, true,
                                                       absl::ResourceExhaustedError("cuda:0 out of memory"));
  ASSERT_TRUE(moved.ok()) << moved.status();
  EXPECT_EQ(moved->device.id.ToString(), "cpu");
  EXPECT_EQ(moved->dtype, DType::kFloat32);  // re-derived for the cpu, not kept from cuda's bf16
  EXPECT_EQ(moved->fallback->ToString(), "oom");
  absl::StatusOr<Route> denied =
      planner_.FallBackToCpu(on_cuda, oom, Precision::kAuto, false, absl::ResourceExhaustedError("full"));
  EXPECT_EQ(denied.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(denied.status().message().find("'any'"), absl::string_view::npos);
  Route gpu_only = *planner_.Plan({"gpu_only", "", "cuda:0", Precision::kAuto, true});
  EXPECT_EQ(planner_.FallBackToCpu(gpu_only, oom, Precision::kAuto, true, absl::ResourceExhaustedError("full"))
                .status()
                .code(),
            absl::StatusCode::kFailedPrecondition);
}

// The models above on a cpu and cuda:0, for planners built with the probe
// each test gives.
class RoutePlannerProbe : public ::testing::Test {
 protected:
  RoutePlannerProbe()
      : repo_(kModels), repository_(repo_.root()), devices_(FakeDevices(/*cuda=*/true, /*mps=*/false)) {}
  void SetUp() override { ASSERT_TRUE(repository_.Scan().ok()); }

  TempRepository repo_;
  ModelRepository repository_;
  DeviceRegistry devices_;
  UnsupportedOpTable learned_{"", "test"};
};

// The load probe (queue depths, residency, latency: locks on the hot path) is
// asked only when `auto` has more than one device to weigh.
TEST_F(RoutePlannerProbe, AutoProbesOnlyWhenThereIsAChoice) {
  std::vector<std::string> probed;
  RoutePlanner planner(repository_, devices_, learned_, {}, [&probed](const Route& there, RouteCandidate* c) {
    probed.push_back(there.device.id.ToString());
    c->resident = there.device.id.kind == DeviceKind::kCpu;  // the cpu looks best, so the choice is visible
    c->latency_us = 10;
  });
  absl::StatusOr<Route> only_cpu = planner.Plan({"cpu_only", "", "auto", Precision::kAuto, true});
  ASSERT_TRUE(only_cpu.ok()) << only_cpu.status();
  EXPECT_EQ(only_cpu->device.id.ToString(), "cpu");
  EXPECT_TRUE(probed.empty()) << probed.size() << " probes for a single allowed device";

  absl::StatusOr<Route> chosen = planner.Plan({"any", "", "auto", Precision::kAuto, true});
  ASSERT_TRUE(chosen.ok()) << chosen.status();
  EXPECT_EQ(chosen->device.id.ToString(), "cpu");
  EXPECT_EQ(probed, (std::vector<std::string>{"cuda:0", "cpu"}));
}

// With background moves, a ready path whose latency there was learned, or
// guessed from another device's, has an estimate; one that rests on the
// latency assumed for a model never measured has none (0), which the
// regret does not judge. The route carries the run's part of it
// (compute_expected_us), which the job's expected compute falls back to
// before a run there is measured; a fallback to the cpu drops it.
TEST_F(RoutePlannerProbe, AReadyPathHasAnEstimateOnlyWhereTheLatencyWasMeasured) {
  struct Row {
    std::optional<double> cuda_us, cpu_us;
    std::string device;
    double expected_us;
  };
  const double speedup = RouterOptions{}.assumed_accelerator_speedup;
  const Row rows[] = {
      {400, 2000, "cuda:0", 400},                      // measured where it runs
      {std::nullopt, 2000, "cuda:0", 2000 / speedup},  // guessed from the cpu's latency
      {std::nullopt, std::nullopt, "cuda:0", 0},       // nothing measured: no estimate
      {4000, 2000, "cpu", 2000},                       // the cpu is faster and measured
      {400, std::nullopt, "cuda:0", 400},              // the cpu guessed from cuda:0's: slower
  };
  const FallbackReason oom{FallbackKind::kOutOfMemory, ""};
  for (const Row& r : rows) {
    RoutePlanner planner(repository_, devices_, learned_, {}, [&r](const Route& there, RouteCandidate* c) {
      c->resident = true;
      c->latency_us = there.device.id.kind == DeviceKind::kCpu ? r.cpu_us : r.cuda_us;
    });
    planner.SetMoveWanted([] {});
    absl::StatusOr<Route> route = planner.Plan({"any", "", "auto", Precision::kAuto, true});
    ASSERT_TRUE(route.ok()) << route.status();
    EXPECT_EQ(route->device.id.ToString(), r.device);
    EXPECT_DOUBLE_EQ(route->expected_us, r.expected_us) << r.device;
    // Resident, so the whole estimate is the run's (no queue ahead).
    EXPECT_DOUBLE_EQ(route->compute_expected_us, r.expected_us) << r.device;
    if (route->device.id.kind != DeviceKind::kCpu) {
      absl::StatusOr<Route> moved =
          planner.FallBackToCpu(*route, oom, Precision::kAuto, true, absl::ResourceExhaustedError("full"));
      ASSERT_TRUE(moved.ok()) << moved.status();
      EXPECT_DOUBLE_EQ(moved->compute_expected_us, 0) << "estimated for cuda:0, not the cpu";
    }
  }
}

}  // namespace
}  // namespace infergate

namespace infergate {
namespace {

// A config that names device ids: `auto` places the model only there, even
// when another device of the same kind is idle and preferred, and an
// explicit request elsewhere falls back (or fails) like any other device the
// model may not use.
TEST(RoutePlannerPinning, AModelPinnedToCuda1NeverRunsElsewhere) {
  TempRepository repo({
      {"on_cuda1", "inputs { name: \"x\" dtype: FLOAT32 dims: [4] } devices: [\"cuda:1\"]"},
      {"on_cuda1_or_cpu", "inputs { name: \"x\" dtype: FLOAT32 dims: [4] } devices: [\"cuda:1\", \"cpu\"]"},
      {"any_cuda", "inputs { name: \"x\" dtype: FLOAT32 dims: [4] } devices: [\"cuda\"]"},
  });
  ModelRepository repository(repo.root());
  ASSERT_TRUE(repository.Scan().ok());
  std::vector<DeviceInfo> infos = FakeDevices(/*cuda=*/true, /*mps=*/true);
  DeviceInfo cuda1 = infos[0];
  cuda1.id = {DeviceKind::kCuda, 1};
  infos.insert(infos.begin() + 1, cuda1);
  DeviceRegistry devices(std::move(infos));
  UnsupportedOpTable learned("", "test");
  // cuda:0 looks best to `auto` in every way: resident, idle, fastest.
  RoutePlanner planner(repository, devices, learned, {}, [](const Route& there, RouteCandidate* c) {
    bool cuda0 = there.device.id == DeviceId{DeviceKind::kCuda, 0};
    c->resident = cuda0;
    c->latency_us = cuda0 ? 10 : 10000;
    c->queued = cuda0 ? 0 : 50;
  });
  for (int i = 0; i < 20; ++i) {
    EXPECT_EQ(planner.Plan({"on_cuda1", "", "auto", Precision::kAuto, true})->device.id.ToString(), "cuda:1");
  }
  // The auto choice for a model pinned to a kind still weighs the devices of that kind.
  EXPECT_EQ(planner.Plan({"any_cuda", "", "auto", Precision::kAuto, true})->device.id.ToString(), "cuda:0");

  absl::StatusOr<Route> elsewhere = planner.Plan({"on_cuda1_or_cpu", "", "cuda:0", Precision::kAuto, true});
  ASSERT_TRUE(elsewhere.ok()) << elsewhere.status();
  EXPECT_EQ(elsewhere->device.id.ToString(), "cpu");
  EXPECT_EQ(elsewhere->fallback->ToString(), "device_not_allowed:cuda:0");
  EXPECT_EQ(planner.Plan({"on_cuda1_or_cpu", "", "cuda:0", Precision::kAuto, false}).status().code(),
            absl::StatusCode::kFailedPrecondition);
  // Not listing the cpu means no fallback there either.
  absl::StatusOr<Route> refused = planner.Plan({"on_cuda1", "", "cuda:0", Precision::kAuto, true});
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(refused.status().message().find("may not run on the cpu"), absl::string_view::npos) << refused.status();
  EXPECT_EQ(planner.Plan({"on_cuda1", "", "cuda:1", Precision::kAuto, false})->device.id.ToString(), "cuda:1");

  // With cuda:1 out of service, auto has nowhere to put it rather than moving it.
  devices.MarkUnhealthy({DeviceKind::kCuda, 1}, std::chrono::steady_clock::now() + std::chrono::minutes(1));
  absl::StatusOr<Route> nowhere = planner.Plan({"on_cuda1", "", "auto", Precision::kAuto, true});
  EXPECT_EQ(nowhere.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(planner.Plan({"on_cuda1_or_cpu", "", "auto", Precision::kAuto, true})->device.id.ToString(), "cpu");
}

// Where a repository update loads a new version before it is published.
TEST_F(RoutePlannerTest, UpdatesLoadWhereTheModelIsResidentOrWhereAColdStartWould) {
  const DeviceId cpu{DeviceKind::kCpu, 0}, cuda{DeviceKind::kCuda, 0}, mps{DeviceKind::kMps, 0};
  std::shared_ptr<const ModelEntry> any = repository_.Lookup("any");
  const FileStamp file = any->states.back().stamp;
  FileStamp package = file;
  package.package = true;
  auto resident = [](const char* model, int64_t version, DeviceId device, DType dtype) {
    ResidentModel r;
    r.key = {model, version, device, dtype, 1};
    return r;
  };
  auto names = [](const std::vector<LoadTarget>& targets) {
    std::string out;
    for (const LoadTarget& t : targets)
      absl::StrAppend(&out, out.empty() ? "" : " ", t.device.ToString(), "/", DTypeName(t.dtype));
    return out;
  };

  // A cold start: the first device auto prefers that the model allows, in AUTO's dtype there.
  EXPECT_EQ(names(RoutePlanner::UpdateTargets(*any, file, {}, devices_)),
            absl::StrCat("cuda:0/", DTypeName(RoutePlanner::ComputeDType(*any, file, devices_.Find(cuda)->precision,
                                                                         Precision::kAuto))));
  EXPECT_EQ(names(RoutePlanner::UpdateTargets(*repository_.Lookup("cpu_only"), file, {}, devices_)), "cpu/FLOAT32");
  // Resident: every device and dtype that holds any version of it, once;
  // other models' copies do not count.
  const std::vector<ResidentModel> copies = {
      resident("any", 1, mps, DType::kFloat16), resident("other", 1, cuda, DType::kFloat16),
      resident("any", 1, cpu, DType::kFloat32), resident("any", 2, cpu, DType::kFloat32)};
  EXPECT_EQ(names(RoutePlanner::UpdateTargets(*any, file, copies, devices_)), "mps/FLOAT16 cpu/FLOAT32");
  // A compiled package runs in the float32 it was exported in.
  EXPECT_EQ(names(RoutePlanner::UpdateTargets(*any, package, copies, devices_)), "mps/FLOAT32 cpu/FLOAT32");

  // After an accelerator's own failure: the cpu, unless it is listed or not allowed.
  std::optional<LoadTarget> instead = RoutePlanner::CpuInstead(*any, file, {{cuda, DType::kFloat16}}, devices_);
  ASSERT_TRUE(instead.has_value());
  EXPECT_EQ(names({*instead}), "cpu/FLOAT32");
  EXPECT_FALSE(RoutePlanner::CpuInstead(*any, file, {{cuda, DType::kFloat16}, {cpu, DType::kFloat32}}, devices_));
  EXPECT_FALSE(RoutePlanner::CpuInstead(*repository_.Lookup("gpu_only"), file, {{cuda, DType::kFloat16}}, devices_));
}

}  // namespace
}  // namespace infergate
