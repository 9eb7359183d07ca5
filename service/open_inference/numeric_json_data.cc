#include "service/open_inference/numeric_json_data.h"

#include <algorithm>
#include <bit>
#include <charconv>
#include <cstring>
#include <limits>
#include <system_error>

#include "service/open_inference/open_inference_json.h"

namespace infergate {
namespace {

bool IsSpace(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }
bool IsDigit(char c) { return c >= '0' && c <= '9'; }

// One JSON number's text, by the grammar of RFC 8259 section 6:
//   -? (0 | [1-9][0-9]*) (. [0-9]+)? ([eE] [+-]? [0-9]+)?
// `integer`: neither fraction nor exponent (the tree keeps those as
// integers).
struct NumberToken {
  absl::string_view text;
  bool integer = true;
};

// Reads the number at `p`; false (p unspecified) when the text there is not one.
bool ReadNumber(const char*& p, const char* end, NumberToken* token) {
  const char* start = p;
  if (p < end && *p == '-') ++p;
  if (p == end || !IsDigit(*p)) return false;
  if (*p == '0') {
    ++p;
  } else {
    while (p < end && IsDigit(*p)) ++p;
  }
  token->integer = true;
  if (p < end && *p == '.') {
    ++p;
    if (p == end || !IsDigit(*p)) return false;
    while (p < end && IsDigit(*p)) ++p;
    token->integer = false;
  }
  if (p < end && (*p == 'e' || *p == 'E')) {
    ++p;
    if (p < end && (*p == '+' || *p == '-')) ++p;
    if (p == end || !IsDigit(*p)) return false;
    while (p < end && IsDigit(*p)) ++p;
    token->integer = false;
  }
  token->text = absl::string_view(start, static_cast<size_t>(p - start));
  return true;
}

void SkipSpace(const char*& p, const char* end) {
  while (p < end && IsSpace(*p)) ++p;
}

// Calls `element()` with `p` at each element of the list at `p` (`open`
// ... `close`, elements parted by commas), which must move `p` past it;
// leaves `p` after `close`. False when the text is no such list or
// `element` returned false.
template <typename Element>
bool ForEachElement(const char*& p, const char* end, char open, char close, Element element) {
  if (p == end || *p != open) return false;
  ++p;
  SkipSpace(p, end);
  if (p < end && *p == close) {
    ++p;
    return true;
  }
  while (true) {
    if (!element()) return false;
    SkipSpace(p, end);
    if (p == end) return false;
    if (*p == close) {
      ++p;
      return true;
    }
    if (*p != ',') return false;
    ++p;
    SkipSpace(p, end);
  }
}

// Calls `visit(token)` for each number of the flat array at `p` ('['),
// leaving `p` after its ']'; false when it is not a flat array of numbers
// (or `visit` returned false).
template <typename Visit>
bool ForEachNumber(const char*& p, const char* end, Visit visit) {
  return ForEachElement(p, end, '[', ']', [&] {
    NumberToken token;
    return ReadNumber(p, end, &token) && visit(token);
  });
}

// Walks the body's structure without converting a value: the top-level
// object's `inputs` array, each input object's `data`. `unsure` is set
// where the tree might hold something other than what the walk saw.
class BodyWalk {
 public:
  explicit BodyWalk(absl::string_view body) : p_(body.data()), end_(body.data() + body.size()) {}

  // The arrays found (input index -> text); empty when unsure.
  std::map<size_t, absl::string_view> Run() {
    SkipSpace(p_, end_);
    if (!Object([this](absl::string_view key) {
          if (key != "inputs") return SkipValue();
          if (seen_inputs_) return false;  // which one the tree keeps is its business
          seen_inputs_ = true;
          return p_ < end_ && *p_ == '[' ? Inputs() : SkipValue();
        })) {
      return {};
    }
    SkipSpace(p_, end_);
    if (p_ != end_) return {};  // text after the object: the tree refuses it
    return std::move(arrays_);
  }

 private:
  // The object at p_, calling `member(key)` with p_ at each value (which
  // it must pass); false when the walk cannot tell.
  template <typename Member>
  bool Object(Member member) {
    return ForEachElement(p_, end_, '{', '}', [&] {
      absl::string_view key;
      if (!Key(&key)) return false;
      SkipSpace(p_, end_);
      if (p_ == end_ || *p_ != ':') return false;
      ++p_;
      SkipSpace(p_, end_);
      return member(key);
    });
  }

  bool Inputs() {
    size_t index = 0;
    return ForEachElement(p_, end_, '[', ']', [&] {
      const size_t this_input = index++;
      if (p_ == end_ || *p_ != '{') return SkipValue();
      bool seen_data = false;
      return Object([&](absl::string_view key) {
        if (key != "data") return SkipValue();
        if (seen_data) return false;
        seen_data = true;
        const char* start = p_;
        if (ForEachNumber(p_, end_, [](const NumberToken&) { return true; })) {
          arrays_[this_input] = absl::string_view(start, static_cast<size_t>(p_ - start));
          return true;
        }
        p_ = start;  // not a flat array of numbers: the tree's
        return SkipValue();
      });
    });
  }

  // A key without escapes (one with an escape may spell "data" otherwise).
  bool Key(absl::string_view* key) {
    if (p_ == end_ || *p_ != '"') return false;
    const char* start = ++p_;
    while (p_ < end_ && *p_ != '"') {
      if (*p_ == '\\') return false;
      ++p_;
    }
    if (p_ == end_) return false;
    *key = absl::string_view(start, static_cast<size_t>(p_ - start));
    ++p_;
    return true;
  }

  bool SkipString() {
    ++p_;  // '"'
    while (p_ < end_ && *p_ != '"') p_ += *p_ == '\\' ? 2 : 1;
    if (p_ >= end_) return false;
    ++p_;
    return true;
  }

  // Any value, not validated (the tree parses what the walk skipped).
  bool SkipValue() {
    if (p_ == end_) return false;
    if (*p_ == '"') return SkipString();
    if (*p_ == '{' || *p_ == '[') {
      int depth = 0;
      while (p_ < end_) {
        const char c = *p_;
        if (c == '"') {
          if (!SkipString()) return false;
          continue;
        }
        ++p_;
        if (c == '{' || c == '[') {
          ++depth;
        } else if (c == '}' || c == ']') {
          if (--depth == 0) return true;
        }
      }
      return false;
    }
    const char* start = p_;
    while (p_ < end_ && *p_ != ',' && *p_ != '}' && *p_ != ']' && !IsSpace(*p_)) ++p_;
    return p_ != start;
  }

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

// One token as the tree's decoding stores it (StoreElement); false where
// that decoding would refuse it or take it otherwise.
bool StoreNumber(const NumberToken& token, DType dtype, char* at) {
  const char* first = token.text.data();
  const char* last = first + token.text.size();
  int64_t integer = 0;
  if (token.integer) {
    // The tree keeps an integer token as an integer (beyond int64's range
    // it does otherwise: left to it).
    const auto [end, error] = std::from_chars(first, last, integer);
    if (error != std::errc() || end != last) return false;
  }
  switch (dtype) {
    case DType::kFloat32:
    case DType::kFloat64:
    case DType::kFloat16:
    case DType::kBFloat16: {
      double value = static_cast<double>(integer);
      if (!token.integer) {
        // Correctly rounded, as the tree's strtod is; out of range (an
        // overflow, or an underflow to zero) is left to the tree.
        const auto [end, error] = std::from_chars(first, last, value);
        if (error != std::errc() || end != last) return false;
      }
      switch (dtype) {
        case DType::kFloat64: Store<double>(value, at); break;
        case DType::kFloat32: Store<float>(static_cast<float>(value), at); break;
        case DType::kFloat16: Store<uint16_t>(FloatToHalf(static_cast<float>(value)), at); break;
        default: Store<uint16_t>(FloatToBFloat16(static_cast<float>(value)), at); break;
      }
      return true;
    }
    case DType::kInt64:
      if (!token.integer) return false;
      Store<int64_t>(integer, at);
      return true;
    case DType::kInt32:
      if (!token.integer || integer < INT32_MIN || integer > INT32_MAX) return false;
      Store<int32_t>(static_cast<int32_t>(integer), at);
      return true;
    case DType::kInt16:
      if (!token.integer || integer < INT16_MIN || integer > INT16_MAX) return false;
      Store<int16_t>(static_cast<int16_t>(integer), at);
      return true;
    case DType::kInt8:
      if (!token.integer || integer < INT8_MIN || integer > INT8_MAX) return false;
      *at = static_cast<char>(static_cast<int8_t>(integer));
      return true;
    case DType::kUInt8:
      if (!token.integer || integer < 0 || integer > UINT8_MAX) return false;
      *at = static_cast<char>(static_cast<uint8_t>(integer));
      return true;
    default: return false;  // BOOL and BYTES hold no numbers
  }
}

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
  if (size == 0 || dtype == DType::kBool || elements < 0) return false;
  // Counted before memory is taken: a shape that claims more values than
  // the array holds costs nothing.
  int64_t count = 0;
  const char* p = array.data();
  const char* const end = array.data() + array.size();
  if (!ForEachNumber(p, end, [&](const NumberToken&) { return ++count <= elements; }) || count != elements) {
    return false;
  }
  out->resize(static_cast<size_t>(elements) * size);
  char* at = out->data();
  p = array.data();
  return ForEachNumber(p, end, [&](const NumberToken& token) {
    if (!StoreNumber(token, dtype, at)) return false;
    at += size;
    return true;
  });
}

}  // namespace infergate
