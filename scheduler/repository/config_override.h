#pragma once
// A model configuration sent with an explicit load (Triton's `config` load
// parameter), laid over the repository's config.pbtxt for as long as that
// load stands: the fields it sets replace the repository's (a list it sets,
// such as the inputs, replaces the whole list); the rest come from the
// file. The next explicit load without one returns to the file alone; the
// repository poll keeps it while the model's files change.
//
// Plain data: immutable once made, shared by the published model entry.

#include <set>
#include <string>

#include "infergate/v1/model_config.pb.h"

namespace infergate {

struct ConfigOverride {
  v1::ModelConfig values;
  // Top-level fields of v1::ModelConfig that `values` sets, by the .proto
  // name ("max_batch_size", "inputs", ...).
  std::set<std::string> fields;

  bool operator==(const ConfigOverride& other) const;
};

// `base` with `patch`'s fields in place of its own.
v1::ModelConfig ApplyConfigOverride(const v1::ModelConfig& base, const ConfigOverride& patch);

}  // namespace infergate
