#pragma once
// Which of a model's forward() arguments a request fills, as a pure
// function of forward()'s schema and the config's declared inputs.
//
// Models saved by PyTorch 2.x often take optional arguments:
// nn.TransformerEncoder's forward(src, mask=None, src_key_padding_mask=None,
// is_causal=None), attention blocks with an optional mask. The rules:
//   - a Tensor argument without a default is an input, always; so is a
//     List[str] one (a string input: BYTES on the wire, TYPE_STRING in
//     config.pbtxt, which must declare it so when it declares it);
//   - an Optional[Tensor] (or defaulted Tensor) argument is an input when
//     the config declares it, and is left at its default (None when it has
//     none) otherwise;
//   - any other argument with a default is left at its default;
//   - any other argument without a default cannot be served (named).
// Inputs keep forward()'s order. When an input follows an argument left at
// its default, the model is called with keyword arguments. A declared input
// fills the argument of its name or, by Triton's PyTorch-backend convention,
// "<name>__<N>" (INPUT__0, INPUT__1) fills argument N. Where some declared
// name follows neither (an exported "input:0"), the declared inputs fill
// forward()'s required Tensor and List[str] arguments in the config's order,
// as Triton's strict config ordering does, when their counts agree.

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "scheduler/repository/input_signature.h"

namespace infergate {

struct ForwardArgument {
  std::string name;
  std::string type;              // as TorchScript prints it, e.g. "Tensor", "Optional[Tensor]", "bool"
  bool tensor = false;           // Tensor
  bool optional_tensor = false;  // Optional[Tensor]
  bool has_default = false;
  bool strings = false;  // List[str]
};

struct ForwardInputs {
  InputSignature signature;  // the inputs, in forward()'s order, with the config's names, dtypes and dims
  std::vector<std::string> argument_names;  // forward()'s name for each input (keyword calls)
  bool by_keyword = false;                  // call forward() with keyword arguments
  // Optional[Tensor] arguments without a default that no input fills: the
  // call passes None for each (by keyword).
  std::vector<std::string> pass_none;
};

// `declared` is the config's signature, or nullptr when it declares no
// inputs (then the required Tensor arguments are the inputs, shapes unknown).
// FAILED_PRECONDITION naming the argument or input at fault.
absl::StatusOr<ForwardInputs> MatchForwardArguments(const std::string& model,
                                                    const std::vector<ForwardArgument>& arguments,
                                                    const InputSignature* declared, uint32_t max_batch_size);

}  // namespace infergate
