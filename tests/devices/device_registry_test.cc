#include "devices/device_registry.h"

#include <gtest/gtest.h>

namespace infergate {
namespace {

DiscoveryOptions WithSimulated(const char* sim, const char* allow = "") {
  DiscoveryOptions o;
  o.simulated = *ParseSimulatedDevices(sim);
  o.allow = *ParseDeviceAllowList(allow);
  o.nvml_library = "libnvidia-ml-absent-in-tests.so";
  return o;
}

std::vector<std::string> Ids(const DeviceRegistry& r) {
  std::vector<std::string> out;
  for (const DeviceInfo& d : r.Snapshot()) out.push_back(d.id.ToString());
  return out;
}

// A simulated device charges a load's transfer: its entry's bandwidth and
// latency, or its kind's defaults (a PCIe 4 GPU; unified memory for MPS).
TEST(DeviceRegistry, SimulatedDevicesChargeTheirOwnOrTheirKindsTransferCost) {
  auto reg = DeviceRegistry::Discover(WithSimulated("cuda:0,bandwidth=1GB/s,transfer_latency=5ms,cuda:1,mps"));
  ASSERT_TRUE(reg.ok()) << reg.status();
  auto rules = [&](DeviceId id) { return reg->Find(id)->simulation; };
  EXPECT_DOUBLE_EQ(rules({DeviceKind::kCuda, 0})->transfer_bytes_per_second, 1e9);
  EXPECT_EQ(rules({DeviceKind::kCuda, 0})->transfer_latency, std::chrono::milliseconds(5));
  EXPECT_DOUBLE_EQ(rules({DeviceKind::kCuda, 1})->transfer_bytes_per_second, kSimulatedCudaBytesPerSecond);
  EXPECT_EQ(rules({DeviceKind::kCuda, 1})->transfer_latency, kSimulatedCudaTransferLatency);
  EXPECT_DOUBLE_EQ(rules({DeviceKind::kMps, 0})->transfer_bytes_per_second, kSimulatedMpsBytesPerSecond);
  EXPECT_EQ(rules({DeviceKind::kMps, 0})->transfer_latency, kSimulatedMpsTransferLatency);
}

TEST(DeviceRegistry, SimulatedDevicesAppearOnlyWhenAskedForInPreferenceOrder) {
  auto plain = DeviceRegistry::Discover(DiscoveryOptions{});
  ASSERT_TRUE(plain.ok());
  for (const DeviceInfo& d : plain->Snapshot()) EXPECT_FALSE(d.simulated) << d.id.ToString();

  auto reg = DeviceRegistry::Discover(WithSimulated("mps,cuda:1,cuda:0=2GiB@7.5"));
  ASSERT_TRUE(reg.ok()) << reg.status();
  EXPECT_EQ(Ids(*reg), (std::vector<std::string>{"cuda:0", "cuda:1", "mps", "cpu"}));
  auto cuda0 = reg->Find({DeviceKind::kCuda, 0});
  ASSERT_TRUE(cuda0.has_value());
  EXPECT_TRUE(cuda0->simulated);
  EXPECT_EQ(cuda0->compute_capability, "7.5");
  EXPECT_EQ(cuda0->memory_total_bytes, uint64_t{2} << 30);
  std::optional<PrecisionTraits> precision = reg->PrecisionOf({DeviceKind::kCuda, 0});
  ASSERT_TRUE(precision.has_value());
  EXPECT_EQ(precision->kind, DeviceKind::kCuda);
  EXPECT_EQ(precision->compute_capability, cuda0->precision.compute_capability);
  EXPECT_EQ(precision->compute_capability, 75);
  EXPECT_FALSE(reg->PrecisionOf({DeviceKind::kCuda, 7}).has_value());
  auto mps = reg->Find({DeviceKind::kMps, 0});
  ASSERT_TRUE(mps.has_value());
  ASSERT_NE(mps->simulation, nullptr);
  EXPECT_TRUE(mps->simulation->reject_float64);
  EXPECT_TRUE(mps->simulation->unsupported_ops.count("aten::upsample_bicubic2d"));
  for (DType t : mps->supported_dtypes) EXPECT_NE(t, DType::kFloat64);
}

TEST(DeviceRegistry, AllowListHidesEverythingButTheCpu) {
  auto reg = DeviceRegistry::Discover(WithSimulated("mps,cuda:0,cuda:1", "cpu"));
  ASSERT_TRUE(reg.ok());
  EXPECT_EQ(Ids(*reg), (std::vector<std::string>{"cpu"}));
  auto one = DeviceRegistry::Discover(WithSimulated("mps,cuda:0,cuda:1", "cuda:1"));
  ASSERT_TRUE(one.ok());
  EXPECT_EQ(Ids(*one), (std::vector<std::string>{"cuda:1", "cpu"}));
  auto kind = DeviceRegistry::Discover(WithSimulated("mps,cuda:0,cuda:1", "cuda"));
  ASSERT_TRUE(kind.ok());
  EXPECT_EQ(Ids(*kind), (std::vector<std::string>{"cuda:0", "cuda:1", "cpu"}));
  EXPECT_FALSE(ParseDeviceAllowList("cpu,auto").ok());
  EXPECT_FALSE(ParseDeviceAllowList("tpu").ok());
}

// Routing decisions (absent devices, allow and deny) are route planning's:
// tests/scheduler/routing/route_planner_test.cc. The registry only says what is in service.
TEST(DeviceRegistry, FailedDevicesLeaveServiceForTheirCooldownButTheCpuNever) {
  auto reg = DeviceRegistry::Discover(WithSimulated("mps,cuda:0"));
  ASSERT_TRUE(reg.ok());
  const DeviceId cuda{DeviceKind::kCuda, 0}, cpu{DeviceKind::kCpu, 0};
  EXPECT_FALSE(reg->OutOfService(cuda));
  reg->MarkUnhealthy(cuda, std::chrono::steady_clock::now() + std::chrono::minutes(1));
  reg->MarkUnhealthy(cpu, std::chrono::steady_clock::now() + std::chrono::minutes(1));
  EXPECT_TRUE(reg->OutOfService(cuda));
  EXPECT_FALSE(reg->OutOfService(cpu));
  std::vector<std::string> in_service;
  for (const DeviceId& id : reg->Available()) in_service.push_back(id.ToString());
  EXPECT_EQ(in_service, (std::vector<std::string>{"mps", "cpu"}));
  EXPECT_FALSE(reg->Find(cuda)->available);
  reg->MarkUnhealthy(cuda, std::chrono::steady_clock::now() - std::chrono::seconds(1));
  EXPECT_FALSE(reg->OutOfService(cuda));
  EXPECT_TRUE(reg->Find(cuda)->available);
}

}  // namespace
}  // namespace infergate
