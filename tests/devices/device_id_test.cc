#include "devices/device_id.h"

#include <gtest/gtest.h>

namespace infergate {
namespace {

struct Good {
  const char* text;
  bool automatic;
  DeviceKind kind;
  int index;
  bool any_index;
  const char* canonical;
};

TEST(ParseDeviceRequest, AcceptsEveryDocumentedForm) {
  const Good cases[] = {
      {"", true, DeviceKind::kCpu, 0, false, "auto"},
      {"auto", true, DeviceKind::kCpu, 0, false, "auto"},
      {"AUTO", true, DeviceKind::kCpu, 0, false, "auto"},
      {"cpu", false, DeviceKind::kCpu, 0, false, "cpu"},
      {" CPU ", false, DeviceKind::kCpu, 0, false, "cpu"},
      {"mps", false, DeviceKind::kMps, 0, false, "mps"},
      {"cuda", false, DeviceKind::kCuda, 0, true, "cuda"},
      {"cuda:0", false, DeviceKind::kCuda, 0, false, "cuda:0"},
      {"cuda:7", false, DeviceKind::kCuda, 7, false, "cuda:7"},
      {"cuda:15", false, DeviceKind::kCuda, 15, false, "cuda:15"},
  };
  for (const Good& c : cases) {
    auto r = ParseDeviceRequest(c.text);
    ASSERT_TRUE(r.ok()) << c.text << ": " << r.status();
    EXPECT_EQ(r->automatic, c.automatic) << c.text;
    if (!c.automatic) {
      EXPECT_EQ(r->kind, c.kind) << c.text;
      EXPECT_EQ(r->index, c.index) << c.text;
      EXPECT_EQ(r->any_index, c.any_index) << c.text;
    }
    EXPECT_EQ(r->ToString(), c.canonical) << c.text;
  }
}

TEST(ParseDeviceRequest, RejectsAnythingElseNamingTheString) {
  for (const char* bad : {"gpu", "cuda:", "cuda:-1", "cuda:x", "cuda:1:2", "cuda0", "mps:0", "cpu:0", "tpu",
                          "cuda:99999", "cuda: 1", "metal"}) {
    auto r = ParseDeviceRequest(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_NE(r.status().message().find("device"), absl::string_view::npos);
    EXPECT_NE(r.status().message().find(bad), absl::string_view::npos) << r.status();
  }
}

TEST(DeviceId, FormatsLikeLibTorch) {
  EXPECT_EQ((DeviceId{DeviceKind::kCpu, 0}).ToString(), "cpu");
  EXPECT_EQ((DeviceId{DeviceKind::kCuda, 3}).ToString(), "cuda:3");
  EXPECT_EQ((DeviceId{DeviceKind::kMps, 0}).ToString(), "mps");
}

}  // namespace
}  // namespace infergate
