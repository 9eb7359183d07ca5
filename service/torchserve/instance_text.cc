#include "service/torchserve/instance_text.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "devices/torch_dtype.h"
#include "service/call/numeric_json_data.h"

namespace infergate {
namespace {

bool IsSpace(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

// The bytes of a list of numbers between its brackets (as the numeric
// data walk takes them): digits, signs, points, exponents, commas and
// whitespace. Whether they are JSON's numbers is the reader's to find.
constexpr std::array<bool, 256> kNumberListBytes = [] {
  std::array<bool, 256> bytes{};
  for (unsigned char c : std::string_view("0123456789+-.eE, \t\n\r")) bytes[c] = true;
  return bytes;
}();

// Walks nested lists, recording each depth's length (that of the first
// list there) and joining the innermost lists' text, comma-separated, into
// one flat list. False when the lists are not rectangular, a leaf is not
// number text, or anything else is there.
class ListWalk {
 public:
  ListWalk(absl::string_view text, int max_rank) : p_(text.data()), end_(text.data() + text.size()) {
    // The rank: the lists opened before the first element that is not one.
    for (const char* q = p_; q < end_ && (*q == '[' || IsSpace(*q)); ++q) rank_ += *q == '[';
    if (rank_ > max_rank) rank_ = 0;
    shape_.assign(static_cast<size_t>(rank_), -1);
    flat_.push_back('[');
  }

  bool Run() {
    if (rank_ == 0) return false;
    SkipSpace();
    if (!List(0)) return false;
    SkipSpace();
    if (p_ != end_) return false;
    flat_.push_back(']');
    // The shape ends at the first empty list, as the tree's does (it reads
    // the lengths down the first elements); no depth past it was seen.
    for (size_t d = 0; d < shape_.size(); ++d) {
      if (shape_[d] == 0) {
        shape_.resize(d + 1);
        break;
      }
    }
    return true;
  }

  const std::vector<int64_t>& shape() const { return shape_; }
  const std::string& flat() const { return flat_; }

 private:
  void SkipSpace() {
    while (p_ < end_ && IsSpace(*p_)) ++p_;
  }

  // The list at p_, at `depth`: its length must be that of the first list
  // at this depth (shape_[depth], -1 until that list is read).
  bool List(size_t depth) {
    if (p_ == end_ || *p_ != '[') return false;
    ++p_;
    int64_t length = 0;
    if (static_cast<int>(depth) + 1 == rank_) {
      const char* start = p_;
      while (p_ < end_ && kNumberListBytes[static_cast<unsigned char>(*p_)]) ++p_;
      if (p_ == end_ || *p_ != ']') return false;
      const absl::string_view numbers(start, static_cast<size_t>(p_ - start));
      ++p_;
      if (numbers.find_first_not_of(" \t\n\r") != absl::string_view::npos) {
        length = static_cast<int64_t>(std::count(numbers.begin(), numbers.end(), ',')) + 1;
        if (flat_.size() > 1) flat_.push_back(',');
        flat_.append(numbers.data(), numbers.size());
      }
    } else {
      SkipSpace();
      if (p_ < end_ && *p_ == ']') {
        ++p_;
      } else {
        while (true) {
          if (!List(depth + 1)) return false;
          ++length;
          SkipSpace();
          if (p_ == end_) return false;
          if (*p_ == ']') {
            ++p_;
            break;
          }
          if (*p_ != ',') return false;
          ++p_;
          SkipSpace();
        }
      }
    }
    if (shape_[depth] < 0) shape_[depth] = length;
    return shape_[depth] == length;
  }

  const char* p_;
  const char* const end_;
  int rank_ = 0;
  std::vector<int64_t> shape_;
  std::string flat_;
};

}  // namespace

std::optional<at::Tensor> InstanceTensorFromText(absl::string_view text, DType dtype, const CodecLimits& limits) {
  if (dtype == DType::kBool || dtype == DType::kBytes) return std::nullopt;
  ListWalk walk(text, limits.max_rank);
  if (!walk.Run()) return std::nullopt;
  const std::vector<int64_t>& shape = walk.shape();
  absl::StatusOr<int64_t> elements = ValidateShape(shape, "instance", limits);
  if (!elements.ok()) return std::nullopt;
  // The tree casts doubles (or int64s) to the dtype with LibTorch; the
  // reader writes FP32, FP64 and the integers as that cast would, and
  // reads FP16 and BF16 as doubles for LibTorch to cast.
  const DType read_as = dtype == DType::kFloat16 || dtype == DType::kBFloat16 ? DType::kFloat64 : dtype;
  std::string bytes;
  if (*elements > 0 && !DecodeNumericData(walk.flat(), read_as, *elements, &bytes)) return std::nullopt;
  at::Tensor out = at::empty(shape, at::TensorOptions().dtype(ToScalarType(read_as)));
  if (!bytes.empty()) std::memcpy(out.data_ptr(), bytes.data(), bytes.size());
  return read_as == dtype ? out : out.to(ToScalarType(dtype));
}

}  // namespace infergate
