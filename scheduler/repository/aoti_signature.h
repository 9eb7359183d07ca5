#pragma once
// The signature an AOTInductor package (.pt2) declares for itself, and how
// it meets the model's config.pbtxt.
//
// LibTorch 2.6's packages record no input or output shapes: the compiled
// code trusts them. So the exporter writes them into the package's own
// metadata (torch._inductor.config.aot_inductor.metadata, a dict of
// strings kept in each variant's _metadata.json), under the key
// "infergate.config", as config.pbtxt text that holds only max_batch_size,
// inputs and outputs:
//
//   max_batch_size: 64
//   inputs { name: "x" dtype: FLOAT32 dims: [16] }
//   outputs { name: "y" dtype: FLOAT32 dims: [4] }
//
// tools/pt2_signature.py writes it from an ExportedProgram (the batch
// dimension's maximum from the export's range constraints).
//
// The rule (CompleteConfigFromPackage, CheckConfigAgainstPackage):
//   - a config that declares no inputs takes inputs, outputs and
//     max_batch_size from the package (a model folder may then hold no
//     config.pbtxt at all); one that declares no outputs takes the outputs;
//   - what the config declares must agree with the package: the same
//     inputs and outputs (names, dtypes, dims; a dim the package leaves
//     free, -1, may be fixed by the config), and a max_batch_size no larger
//     than the batch maximum it was exported with (0 on both sides, or on
//     neither). A version that disagrees is refused with the field named.
//
// What a compiled package can serve at all (CheckConfigForCompiledPackage),
// checked before anything is unpacked or opened:
//   1. the variant keeps its weights in its compiled library (LibTorch 2.6
//      reads no others);
//   2. the config agrees with the package's signature, where it carries one;
//   3. the config declares the inputs (from itself or the signature);
//   4. every input has a dtype and dims, each dim fixed (only the batch
//      dimension varies), and none is TYPE_STRING;
//   5. no output is TYPE_STRING (a package takes and returns tensors only).
//
// Pure functions; thread-safe.

#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "infergate/v1/model_config.pb.h"
#include "scheduler/repository/input_signature.h"

namespace infergate {

struct AotiVariant;

// The metadata key that carries the package's signature.
inline constexpr char kAotiSignatureKey[] = "infergate.config";

// The signature the variants of a package declare (nullopt: none does),
// parsed and checked as config.pbtxt text. INVALID_ARGUMENT when it is not
// valid config text, holds fields other than the three, or the variants
// that carry one disagree.
absl::StatusOr<std::optional<v1::ModelConfig>> PackageSignature(const std::vector<AotiVariant>& variants,
                                                                const std::string& model);

// `config` with what it leaves out taken from the package's `signature`.
v1::ModelConfig CompleteConfigFromPackage(v1::ModelConfig config, const v1::ModelConfig& signature);

// OK when `config` agrees with the package's `signature`; otherwise
// FAILED_PRECONDITION naming the config's field and both values.
absl::Status CheckConfigAgainstPackage(const v1::ModelConfig& config, const v1::ModelConfig& signature);

// OK (the inputs `config` declares, in order) when a model of `config` can
// be served from `variant`, one of the package's `variants`, by the rule
// above; otherwise an error whose message names the field or variant at
// fault (the loader adds the model and the file).
absl::StatusOr<InputSignature> CheckConfigForCompiledPackage(const v1::ModelConfig& config,
                                                             const std::vector<AotiVariant>& variants,
                                                             const AotiVariant& variant);

// The newest version folder's model.pt2 under model folder `dir` ("" when
// no version folder holds one).
std::string NewestPackageIn(const std::string& dir);

}  // namespace infergate
