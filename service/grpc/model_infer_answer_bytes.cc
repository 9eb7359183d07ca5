#include "service/grpc/model_infer_answer_bytes.h"

#include <algorithm>
#include <climits>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/wire_format_lite.h"
#include "service/grpc/message_bytes.h"

namespace infergate {
namespace {

using google::protobuf::internal::WireFormatLite;

// The tag and length that come before one raw output's bytes.
void AppendRawOutputHeader(uint64_t length, std::string* out) {
  const uint32_t tag = WireFormatLite::MakeTag(inference::ModelInferResponse::kRawOutputContentsFieldNumber,
                                               WireFormatLite::WIRETYPE_LENGTH_DELIMITED);
  uint8_t header[20];  // two varints of at most 10 bytes each
  uint8_t* end = google::protobuf::io::CodedOutputStream::WriteVarint32ToArray(tag, header);
  end = google::protobuf::io::CodedOutputStream::WriteVarint64ToArray(length, end);
  out->append(reinterpret_cast<const char*>(header), end - header);
}

void DeleteString(void* owned) { delete static_cast<std::string*>(owned); }

// An output this large or larger travels in a slice of its own; a smaller
// one is copied: the copy costs less than the slice's and the string's
// allocations (a one-row answer of the demo mlp is 40 bytes).
constexpr size_t kMovedOutputBytes = 4096;

}  // namespace

absl::Status SerializeModelInferAnswer(inference::ModelInferResponse& answer, grpc::ByteBuffer* bytes) {
  const bool any_moved = std::any_of(answer.raw_output_contents().begin(), answer.raw_output_contents().end(),
                                     [](const std::string& r) { return r.size() >= kMovedOutputBytes; });
  if (!any_moved) {
    // Small outputs only: the ordinary way, one slice.
    absl::Status serialized = SerializeAnswerBytes(answer, bytes);
    answer.clear_raw_output_contents();
    return serialized;
  }
  bytes->Clear();
  google::protobuf::RepeatedPtrField<std::string> raw;
  raw.Swap(answer.mutable_raw_output_contents());
  uint64_t total = answer.ByteSizeLong();
  for (const std::string& r : raw) total += 1 + 10 + r.size();  // at most: tag, length, bytes
  if (total > static_cast<uint64_t>(INT_MAX)) {
    return absl::InternalError(absl::StrCat("the answer (", total, " bytes) is too large for one message"));
  }
  // The small parts (the other fields, each output's header, and the
  // outputs under kMovedOutputBytes) are copied; each larger output's bytes
  // travel in the slice that owns them.
  std::vector<grpc::Slice> slices;
  slices.reserve(1 + 2 * raw.size());
  std::string small = answer.SerializeAsString();
  for (std::string& r : raw) {
    AppendRawOutputHeader(r.size(), &small);
    if (r.size() < kMovedOutputBytes) {
      small.append(r);
      continue;
    }
    slices.emplace_back(small);
    small.clear();
    auto* owned = new std::string(std::move(r));
    slices.emplace_back(owned->data(), owned->size(), &DeleteString, owned);
  }
  if (!small.empty() || slices.empty()) slices.emplace_back(small);
  grpc::ByteBuffer made(slices.data(), slices.size());
  bytes->Swap(&made);
  return absl::OkStatus();
}

}  // namespace infergate
