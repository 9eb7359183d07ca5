#include "service/torchserve/instance_text.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "devices/torch_dtype.h"
#include "service/call/numeric_json_data.h"
#include "service/http/json_scan.h"
#include "service/http/json_skip.h"

namespace infergate {
namespace {

// Walks nested lists, recording each depth's length (that of the first
// list there) and joining the innermost lists' text, comma-separated, into
// one flat list. False when the lists are not rectangular, a leaf is not
// number text, or anything else is there.
class ListWalk {
 public:
  ListWalk(absl::string_view text, int max_rank) : p_(text.data()), end_(text.data() + text.size()) {
    // The rank: the lists opened before the first element that is not one.
    for (const char* q = p_; q < end_ && (*q == '[' || IsJsonSpace(*q)); ++q) rank_ += *q == '[';
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
  void SkipSpace() { SkipJsonSpace(p_, end_); }

  // The list at p_, at `depth`: its length must be that of the first list
  // at this depth (shape_[depth], -1 until that list is read).
  bool List(size_t depth) {
    int64_t length = 0;
    if (static_cast<int>(depth) + 1 == rank_) {
      absl::string_view numbers;
      if (!ReadNumberList(p_, end_, &numbers)) return false;
      if (numbers.find_first_not_of(" \t\n\r") != absl::string_view::npos) {
        length = static_cast<int64_t>(std::count(numbers.begin(), numbers.end(), ',')) + 1;
        if (flat_.size() > 1) flat_.push_back(',');
        flat_.append(numbers.data(), numbers.size());
      }
    } else if (!ForEachJsonElement(p_, end_, '[', ']', [&] {
                 ++length;
                 return List(depth + 1);
               })) {
      return false;
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

// Walks a V1 body's top-level object for its `instances` array, taking
// each element that is a list (of lists) with no strings or objects in it,
// and skipping the other members' values (checked after, by the tree of
// the body without the array).
class V1BodyWalk {
 public:
  explicit V1BodyWalk(absl::string_view body) : body_(body), p_(body.data()), end_(body.data() + body.size()) {}

  bool Run() {
    SkipSpace();
    if (!ForEachJsonMember(p_, end_, [this](absl::string_view key) {
          if (key != "instances") return SkipValue();
          if (array_start_ != nullptr) return false;  // twice: which one the tree keeps is its business
          return Instances();
        })) {
      return false;
    }
    SkipSpace();
    return p_ == end_ && array_start_ != nullptr;
  }

  const std::vector<absl::string_view>& instances() const { return instances_; }
  // The body with the instances array replaced by `0`.
  std::string Rest() const {
    std::string rest(body_.data(), static_cast<size_t>(array_start_ - body_.data()));
    rest.push_back('0');
    rest.append(array_end_, static_cast<size_t>(end_ - array_end_));
    return rest;
  }

 private:
  void SkipSpace() { SkipJsonSpace(p_, end_); }
  bool Instances() {
    array_start_ = p_;
    if (!ForEachJsonElement(p_, end_, '[', ']', [this] {
          const char* start = p_;
          if (!SkipList()) return false;
          instances_.emplace_back(start, static_cast<size_t>(p_ - start));
          return true;
        })) {
      return false;
    }
    array_end_ = p_;
    return !instances_.empty();  // empty: the tree's error
  }
  // A list whose nesting holds no strings or objects (what an instance of
  // numbers is; InstanceTensorFromText reads it).
  bool SkipList() {
    if (p_ == end_ || *p_ != '[') return false;
    int depth = 0;
    while (p_ < end_) {
      const char c = *p_++;
      if (c == '"' || c == '{') return false;
      if (c == '[') ++depth;
      if (c == ']' && --depth == 0) return true;
    }
    return false;
  }
  // Any value, not validated.
  bool SkipValue() { return SkipJsonValue(p_, end_); }

  absl::string_view body_;
  const char* p_;
  const char* const end_;
  const char* array_start_ = nullptr;
  const char* array_end_ = nullptr;
  std::vector<absl::string_view> instances_;
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

std::optional<std::vector<absl::string_view>> V1InstanceTexts(absl::string_view body) {
  V1BodyWalk walk(body);
  if (!walk.Run()) return std::nullopt;
  // The rest must be JSON the tree takes (its depth and bytes checked as
  // the tree's parse checks them), an object whose `instances` is the 0.
  const std::string rest = walk.Rest();
  absl::StatusOr<nlohmann::json> tree = ParseBoundedJson(rest, "the V1 request body");
  if (!tree.ok() || !tree->is_object()) return std::nullopt;
  auto instances = tree->find("instances");
  if (instances == tree->end() || !instances->is_number_integer()) return std::nullopt;
  return walk.instances();
}

}  // namespace infergate
