#include "devices/simulation.h"

#include <gtest/gtest.h>

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
