#include "scheduler/model/model_load_error.h"

#include <gtest/gtest.h>

namespace infergate {
namespace {

// LibTorch 2.6's own messages for each case (as torch.jit.load raised them),
// and what the error must and must not say.
struct LoadErrorCase {
  const char* what;
  const char* libtorch_message;
  std::vector<std::string> names;
  std::vector<std::string> leaves_out;
};

const LoadErrorCase kLoadErrorCases[] = {
    {"an op this LibTorch lacks",
     "\nUnknown builtin op: aten::sigmoid_from_the_future.\nCould not find any similar ops to "
     "aten::sigmoid_from_the_future. This op may not exist or may not be currently supported in TorchScript.\n:\n"
     "  File \"code/__torch__.py\", line 8\n  def forward(self: __torch__.M,\n    a: Tensor) -> Tensor:\n"
     "    return torch.sigmoid_from_the_future(a)\n           ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~ <--- HERE\n",
     {"calls aten::sigmoid_from_the_future", "LibTorch 2.6.0", "newer PyTorch", "model 'm'", "/r/m/1/model.pt"},
     {"def forward", "<--- HERE", "__torch__"}},
    {"an op LibTorch 1.13 lacked (what a 2.x transformer needs)",
     "\nUnknown builtin op: aten::scaled_dot_product_attention.\nHere are some suggestions: ...\n",
     {"calls aten::scaled_dot_product_attention", "LibTorch 2.6.0"},
     {"suggestions"}},
    {"a newer file format",
     "[enforce fail at inline_container.cc:226] . Attempted to read a PyTorch file with version 99, but the maximum "
     "supported version for reading is 10. The version of your PyTorch installation may be too old, please upgrade "
     "PyTorch to latest version to mitigate this issue.\nException raised from init at inline_container.cc:226",
     {"file format version is 99", "reads versions up to 10", "LibTorch 2.6.0", "newer PyTorch"},
     {"enforce fail", "Exception raised"}},
    {"a type this LibTorch does not know",
     "\nUnknown type name 'NewType':\n  File \"code/__torch__.py\", line 3\n",
     {"uses the type NewType", "LibTorch 2.6.0"},
     {"code/__torch__.py"}},
    {"a file that is not a TorchScript archive",
     "PytorchStreamReader failed reading zip archive: failed finding central directory\nException raised from "
     "valid at inline_container.cc:239 (most recent call first):\nframe #0: c10::Error::Error",
     {"PytorchStreamReader failed reading zip archive: failed finding central directory"},
     {"frame #0", "Exception raised"}},
};

TEST(ModelLoadError, EachCaseIsFailedPreconditionNamingItsCause) {
  for (const LoadErrorCase& c : kLoadErrorCases) {
    absl::Status s = ModelLoadError("m", "/r/m/1/model.pt", c.libtorch_message, "2.6.0");
    EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << c.what;
    for (const std::string& n : c.names) {
      EXPECT_NE(s.message().find(n), absl::string_view::npos) << c.what << ": no '" << n << "' in " << s.message();
    }
    for (const std::string& n : c.leaves_out) {
      EXPECT_EQ(s.message().find(n), absl::string_view::npos) << c.what << ": '" << n << "' in " << s.message();
    }
  }
}

}  // namespace
}  // namespace infergate
