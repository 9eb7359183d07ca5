// What clients may read of the server's text: no native back-trace, no code
// address, no path under the server's private folders.
#include "common/client_text.h"

#include <gtest/gtest.h>

namespace infergate {
namespace {

TEST(ClientText, CutsBackTracesAndAddresses) {
  const std::string torch =
      "The size of tensor a (3) must match the size of tensor b (4)\n"
      "Exception raised from infer_size_impl at ../aten/src/ATen/ExpandUtils.cpp:31 (most recent call first):\n"
      "frame #0: c10::Error::Error(c10::SourceLocation, std::string) + 0x96 (0x7f3e6ae245c5 in libc10.so)\n"
      "frame #1: <unknown function> + 0x1234 (0x00007f3e6ae245c5 in libtorch_cpu.so)\n";
  EXPECT_EQ(ForClients(torch), "The size of tensor a (3) must match the size of tensor b (4)");
  EXPECT_EQ(ForClients("bad handle 0x7f3e6ae245c5 here, small 0x1f kept"), "bad handle 0x? here, small 0x1f kept");
  EXPECT_EQ(ForClients("a \"quoted\"\n"), "a \"quoted\"\n") << "text without a back-trace is left as it is";
}

TEST(ClientText, WritesPrivatePathsRelative) {
  RegisterPrivateFolder("/srv/test-repository");
  RegisterPrivateFolder("/srv/test-repository/inner/");
  EXPECT_EQ(ForClients("cannot read /srv/test-repository/mlp/1/model.pt: no such file"),
            "cannot read mlp/1/model.pt: no such file");
  EXPECT_EQ(ForClients("in /srv/test-repository/inner/x"), "in x") << "the longest folder first";
  EXPECT_EQ(ForClients("/srv/other/model.pt"), "/srv/other/model.pt");
  RegisterPrivateFolder("relative/ignored");
  EXPECT_EQ(ForClients("relative/ignored/x"), "relative/ignored/x");
}

}  // namespace
}  // namespace infergate
