#include "service/call/numeric_json_data.h"

#include <simdjson.h>

#include <algorithm>
#include <bit>
#include <cstring>
#include <memory>
#include <string_view>

#include "devices/half_float.h"
#include "service/http/json_skip.h"

namespace infergate {
namespace {

// Walks the body's structure without converting a value: the top-level
// object's `inputs` array, each input object's `data`. `unsure` is set
// where the tree might hold something other than what the walk saw.
class BodyWalk {
 public:
  explicit BodyWalk(absl::string_view body) : p_(body.data()), end_(body.data() + body.size()) {}

  // The arrays found (input index -> text); empty when unsure.
  std::map<size_t, absl::string_view> Run() {
    SkipJsonSpace(p_, end_);
    // ForEachJsonMember refuses a key with an escape: it may spell "inputs".
    if (!ForEachJsonMember(p_, end_, [this](absl::string_view key) {
          if (key != "inputs") return SkipValue();
          if (seen_inputs_) return false;  // which one the tree keeps is its business
          seen_inputs_ = true;
          return p_ < end_ && *p_ == '[' ? Inputs() : SkipValue();
        })) {
      return {};
    }
    SkipJsonSpace(p_, end_);
    if (p_ != end_) return {};  // text after the object: the tree refuses it
    return std::move(arrays_);
  }

 private:
  bool Inputs() {
    size_t index = 0;
    return ForEachJsonElement(p_, end_, '[', ']', [&] {
      const size_t this_input = index++;
      if (p_ == end_ || *p_ != '{') return SkipValue();
      bool seen_data = false;
      return ForEachJsonMember(p_, end_, [&](absl::string_view key) {
        if (key != "data") return SkipValue();
        if (seen_data) return false;
        seen_data = true;
        // An array of number bytes only: whether each number is one is
        // the decoder's to find (it refuses text that is not), so the walk
        // reads each byte once and converts nothing.
        const char* start = p_;
        absl::string_view numbers;
        if (ReadNumberList(p_, end_, &numbers)) {
          arrays_[this_input] = absl::string_view(start, static_cast<size_t>(p_ - start));
          return true;
        }
        p_ = start;  // not a flat array of numbers: the tree's
        return SkipValue();
      });
    });
  }

  // Any value, not validated (the tree parses what the walk skipped).
  bool SkipValue() { return SkipJsonValue(p_, end_); }

  const char* p_;
  const char* const end_;
  bool seen_inputs_ = false;
  std::map<size_t, absl::string_view> arrays_;
};

template <typename T>
void Store(T value, char* at) {
  std::memcpy(at, &value, sizeof(T));
  if constexpr (std::endian::native != std::endian::little) std::reverse(at, at + sizeof(T));
}

void StoreFloat(double value, DType dtype, char* at) {
  switch (dtype) {
    case DType::kFloat64: Store<double>(value, at); break;
    case DType::kFloat32: Store<float>(static_cast<float>(value), at); break;
    case DType::kFloat16: Store<uint16_t>(FloatToHalf(static_cast<float>(value)), at); break;
    default: Store<uint16_t>(FloatToBFloat16(static_cast<float>(value)), at); break;
  }
}

// A fraction or exponent token the tree decodes as zero although its
// digits are not all zero: an underflow, which the tree's strtod reports;
// left to the tree.
bool UnderflowsToZero(std::string_view token) {
  for (char c : token) {
    if (c == 'e' || c == 'E') return false;
    if (c >= '1' && c <= '9') return true;
  }
  return false;
}

// One number as the tree's decoding stores it (StoreElement: an integer
// token as an integer, then cast; a fraction or an exponent as the double
// strtod gives); false where that decoding would refuse it or take it
// otherwise. simdjson types a number by its token as the tree does (-0 is
// an integer), refuses text outside JSON's number grammar and doubles that
// overflow, and rounds a double correctly.
bool StoreNumber(simdjson::ondemand::value& value, DType dtype, char* at) {
  simdjson::ondemand::number number;
  if (value.get_number().get(number) != simdjson::SUCCESS) return false;
  int64_t integer = 0;
  switch (number.get_number_type()) {
    case simdjson::ondemand::number_type::signed_integer: integer = number.get_int64(); break;
    case simdjson::ondemand::number_type::floating_point_number: {
      const bool float_dtype =
          dtype == DType::kFloat32 || dtype == DType::kFloat64 || dtype == DType::kFloat16 || dtype == DType::kBFloat16;
      if (!float_dtype) return false;  // a fraction or an exponent for an integer dtype
      const double real = number.get_double();
      if (real == 0 && UnderflowsToZero(value.raw_json_token())) return false;
      StoreFloat(real, dtype, at);
      return true;
    }
    default: return false;  // past int64's range: the tree takes it otherwise
  }
  switch (dtype) {
    case DType::kFloat32:
    case DType::kFloat64:
    case DType::kFloat16:
    case DType::kBFloat16: StoreFloat(static_cast<double>(integer), dtype, at); return true;
    case DType::kInt64: Store<int64_t>(integer, at); return true;
    case DType::kInt32:
      if (integer < INT32_MIN || integer > INT32_MAX) return false;
      Store<int32_t>(static_cast<int32_t>(integer), at);
      return true;
    case DType::kInt16:
      if (integer < INT16_MIN || integer > INT16_MAX) return false;
      Store<int16_t>(static_cast<int16_t>(integer), at);
      return true;
    case DType::kInt8:
      if (integer < INT8_MIN || integer > INT8_MAX) return false;
      *at = static_cast<char>(static_cast<int8_t>(integer));
      return true;
    case DType::kUInt8:
      if (integer < 0 || integer > UINT8_MAX) return false;
      *at = static_cast<char>(static_cast<uint8_t>(integer));
      return true;
    default: return false;  // BOOL and BYTES hold no numbers
  }
}

// simdjson's On Demand parser given an array's elements a chunk at a time.
// A parser needs about six bytes per byte of the largest document it was
// given, and simdjson reads up to SIMDJSON_PADDING bytes past a document's
// end, so each chunk (at most kChunkBytes of elements, cut at a comma)
// is copied between brackets into a padded buffer of a fixed size: a
// thread's parser and buffer stay under half a megabyte whatever the body.
// One per thread (a parser is not for two threads at once); it holds no
// state between calls.
class ChunkedArrayParser {
 public:
  static constexpr size_t kChunkBytes = kNumericDataChunkBytes;

  ChunkedArrayParser() : buffer_(new char[kChunkBytes + 2 + simdjson::SIMDJSON_PADDING]()) {}

  // Calls `element(value)` for each element of `elements` (an array's text
  // between its brackets), in order; false when a chunk is not a JSON array,
  // one element is longer than a chunk, or `element` returned false. An
  // empty chunk (text such as "1,,2" cut at a comma) is an empty array
  // here: the caller counts the elements against the commas.
  template <typename Element>
  bool ForEach(std::string_view elements, Element element) {
    do {
      std::string_view chunk = elements;
      if (chunk.size() > kChunkBytes) {
        const size_t comma = elements.rfind(',', kChunkBytes - 1);
        if (comma == std::string_view::npos) return false;
        chunk = elements.substr(0, comma);
        elements.remove_prefix(comma + 1);
      } else {
        elements = {};
      }
      if (!Parse(chunk, element)) return false;
    } while (!elements.empty());
    return true;
  }

 private:
  template <typename Element>
  bool Parse(std::string_view chunk, Element& element) {
    char* text = buffer_.get();
    text[0] = '[';
    std::memcpy(text + 1, chunk.data(), chunk.size());
    text[chunk.size() + 1] = ']';
    simdjson::ondemand::document document;
    simdjson::padded_string_view view(text, chunk.size() + 2, kChunkBytes + 2 + simdjson::SIMDJSON_PADDING);
    if (parser_.iterate(view).get(document) != simdjson::SUCCESS) return false;
    simdjson::ondemand::array array;
    if (document.get_array().get(array) != simdjson::SUCCESS) return false;
    // After any error the document is left as it is: simdjson's iterator
    // is not to be used past one.
    for (auto result : array) {
      simdjson::ondemand::value value;
      if (result.get(value) != simdjson::SUCCESS || !element(value)) return false;
    }
    return document.at_end();
  }

  std::unique_ptr<char[]> buffer_;
  simdjson::ondemand::parser parser_{kChunkBytes + 2};
};

}  // namespace

std::optional<NumericData> FindNumericData(absl::string_view body) {
  std::map<size_t, absl::string_view> arrays = BodyWalk(body).Run();
  if (arrays.empty()) return std::nullopt;
  NumericData out;
  size_t kept = body.size();
  for (const auto& [index, array] : arrays) kept -= array.size() - 1;
  out.body_without_arrays.reserve(kept);
  const char* from = body.data();
  // The arrays lie in the body in input order.
  for (const auto& [index, array] : arrays) {
    out.body_without_arrays.append(from, static_cast<size_t>(array.data() - from));
    out.body_without_arrays.push_back('0');
    from = array.data() + array.size();
  }
  out.body_without_arrays.append(from, static_cast<size_t>(body.data() + body.size() - from));
  out.arrays = std::move(arrays);
  return out;
}

bool DecodeNumericData(absl::string_view array, DType dtype, int64_t elements, std::string* out) {
  const size_t size = ElementSize(dtype);
  if (size == 0 || dtype == DType::kBool || elements < 0 || array.size() < 2 || array.front() != '[' ||
      array.back() != ']') {
    return false;
  }
  // Counted before memory is taken, by its separators (the walk took only
  // flat arrays of numbers, and the decoding below refuses any other): a
  // shape that claims more values than the array holds costs nothing.
  const char* first = array.data() + 1;
  SkipJsonSpace(first, array.data() + array.size());
  const int64_t count = *first == ']' ? 0 : static_cast<int64_t>(std::count(array.begin(), array.end(), ',')) + 1;
  if (count != elements) return false;
  out->resize(static_cast<size_t>(elements) * size);
  char* at = out->data();
  int64_t stored = 0;
  thread_local ChunkedArrayParser parser;
  return parser.ForEach(std::string_view(array.data() + 1, array.size() - 2), [&](simdjson::ondemand::value& value) {
    if (++stored > elements || !StoreNumber(value, dtype, at)) return false;
    at += size;
    return true;
  }) && stored == elements;
}

}  // namespace infergate
