#include "service/call/call_tally.h"

#include "absl/strings/str_cat.h"
#include "scheduler/execution/drain_refusal.h"

namespace infergate {

size_t CallTally::IndexOf(absl::StatusCode code) {
  const auto i = static_cast<size_t>(code);
  return i < kCodes ? i : static_cast<size_t>(absl::StatusCode::kUnknown);
}

void CallTally::Count(const absl::Status& status) {
  counts_[IndexOf(status.code())].fetch_add(1, std::memory_order_relaxed);
  if (IsDrainRefusal(status)) drain_refusals_.fetch_add(1, std::memory_order_relaxed);
}

uint64_t CallTally::drain_refusals() const { return drain_refusals_.load(std::memory_order_relaxed); }

uint64_t CallTally::Of(absl::StatusCode code) const { return counts_[IndexOf(code)].load(std::memory_order_relaxed); }

uint64_t CallTally::Total() const {
  uint64_t total = 0;
  for (const auto& c : counts_) total += c.load(std::memory_order_relaxed);
  return total;
}

std::string CallTally::Summary() const {
  uint64_t total = 0;
  std::string parts;
  for (size_t i = 0; i < kCodes; ++i) {
    const uint64_t n = counts_[i].load(std::memory_order_relaxed);
    if (n == 0) continue;
    total += n;
    absl::StrAppend(&parts, parts.empty() ? "" : ", ", absl::StatusCodeToString(static_cast<absl::StatusCode>(i)), " ",
                    n);
  }
  std::string out =
      absl::StrCat("answered ", total, " inference call", total == 1 ? "" : "s", parts.empty() ? "" : ": ", parts);
  if (const uint64_t refused = drain_refusals(); refused > 0)
    absl::StrAppend(&out, "; ", refused, " refused while draining");
  return out;
}

}  // namespace infergate
