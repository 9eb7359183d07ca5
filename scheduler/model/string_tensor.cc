#include "scheduler/model/string_tensor.h"

#include <ATen/ops/from_blob.h>

#include <cstring>
#include <exception>
#include <memory>
#include <numeric>

#include "absl/strings/str_cat.h"
#include "common/utf8.h"
#include "devices/torch_dtype.h"

namespace infergate {
namespace {

// What a string tensor's storage holds. Its data is `references`: one
// int64 per element, the address of the element's string_view (in
// `views`, or in a part's storage for a joined batch).
struct StringStorage {
  std::vector<std::string> owned;        // the strings, when the tensor owns them
  std::vector<absl::string_view> views;  // into `owned`, or into bytes the caller keeps alive
  std::vector<int64_t> references;
  std::vector<at::Tensor> parts;  // a joined batch: the tensors whose views it refers to
};

void DeleteStringStorage(void* storage) { delete static_cast<StringStorage*>(storage); }

int64_t ReferenceTo(const absl::string_view& view) { return static_cast<int64_t>(reinterpret_cast<intptr_t>(&view)); }

const absl::string_view& Referenced(int64_t reference) {
  return *reinterpret_cast<const absl::string_view*>(static_cast<intptr_t>(reference));
}

// The tensor over `storage`'s references; takes ownership of it.
at::Tensor Wrap(std::unique_ptr<StringStorage> storage, at::IntArrayRef shape) {
  if (storage->references.empty()) storage->references.reserve(1);  // a non-null data pointer
  void* data = storage->references.data();
  StringStorage* context = storage.get();
  at::Tensor tensor = at::for_blob(data, shape)
                          .context(context, &DeleteStringStorage)
                          .options(at::TensorOptions().dtype(at::kLong))
                          .make_tensor();
  storage.release();  // the tensor's storage owns it now
  return tensor;
}

at::Tensor OverViews(std::unique_ptr<StringStorage> storage, const std::vector<int64_t>& shape) {
  storage->references.reserve(storage->views.size());
  for (const absl::string_view& v : storage->views) storage->references.push_back(ReferenceTo(v));
  return Wrap(std::move(storage), shape);
}

}  // namespace

at::Tensor MakeStringTensor(std::vector<std::string> strings, const std::vector<int64_t>& shape) {
  auto storage = std::make_unique<StringStorage>();
  storage->owned = std::move(strings);
  storage->views.reserve(storage->owned.size());
  for (const std::string& s : storage->owned) storage->views.emplace_back(s);
  return OverViews(std::move(storage), shape);
}

at::Tensor StringTensorOver(std::vector<absl::string_view> views, const std::vector<int64_t>& shape) {
  auto storage = std::make_unique<StringStorage>();
  storage->views = std::move(views);
  return OverViews(std::move(storage), shape);
}

bool IsStringTensor(const at::Tensor& tensor) {
  return tensor.defined() && tensor.has_storage() && tensor.storage().data_ptr().get_deleter() == &DeleteStringStorage;
}

std::optional<DType> TensorDType(const at::Tensor& tensor) {
  if (IsStringTensor(tensor)) return DType::kBytes;
  return FromScalarType(tensor.scalar_type());
}

std::vector<absl::string_view> StringElements(const at::Tensor& tensor) {
  // A non-contiguous view copies its references; they still refer to
  // `tensor`'s storage, which the caller holds.
  const at::Tensor references = tensor.contiguous();
  const int64_t* r = references.const_data_ptr<int64_t>();
  std::vector<absl::string_view> out;
  out.reserve(static_cast<size_t>(references.numel()));
  for (int64_t i = 0; i < references.numel(); ++i) out.push_back(Referenced(r[i]));
  return out;
}

at::Tensor JoinStringTensors(const std::vector<at::Tensor>& parts) {
  auto storage = std::make_unique<StringStorage>();
  std::vector<int64_t> shape = parts.at(0).sizes().vec();
  int64_t rows = 0;
  size_t elements = 0;
  for (const at::Tensor& p : parts) {
    TORCH_CHECK(IsStringTensor(p), "joining a batch: a string input's part is not a string tensor");
    TORCH_CHECK(p.dim() == static_cast<int64_t>(shape.size()) && p.dim() > 0 &&
                    std::equal(shape.begin() + 1, shape.end(), p.sizes().begin() + 1),
                "joining a batch: string inputs of different shapes");
    rows += p.size(0);
    elements += static_cast<size_t>(p.numel());
  }
  shape[0] = rows;
  storage->references.reserve(elements);
  for (const at::Tensor& p : parts) {
    const at::Tensor references = p.contiguous();
    const int64_t* r = references.const_data_ptr<int64_t>();
    storage->references.insert(storage->references.end(), r, r + references.numel());
    storage->parts.push_back(p);
  }
  return Wrap(std::move(storage), shape);
}

c10::List<std::string> ToStringList(const at::Tensor& tensor) {
  c10::List<std::string> list;
  const std::vector<absl::string_view> elements = StringElements(tensor);
  list.reserve(elements.size());
  for (absl::string_view s : elements) list.push_back(std::string(s));
  return list;
}

at::Tensor FromStringList(const c10::List<std::string>& list) {
  std::vector<std::string> strings;
  strings.reserve(list.size());
  for (size_t i = 0; i < list.size(); ++i) strings.push_back(list.get(i));
  const int64_t count = static_cast<int64_t>(strings.size());
  return MakeStringTensor(std::move(strings), {count});
}

absl::Status CheckStringsAreText(const std::vector<NamedTensor>& inputs, absl::string_view model) {
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!IsStringTensor(inputs[i].tensor)) continue;
    const std::vector<absl::string_view> strings = StringElements(inputs[i].tensor);
    for (size_t k = 0; k < strings.size(); ++k) {
      if (std::optional<size_t> bad = FirstInvalidUtf8(strings[k])) {
        return absl::InvalidArgumentError(absl::StrCat(
            "inputs[", i, "] '", inputs[i].name.substr(0, 64), "': BYTES element ", k, " is not valid UTF-8 (byte ",
            *bad, "); model '", model, "' takes each element as a TorchScript str"));
      }
    }
  }
  return absl::OkStatus();
}

uint64_t StringInputHeldBytes(const std::vector<NamedTensor>& inputs) {
  // Per element: its reference (8) and view (16), a joined batch's
  // reference (8), and the model's List[str] entry (an IValue, 16) holding
  // a TorchScript string object (refcounts and vtable, 24, and its
  // std::string, 32, in an allocation of its own, 16 more): 120, rounded
  // to 128 for the allocator's slack. Measured: a million one-byte
  // strings through a List[str] model raised RSS by some 250 MB beside
  // their 112 MB parse tree when charged at 80 B each.
  constexpr uint64_t kPerElement = 128;
  uint64_t bytes = 0;
  for (const NamedTensor& t : inputs) {
    if (!IsStringTensor(t.tensor)) continue;
    for (absl::string_view s : StringElements(t.tensor)) bytes += kPerElement + s.size();
  }
  return bytes;
}

}  // namespace infergate
