#include "scheduler/model/warmup_samples.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/file_digest.h"
#include "common/file_util.h"
#include "common/wire_strings.h"
#include "devices/torch_dtype.h"
#include "proto/proto_enums.h"
#include "scheduler/model/string_tensor.h"

namespace infergate {
namespace {

constexpr uint64_t kMaxWarmupFileBytes = 256ull << 20;

struct Row {
  DType dtype;
  std::vector<int64_t> dims;
  int64_t elements = 1;
};

// One row's tensor (the dims, no batch dimension).
absl::StatusOr<at::Tensor> RowTensor(const v1::WarmupInput& input, const Row& row, const std::string& field,
                                     const std::string& model_dir, at::Generator& generator,
                                     std::vector<std::string>* digests) {
  if (input.source() == v1::WarmupInput::DATA_FILE) {
    const std::string path = (std::filesystem::path(model_dir) / "warmup" / input.data_file()).string();
    std::error_code ec;
    if (!std::filesystem::is_regular_file(path, ec)) {
      return absl::InvalidArgumentError(absl::StrCat(field, ".data_file: ", path, " is not a file"));
    }
    if (std::filesystem::file_size(path, ec) > kMaxWarmupFileBytes) {
      return absl::InvalidArgumentError(
          absl::StrCat(field, ".data_file: ", path, " is larger than ", kMaxWarmupFileBytes >> 20, " MiB"));
    }
    absl::StatusOr<std::string> bytes = ReadFile(path, field + ".data_file");
    if (!bytes.ok()) return absl::InvalidArgumentError(bytes.status().message());
    absl::StatusOr<std::string> digest = Sha256OfFile(path, field + ".data_file");
    if (!digest.ok()) return digest.status();
    digests->push_back(*digest);
    if (row.dtype == DType::kBytes) {
      absl::StatusOr<std::vector<absl::string_view>> strings =
          ParseSerializedStrings(*bytes, row.elements, field + ".data_file");
      if (!strings.ok()) return strings.status();
      return MakeStringTensor(std::vector<std::string>(strings->begin(), strings->end()), row.dims);
    }
    const uint64_t expected = static_cast<uint64_t>(row.elements) * ElementSize(row.dtype);
    if (bytes->size() != expected) {
      return absl::InvalidArgumentError(absl::StrCat(field, ".data_file: ", path, " holds ", bytes->size(),
                                                     " bytes; one row of ", DTypeName(row.dtype), " [",
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

}  // namespace

absl::StatusOr<WarmupTensors> MakeWarmupTensors(const InputSignature& signature, const v1::WarmupSample& sample,
                                                size_t index, const std::string& model_dir) {
  const std::string where = absl::StrCat("warmup_samples[", index, "]");
  // The sample's inputs in the order the model takes them.
  std::vector<const v1::WarmupInput*> ordered;
  if (signature.inputs.empty()) {
    for (const v1::WarmupInput& input : sample.inputs()) ordered.push_back(&input);
  } else {
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
  }
  WarmupTensors out;
  std::vector<std::string> shapes, digests;
  at::Generator generator = at::detail::createCPUGenerator(/*seed_in=*/20261129);
  const int64_t rows = std::max<int64_t>(1, sample.batch_size());
  try {
    for (const v1::WarmupInput* input : ordered) {
      const std::string field = absl::StrCat(where, ".inputs[\"", input->name(), "\"]");
      const std::optional<DType> dtype = DTypeFromProto(input->dtype());
      if (!dtype) return absl::InvalidArgumentError(absl::StrCat(field, ".dtype: must be set"));
      Row row{*dtype, std::vector<int64_t>(input->dims().begin(), input->dims().end())};
      for (int64_t d : row.dims) {
        if (d < 1 || row.elements > (int64_t{1} << 40) / d) {
          return absl::InvalidArgumentError(absl::StrCat(field, ".dims: must be sizes of at least 1, at most 2^40 "
                                                                "elements in all"));
        }
        row.elements *= d;
      }
      absl::StatusOr<at::Tensor> one = RowTensor(*input, row, field, model_dir, generator, &digests);
      if (!one.ok()) return one.status();
      at::Tensor t = *one;
      if (signature.max_batch_size > 0) {
        if (IsStringTensor(t)) {
          t = JoinStringTensors(std::vector<at::Tensor>(static_cast<size_t>(rows), t.unsqueeze(0)));
        } else {
          t = t.unsqueeze(0).expand([&] {
                std::vector<int64_t> shape = {rows};
                shape.insert(shape.end(), row.dims.begin(), row.dims.end());
                return shape;
              }()).contiguous();
        }
      }
      shapes.push_back(absl::StrCat(input->name(), ":", DTypeName(row.dtype), "[", absl::StrJoin(t.sizes(), ","), "]",
                                    v1::WarmupInput::Source_Name(input->source())));
      out.tensors.push_back(std::move(t));
    }
  } catch (const std::exception& e) {
    return absl::ResourceExhaustedError(absl::StrCat(where, ": cannot make its inputs: ", e.what()));
  }
  out.fingerprint = absl::StrCat("warmup:", sample.name(), ":", absl::StrJoin(shapes, ";"),
                                 digests.empty() ? "" : ":", absl::StrJoin(digests, ","));
  return out;
}

}  // namespace infergate
