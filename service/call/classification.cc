#include "service/call/classification.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <cmath>
#include <numeric>

#include "absl/strings/str_cat.h"

namespace infergate {

absl::StatusOr<std::vector<std::vector<ClassScore>>> TopClasses(const at::Tensor& output, bool batched, uint64_t k,
                                                                const std::vector<std::string>* labels,
                                                                absl::string_view field) {
  const at::ScalarType type = output.scalar_type();
  const bool floating = at::isFloatingType(type);
  if (type == at::kBool || (!floating && !at::isIntegralType(type, /*includeBool=*/false))) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, ": classification needs an output of numbers; this one holds ", c10::toString(type)));
  }
  const int64_t rows = batched && output.dim() > 0 ? output.size(0) : 1;
  const int64_t per_row = rows > 0 ? output.numel() / rows : 0;
  at::Tensor values = output.reshape({rows, per_row}).to(at::kDouble).contiguous();
  at::Tensor integers;
  if (!floating) integers = output.reshape({rows, per_row}).to(at::kLong).contiguous();
  const double* v = values.data_ptr<double>();
  const size_t take = static_cast<size_t>(std::min<uint64_t>(k, static_cast<uint64_t>(per_row)));
  std::vector<std::vector<ClassScore>> out(static_cast<size_t>(rows));
  std::vector<int64_t> order(static_cast<size_t>(per_row));
  for (int64_t r = 0; r < rows; ++r) {
    const double* row = v + r * per_row;
    std::iota(order.begin(), order.end(), 0);
    // Highest first, ties by index, NaN last: a strict weak order.
    auto before = [row](int64_t a, int64_t b) {
      const bool nan_a = std::isnan(row[a]), nan_b = std::isnan(row[b]);
      if (nan_a != nan_b) return nan_b;
      if (!nan_a && row[a] != row[b]) return row[a] > row[b];
      return a < b;
    };
    std::partial_sort(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(take), order.end(), before);
    std::vector<ClassScore>& classes = out[static_cast<size_t>(r)];
    classes.reserve(take);
    for (size_t i = 0; i < take; ++i) {
      ClassScore c;
      c.index = static_cast<uint64_t>(order[i]);
      c.score = row[order[i]];
      c.score_text =
          floating ? std::to_string(c.score) : std::to_string(integers.data_ptr<int64_t>()[r * per_row + order[i]]);
      if (labels && c.index < labels->size()) c.label = (*labels)[c.index];
      classes.push_back(std::move(c));
    }
  }
  return out;
}

ClassBytes ClassesAsBytes(const std::vector<std::vector<ClassScore>>& rows, bool batched) {
  ClassBytes out;
  const size_t k = rows.empty() ? 0 : rows[0].size();
  if (batched) out.shape.push_back(static_cast<int64_t>(rows.size()));
  out.shape.push_back(static_cast<int64_t>(k));
  for (const auto& row : rows) {
    for (const ClassScore& c : row) {
      std::string text = absl::StrCat(c.score_text, ":", c.index);
      if (!c.label.empty()) absl::StrAppend(&text, ":", c.label);
      const uint32_t n = static_cast<uint32_t>(text.size());
      const char length[4] = {static_cast<char>(n & 0xff), static_cast<char>((n >> 8) & 0xff),
                              static_cast<char>((n >> 16) & 0xff), static_cast<char>((n >> 24) & 0xff)};
      out.raw.append(length, 4);
      out.raw.append(text);
    }
  }
  return out;
}

}  // namespace infergate
