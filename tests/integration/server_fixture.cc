#include "tests/integration/server_fixture.h"

#include <torch/script.h>

namespace infergate::testing {

at::Tensor Reference(const std::string& model, const std::vector<at::Tensor>& inputs, int version) {
  torch::jit::Module m = torch::jit::load(DemoRepository() + "/" + model + "/" + std::to_string(version) + "/model.pt");
  m.eval();
  c10::InferenceMode guard;
  std::vector<c10::IValue> args(inputs.begin(), inputs.end());
  return m.forward(args).toTensor();
}

}  // namespace infergate::testing
