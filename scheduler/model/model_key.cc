#include "scheduler/model/model_key.h"

#include "absl/strings/str_cat.h"

namespace infergate {

std::string ModelKey::ToString() const {
  return absl::StrCat(model, ":", version, "@", device.ToString(), "/", DTypeName(dtype));
}

}  // namespace infergate
