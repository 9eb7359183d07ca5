#include "devices/simulation.h"

#include <gtest/gtest.h>

#include <vector>

#include "devices/device_failure.h"

namespace infergate {
namespace {

TEST(Simulation, ParsesDeviceSpecs) {
  auto specs = ParseSimulatedDevices("mps, cuda:0=2GiB@7.5 ,cuda:1=512MiB,mps@13");
  ASSERT_FALSE(specs.ok());  // mps twice
  specs = ParseSimulatedDevices("mps@13, cuda:0=2GiB@7.5 ,cuda:1=512MiB");
  ASSERT_TRUE(specs.ok()) << specs.status();
  ASSERT_EQ(specs->size(), 3u);
  EXPECT_EQ((*specs)[0].id, (DeviceId{DeviceKind::kMps, 0}));
  EXPECT_EQ((*specs)[0].macos_major, 13);
  EXPECT_EQ((*specs)[1].id, (DeviceId{DeviceKind::kCuda, 0}));
  EXPECT_EQ((*specs)[1].memory_bytes, uint64_t{2} << 30);
  EXPECT_EQ((*specs)[1].compute_capability, 75);
  EXPECT_EQ((*specs)[2].memory_bytes, uint64_t{512} << 20);
  EXPECT_EQ((*specs)[2].compute_capability, 80);
  EXPECT_TRUE(ParseSimulatedDevices("")->empty());
}

TEST(Simulation, RejectsBadSpecsNamingTheFlag) {
  for (const char* bad : {"cpu", "gpu", "cuda:0=lots", "cuda:0@x", "cuda:0=0", "cuda:0,cuda:0", "auto"}) {
    auto specs = ParseSimulatedDevices(bad);
    ASSERT_FALSE(specs.ok()) << bad;
    EXPECT_NE(specs.status().message().find("--simulate-devices"), absl::string_view::npos) << specs.status();
  }
}

// Each device's transfer cost follows it in the list; unset, the kind's
// default applies (set by the registry, device_registry_test).
TEST(Simulation, ParsesEachDevicesTransferCostAndComputeScale) {
  auto specs =
      ParseSimulatedDevices("cuda:0=8GiB@8.0,bandwidth=12GB/s,transfer_latency=3ms,mps,cuda:1,bandwidth=1GiB/s");
  ASSERT_TRUE(specs.ok()) << specs.status();
  ASSERT_EQ(specs->size(), 3u);
  EXPECT_EQ((*specs)[0].memory_bytes, uint64_t{8} << 30);
  EXPECT_DOUBLE_EQ((*specs)[0].transfer_bytes_per_second, 12e9);
  EXPECT_EQ((*specs)[0].transfer_latency, std::chrono::milliseconds(3));
  EXPECT_DOUBLE_EQ((*specs)[1].transfer_bytes_per_second, 0);  // the default
  EXPECT_LT((*specs)[1].transfer_latency.count(), 0);
  EXPECT_DOUBLE_EQ((*specs)[2].transfer_bytes_per_second, double{1 << 30});
  EXPECT_DOUBLE_EQ((*specs)[0].compute_scale, 0);  // wall time
  specs = ParseSimulatedDevices("cuda:0,compute_scale=2.5,mps");
  ASSERT_TRUE(specs.ok()) << specs.status();
  EXPECT_DOUBLE_EQ((*specs)[0].compute_scale, 2.5);
  EXPECT_DOUBLE_EQ((*specs)[1].compute_scale, 0);
  for (const char* bad :
       {"bandwidth=12GB/s,cuda:0", "cuda:0,bandwidth=12GB", "cuda:0,bandwidth=0/s", "cuda:0,bandwidth=fast/s",
        "cuda:0,transfer_latency=soon", "compute_scale=2,cuda:0", "cuda:0,compute_scale=0", "cuda:0,compute_scale=-1",
        "cuda:0,compute_scale=nan", "cuda:0,compute_scale=fast", "cuda:0,compute_scale=1e9"}) {
    auto refused = ParseSimulatedDevices(bad);
    ASSERT_FALSE(refused.ok()) << bad;
    EXPECT_NE(refused.status().message().find("--simulate-devices"), absl::string_view::npos) << refused.status();
  }
}

// A load's simulated transfer: the fixed cost plus the bytes over the
// bandwidth (a 200 MB model over PCIe 4: 2 ms + 16.7 ms).
TEST(Simulation, TransferTimeIsTheLatencyPlusTheBytesOverTheBandwidth) {
  SimulationRules rules;
  EXPECT_EQ(SimulatedTransferTime(rules, 1 << 30).count(), 0) << "no cost set: free";
  rules.transfer_bytes_per_second = kSimulatedCudaBytesPerSecond;
  rules.transfer_latency = kSimulatedCudaTransferLatency;
  EXPECT_EQ(SimulatedTransferTime(rules, 0).count(), 2000);
  EXPECT_EQ(SimulatedTransferTime(rules, 200000000).count(), 2000 + 16667);
}

// A slower CPU's extra: the run is held to factor times the least work a
// run of its model with as many rows has taken (its own CPU time, or its
// wall time when threads shared the core), whatever this run took.
TEST(Simulation, ASlowerCpuHoldsTheRunToTheFactorTimesItsLeastWork) {
  struct Row {
    double wall_us, least_work_us, factor, extra_us;
  };
  for (const Row& r : std::vector<Row>{
           {60, 60, 4, 180},   // the run took its least: held to 4x it
           {120, 60, 4, 120},  // a slower run (another thread took the memory bus) is held to the same end
           {300, 60, 4, 0},    // past it already: nothing added
           {100, 60, 1, 0},    // no slowdown
           {100, 60, 0.5, 0},  // never faster
       }) {
    EXPECT_DOUBLE_EQ(SimulatedCpuExtraUs(r.wall_us, r.least_work_us, r.factor), r.extra_us)
        << r.wall_us << " " << r.least_work_us << " " << r.factor;
  }
}

TEST(Simulation, MemoryLedgerNeverOvercommits) {
  MemoryLedger ledger(100);
  EXPECT_TRUE(ledger.TryReserve(60));
  EXPECT_FALSE(ledger.TryReserve(41));
  EXPECT_EQ(ledger.used(), 60u);
  EXPECT_TRUE(ledger.TryReserve(40));
  ledger.Release(100);
  EXPECT_EQ(ledger.used(), 0u);
  EXPECT_EQ(ledger.peak(), 100u);  // the high-water mark stays
}

TEST(Simulation, OpNames) {
  EXPECT_EQ(OpBaseName("aten::upsample_bicubic2d.out"), "aten::upsample_bicubic2d");
  EXPECT_EQ(OpBaseName(" aten::relu "), "aten::relu");
  EXPECT_EQ(UnsupportedOpFromMessage("The operator 'aten::foo.Tensor_out' is not currently implemented for the MPS "
                                     "device. If you want ..."),
            "aten::foo");
  EXPECT_EQ(UnsupportedOpFromMessage("something else"), "");
}

TEST(DeviceFailure, RoundTripsOnAStatus) {
  absl::Status s = WithDeviceFailure(absl::InternalError("boom"), DeviceFailure::kUnsupportedOp, "aten::x");
  auto f = DeviceFailureOf(s);
  ASSERT_TRUE(f.has_value());
  EXPECT_EQ(f->kind, DeviceFailure::kUnsupportedOp);
  EXPECT_EQ(f->detail, "aten::x");
  EXPECT_EQ(s.message(), "boom");
  EXPECT_FALSE(DeviceFailureOf(absl::InternalError("plain")).has_value());
}

}  // namespace
}  // namespace infergate
