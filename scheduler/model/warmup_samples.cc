#include "scheduler/model/warmup_samples.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/file_digest.h"
#include "common/file_util.h"
#include "common/status_macros.h"
#include "common/wire_strings.h"
#include "devices/torch_dtype.h"
#include "proto/proto_enums.h"
#include "scheduler/model/string_tensor.h"
#include "scheduler/model/torch_status.h"

namespace infergate {
namespace {

constexpr uint64_t kMaxWarmupFileBytes = 256ull << 20;

struct Row {
  DType dtype;
  std::vector<int64_t> dims;
  int64_t elements = 1;
};

// `name` inside <model_dir>/warmup: a relative path without "..", whose
// target (links resolved) stays in that folder. Errors name it as given.
absl::StatusOr<std::string> ConfinedDataFile(const std::string& model_dir, const std::string& name,
                                             const std::string& field) {
  namespace fs = std::filesystem;
  const fs::path given(name);
  bool climbs = false;
  for (const fs::path& part : given) climbs = climbs || part == "..";
  if (name.empty() || given.is_absolute() || given.has_root_name() || climbs) {
    return absl::InvalidArgumentError(absl::StrCat(field, ".data_file: '", name.substr(0, 128),
                                                   "' must be a relative path inside the model's warmup/ folder"));
  }
  std::error_code ec;
  const fs::path folder = fs::weakly_canonical(fs::path(model_dir) / "warmup", ec);
  if (ec) return absl::InvalidArgumentError(absl::StrCat(field, ".data_file: the model has no warmup/ folder"));
  const fs::path target = fs::weakly_canonical(folder / given, ec);
  if (ec) return absl::InvalidArgumentError(absl::StrCat(field, ".data_file: warmup/", name, " cannot be resolved"));
  const fs::path inside = target.lexically_relative(folder);
  if (inside.empty() || *inside.begin() == "..") {
    return absl::InvalidArgumentError(
        absl::StrCat(field, ".data_file: warmup/", name.substr(0, 128), " leads outside the model's warmup/ folder"));
  }
  return target.string();
}

// The declared input named `name`; null when the signature declares none.
const InputSpec* SpecNamed(const InputSignature& signature, const std::string& name) {
  for (const InputSpec& spec : signature.inputs) {
    if (spec.name == name) return &spec;
  }
  return nullptr;
}

// Whether `dims` (one row's) fit the declared `declared` (-1: any size).
bool DimsFit(const std::vector<int64_t>& declared, const std::vector<int64_t>& dims) {
  if (declared.size() != dims.size()) return false;
  for (size_t i = 0; i < dims.size(); ++i) {
    if (declared[i] != -1 && declared[i] != dims[i]) return false;
  }
  return true;
}

// What a row of `dtype` with `elements` holds once made (a string: its
// records, string_tensor.h).
uint64_t RowBytes(DType dtype, int64_t elements) {
  return static_cast<uint64_t>(elements) * (dtype == DType::kBytes ? 128 : ElementSize(dtype));
}

// One row's tensor (the dims, no batch dimension).
absl::StatusOr<at::Tensor> RowTensor(const v1::WarmupInput& input, const Row& row, const std::string& field,
                                     const std::string& model_dir, at::Generator& generator,
                                     std::vector<std::string>* digests) {
  if (input.source() == v1::WarmupInput::DATA_FILE) {
    ASSIGN_OR_RETURN(std::string confined, ConfinedDataFile(model_dir, input.data_file(), field));
    const std::string& path = confined;
    std::error_code ec;
    if (!std::filesystem::is_regular_file(path, ec)) {
      return absl::InvalidArgumentError(
          absl::StrCat(field, ".data_file: warmup/", input.data_file(), " is not a file of the model's"));
    }
    if (std::filesystem::file_size(path, ec) > kMaxWarmupFileBytes) {
      return absl::InvalidArgumentError(absl::StrCat(field, ".data_file: warmup/", input.data_file(),
                                                     " is larger than ", kMaxWarmupFileBytes >> 20, " MiB"));
    }
    absl::StatusOr<std::string> bytes = ReadFile(path, field + ".data_file");
    if (!bytes.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat(field, ".data_file: warmup/", input.data_file(), " cannot be read"));
    }
    ASSIGN_OR_RETURN(std::string digest, Sha256OfFile(path, field + ".data_file"));
    digests->push_back(digest);
    if (row.dtype == DType::kBytes) {
      ASSIGN_OR_RETURN(std::vector<absl::string_view> strings,
                       ParseSerializedStrings(*bytes, row.elements, field + ".data_file"));
      return MakeStringTensor(std::vector<std::string>(strings.begin(), strings.end()), row.dims);
    }
    const uint64_t expected = static_cast<uint64_t>(row.elements) * ElementSize(row.dtype);
    if (bytes->size() != expected) {
      return absl::InvalidArgumentError(absl::StrCat(field, ".data_file: warmup/", input.data_file(), " holds ",
                                                     bytes->size(), " bytes; one row of ", DTypeName(row.dtype), " [",
                                                     absl::StrJoin(row.dims, ","), "] is ", expected));
    }
    return at::from_blob(bytes->data(), row.dims, at::TensorOptions().dtype(ToScalarType(row.dtype))).clone();
  }
  if (row.dtype == DType::kBytes) {
    return MakeStringTensor(std::vector<std::string>(static_cast<size_t>(row.elements)), row.dims);
  }
  const at::TensorOptions options = at::TensorOptions().dtype(ToScalarType(row.dtype));
  if (input.source() == v1::WarmupInput::ZERO_DATA) return at::zeros(row.dims, options);
  if (row.dtype == DType::kBool) {
    return at::randint(0, 2, row.dims, generator, at::TensorOptions().dtype(at::kLong)).to(at::kBool);
  }
  if (IsFloatingPoint(row.dtype)) {
    return (at::rand(row.dims, generator, at::TensorOptions().dtype(at::kFloat)) * 2 - 1).to(options);
  }
  return at::randint(0, 10, row.dims, generator, at::TensorOptions().dtype(at::kLong)).to(options);
}

// The sample's inputs in the order the model takes them (as given when
// the model declares none), each named once.
absl::StatusOr<std::vector<const v1::WarmupInput*>> OrderedWarmupInputs(const InputSignature& signature,
                                                                        const v1::WarmupSample& sample,
                                                                        const std::string& where) {
  std::vector<const v1::WarmupInput*> ordered;
  if (signature.inputs.empty()) {
    for (const v1::WarmupInput& input : sample.inputs()) ordered.push_back(&input);
    return ordered;
  }
  for (const InputSpec& spec : signature.inputs) {
    auto it = std::find_if(sample.inputs().begin(), sample.inputs().end(),
                           [&](const v1::WarmupInput& w) { return w.name() == spec.name; });
    if (it == sample.inputs().end()) {
      return absl::InvalidArgumentError(absl::StrCat(where, ".inputs: gives no data for input '", spec.name, "'"));
    }
    ordered.push_back(&*it);
  }
  if (static_cast<size_t>(sample.inputs_size()) != ordered.size()) {
    return absl::InvalidArgumentError(absl::StrCat(where, ".inputs: names an input the model does not take"));
  }
  return ordered;
}

// One input's row (dtype, dims, elements), checked against the model's
// declared input and the element limit for `rows` rows (`batched_rows` of
// them in one tensor) before anything is read or allocated.
absl::StatusOr<Row> CheckedRow(const v1::WarmupInput* input, const InputSignature& signature, const std::string& where,
                               const WarmupLimits& limits, int64_t rows, int64_t batched_rows) {
  const std::string field = absl::StrCat(where, ".inputs[\"", input->name().substr(0, 64), "\"]");
  const std::optional<DType> dtype = DTypeFromProto(input->dtype());
  if (!dtype) return absl::InvalidArgumentError(absl::StrCat(field, ".dtype: must be set"));
  Row row{*dtype, std::vector<int64_t>(input->dims().begin(), input->dims().end())};
  if (const InputSpec* spec = SpecNamed(signature, input->name())) {
    if (spec->dtype && *spec->dtype != *dtype) {
      return absl::InvalidArgumentError(absl::StrCat(field, ".dtype: ", DTypeName(*dtype), ", but the model's input '",
                                                     spec->name, "' is ", DTypeName(*spec->dtype)));
    }
    if (spec->dims && !DimsFit(*spec->dims, row.dims)) {
      return absl::InvalidArgumentError(absl::StrCat(field, ".dims: [", absl::StrJoin(row.dims, ","),
                                                     "] do not fit the model's input '", spec->name, "' [",
                                                     absl::StrJoin(*spec->dims, ","), "] (-1: any size)"));
    }
  }
  for (int64_t d : row.dims) {
    if (d < 1 || row.elements > limits.max_elements / d) {
      return absl::InvalidArgumentError(absl::StrCat(field, ".dims: must be sizes of at least 1, at most ",
                                                     limits.max_elements, " elements in all (as a request's)"));
    }
    row.elements *= d;
  }
  if (row.elements > limits.max_elements / batched_rows) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, ": ", rows, " rows of ", row.elements, " elements are more than ", limits.max_elements));
  }
  return row;
}

}  // namespace

absl::StatusOr<WarmupTensors> MakeWarmupTensors(const InputSignature& signature, const v1::WarmupSample& sample,
                                                size_t index, const std::string& model_dir,
                                                const WarmupLimits& limits) {
  const std::string where = absl::StrCat("warmup_samples[", index, "]");
  ASSIGN_OR_RETURN(const std::vector<const v1::WarmupInput*> ordered, OrderedWarmupInputs(signature, sample, where));
  WarmupTensors out;
  std::vector<std::string> shapes, digests;
  at::Generator generator = at::detail::createCPUGenerator(/*seed_in=*/20261129);
  const int64_t rows = std::max<int64_t>(1, sample.batch_size());
  if (signature.max_batch_size > 0 && static_cast<uint64_t>(rows) > signature.max_batch_size) {
    return absl::InvalidArgumentError(absl::StrCat(where, ".batch_size: ", rows,
                                                   " is more than the model's "
                                                   "max_batch_size of ",
                                                   signature.max_batch_size));
  }
  // Every input's shape is checked, and the sample's size, before anything
  // is read or allocated. A model that does not batch takes one row.
  const int64_t batched_rows = signature.max_batch_size > 0 ? rows : 1;
  std::vector<Row> row_of;
  uint64_t sample_bytes = 0;
  for (const v1::WarmupInput* input : ordered) {
    ASSIGN_OR_RETURN(Row row, CheckedRow(input, signature, where, limits, rows, batched_rows));
    sample_bytes += RowBytes(row.dtype, row.elements) * static_cast<uint64_t>(batched_rows);
    row_of.push_back(std::move(row));
  }
  if (sample_bytes > limits.max_sample_bytes) {
    return absl::ResourceExhaustedError(absl::StrCat(where, ": its inputs take ", sample_bytes,
                                                     " bytes, more than the ", limits.max_sample_bytes,
                                                     " a warm-up sample may"));
  }
  const uint64_t count = std::max<uint32_t>(1, sample.count());
  if (sample_bytes > 0 && count > limits.max_work_bytes / sample_bytes) {
    return absl::ResourceExhaustedError(absl::StrCat(where, ".count: ", count, " runs of ", sample_bytes,
                                                     " bytes each pass the ", limits.max_work_bytes,
                                                     " bytes a warm-up sample may run through the model"));
  }
  try {
    for (size_t k = 0; k < ordered.size(); ++k) {
      const v1::WarmupInput* input = ordered[k];
      const Row& row = row_of[k];
      const std::string field = absl::StrCat(where, ".inputs[\"", input->name().substr(0, 64), "\"]");
      ASSIGN_OR_RETURN(at::Tensor one, RowTensor(*input, row, field, model_dir, generator, &digests));
      at::Tensor t = one;
      if (signature.max_batch_size > 0) {
        if (IsStringTensor(t)) {
          t = JoinStringTensors(std::vector<at::Tensor>(static_cast<size_t>(rows), t.unsqueeze(0)));
        } else {
          t = t.unsqueeze(0)
                  .expand([&] {
                    std::vector<int64_t> shape = {rows};
                    shape.insert(shape.end(), row.dims.begin(), row.dims.end());
                    return shape;
                  }())
                  .contiguous();
        }
      }
      shapes.push_back(absl::StrCat(input->name(), ":", DTypeName(row.dtype), "[", absl::StrJoin(t.sizes(), ","), "]",
                                    v1::WarmupInput::Source_Name(input->source())));
      out.tensors.push_back(std::move(t));
    }
  } catch (const std::exception& e) {
    return absl::ResourceExhaustedError(
        absl::StrCat(where, ": cannot make its inputs: ", ConciseTorchMessage(e.what())));
  }
  out.fingerprint = absl::StrCat("warmup:", sample.name(), ":", absl::StrJoin(shapes, ";"), digests.empty() ? "" : ":",
                                 absl::StrJoin(digests, ","));
  return out;
}

}  // namespace infergate
