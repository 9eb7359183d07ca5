#pragma once
// The numeric `data` arrays of an Open Inference REST request body, decoded
// straight from the text into a tensor's bytes instead of through a JSON
// tree. A JSON tree holds each number as a node that the number's text was
// converted into first: parsing the 12,288 floats of a 64x64 RGB image that
// way took about ten times as long as converting them here, and the demo
// cnn's REST requests per second rose 1.6-1.7x with this path
// (bench/results/compare-rest-json-20261130T005109Z.md).
//
// FindNumericData walks the body's structure (no values converted) to each
// `inputs[i].data` that is a flat array of number text (digits, signs,
// points, exponents, commas and whitespace: whether those are JSON numbers
// is the decoder's to find), and gives the body with each such array
// replaced by `0` (for the tree of the rest) and the arrays' text per
// input. DecodeNumericData turns one array into
// `elements` values of a dtype exactly as the tree's decoding would
// (open_inference_json.cc, StoreElement: an integer token is taken as an
// integer, a fraction or exponent as a double, then cast) and refuses
// (false) anything that decoding would answer otherwise: a token outside
// JSON's number grammar, a fraction for an integer dtype, a value out of
// range, a count other than `elements`, BOOL and BYTES. A refusal sends the
// caller back to the tree for the whole body, whose errors name the field
// at fault, so the fast path changes no answer, only the time.
//
// The numbers are read by simdjson's On Demand parser, an array
// kNumericDataChunkBytes of its text at a time (so a thread's parser stays
// that size whatever the body): 3-4 times the speed of the hand-written
// reader it replaced, on the demo bodies (docs/benchmarks.md).
//
// Pure functions, safe on any thread (DecodeNumericData keeps a parser per
// thread, which holds nothing from one call to the next). The views point
// into the body given.

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include "absl/strings/string_view.h"
#include "devices/dtype.h"

namespace infergate {

// How much of an array's text DecodeNumericData gives its parser at once.
inline constexpr size_t kNumericDataChunkBytes = 64 * 1024;

struct NumericData {
  std::string body_without_arrays;             // the body, each found array replaced by `0`
  std::map<size_t, absl::string_view> arrays;  // input index -> its `data` array's text, brackets included
};

// The body's numeric `data` arrays; nullopt when there is none, or when the
// body's shape leaves the walk unsure of what the tree would hold (a key
// with an escape, a repeated `inputs` or `data` key, text that is not a
// JSON object): the tree decodes those bodies alone.
std::optional<NumericData> FindNumericData(absl::string_view body);

// `array` (as FindNumericData found it) as `elements` values of `dtype`,
// little-endian, into `out`; false, with `out` unspecified, where the
// tree's decoding must decide.
bool DecodeNumericData(absl::string_view array, DType dtype, int64_t elements, std::string* out);

}  // namespace infergate
