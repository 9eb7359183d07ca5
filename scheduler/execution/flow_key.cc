#include "scheduler/execution/flow_key.h"

#include "absl/strings/str_cat.h"

namespace infergate {

std::string FlowKey::ToString() const { return model.empty() ? "" : absl::StrCat(model, ":", version); }

}  // namespace infergate
