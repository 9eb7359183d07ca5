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

struct ResolveCase {
  const char* request;
  bool allow_fallback;
  absl::StatusCode code;
  const char* device;
  const char* reason;
};

TEST(DeviceRegistry, ResolveWithAllowAndDeny) {
  auto reg = DeviceRegistry::Discover(WithSimulated("mps,cuda:0"));
  ASSERT_TRUE(reg.ok());
  const ResolveCase cases[] = {
      {"", true, absl::StatusCode::kOk, "cuda:0", ""},
      {"auto", false, absl::StatusCode::kOk, "cuda:0", ""},
      {"cpu", false, absl::StatusCode::kOk, "cpu", ""},
      {"mps", false, absl::StatusCode::kOk, "mps", ""},
      {"cuda", false, absl::StatusCode::kOk, "cuda:0", ""},
      {"cuda:0", false, absl::StatusCode::kOk, "cuda:0", ""},
      {"cuda:7", true, absl::StatusCode::kOk, "cpu", "device_unavailable:cuda:7"},
      {"cuda:7", false, absl::StatusCode::kFailedPrecondition, "", ""},
  };
  for (const ResolveCase& c : cases) {
    auto res = reg->Resolve(*ParseDeviceRequest(c.request), c.allow_fallback);
    EXPECT_EQ(res.status().code(), c.code) << c.request;
    if (!res.ok()) continue;
    EXPECT_EQ(res->device.ToString(), c.device) << c.request;
    EXPECT_EQ(res->fell_back, std::string(c.reason) != "") << c.request;
    EXPECT_EQ(res->fallback_reason, c.reason) << c.request;
  }
  auto cpu_only = DeviceRegistry::Discover(WithSimulated("", "cpu"));
  auto mps = cpu_only->Resolve(*ParseDeviceRequest("mps"), true);
  ASSERT_TRUE(mps.ok());
  EXPECT_EQ(mps->fallback_reason, "device_unavailable:mps");
  EXPECT_EQ(cpu_only->Resolve(*ParseDeviceRequest("mps"), false).status().code(),
            absl::StatusCode::kFailedPrecondition);
}

}  // namespace
}  // namespace infergate
