#include "scheduler/execution/batch_tensors.h"

#include <ATen/ops/cat.h>

#include <numeric>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "scheduler/model/string_tensor.h"

namespace infergate {

std::vector<at::Tensor> ConcatBatch(const std::vector<std::vector<at::Tensor>>& parts) {
  if (parts.size() == 1) return parts[0];
  std::vector<at::Tensor> out;
  size_t inputs = parts.empty() ? 0 : parts[0].size();
  out.reserve(inputs);
  std::vector<at::Tensor> column(parts.size());
  for (size_t i = 0; i < inputs; ++i) {
    for (size_t j = 0; j < parts.size(); ++j) column[j] = parts[j][i];
    out.push_back(IsStringTensor(column[0]) ? JoinStringTensors(column) : at::cat(column, 0));
  }
  return out;
}

absl::StatusOr<std::vector<std::vector<NamedTensor>>> SplitBatch(const std::vector<NamedTensor>& outputs,
                                                                 const std::vector<int64_t>& rows) {
  int64_t total = std::accumulate(rows.begin(), rows.end(), int64_t{0});
  std::vector<std::vector<NamedTensor>> out(rows.size());
  if (rows.size() == 1) {
    out[0] = outputs;
    return out;
  }
  for (const NamedTensor& o : outputs) {
    if (o.tensor.dim() == 0 || o.tensor.size(0) != total) {
      return absl::InternalError(
          absl::StrCat("output '", o.name, "' has ", o.tensor.dim() == 0 ? int64_t{0} : o.tensor.size(0),
                       " rows for a batch of ", total, "; a batchable model must keep the batch dimension"));
    }
    int64_t offset = 0;
    for (size_t j = 0; j < rows.size(); ++j) {
      out[j].push_back({o.name, o.tensor.narrow(0, offset, rows[j]).contiguous()});
      offset += rows[j];
    }
  }
  return out;
}

}  // namespace infergate
