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
// integers). With its value read as well (ReadNumber<true>): `digits`,
// the number's digits as an integer, and `exponent`, the power of ten
// they are scaled by, when the digits fit below kExactDigits and the
// exponent within kExactPowers (`exact`; else the text is converted).
struct NumberToken {
  absl::string_view text;
  bool integer = true;
  bool negative = false;
  bool exact = false;
  uint64_t digits = 0;
  int exponent = 0;
};

// Below 2^53 an integer is a double exactly, and so is every power of ten
// up to 10^22; one product or quotient of two exact doubles is correctly
// rounded, so digits * 10^e (or / 10^-e) is the double the text names,
// as std::from_chars (and the tree's strtod) would give it.
constexpr uint64_t kExactDigits = uint64_t{1} << 53;
constexpr int kExactPowers = 22;
constexpr double kPowersOfTen[kExactPowers + 1] = {1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,
                                                   1e8,  1e9,  1e10, 1e11, 1e12, 1e13, 1e14, 1e15,
                                                   1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};

// Reads the number at `p`; false (p unspecified) when the text there is
// not one. `kValue`: also reads its value into the token's digits and
// exponent where they are exact.
template <bool kValue>
bool ReadNumber(const char*& p, const char* end, NumberToken* token) {
  const char* start = p;
  uint64_t digits = 0;
  bool fits = true;  // every digit so far kept in `digits` below kExactDigits
  int exponent = 0;
  auto take = [&](char c) {
    if constexpr (kValue) {
      if (fits) {
        digits = digits * 10 + static_cast<uint64_t>(c - '0');
        fits = digits < kExactDigits;
      }
    }
  };
  token->negative = p < end && *p == '-';
  if (token->negative) ++p;
  if (p == end || !IsDigit(*p)) return false;
  if (*p == '0') {
    ++p;
  } else {
    while (p < end && IsDigit(*p)) take(*p++);
  }
  token->integer = true;
  if (p < end && *p == '.') {
    ++p;
    if (p == end || !IsDigit(*p)) return false;
    while (p < end && IsDigit(*p)) {
      take(*p++);
      --exponent;
    }
    token->integer = false;
  }
  if (p < end && (*p == 'e' || *p == 'E')) {
    ++p;
    const bool negative_power = p < end && *p == '-';
    if (p < end && (*p == '+' || *p == '-')) ++p;
    if (p == end || !IsDigit(*p)) return false;
    int power = 0;
    while (p < end && IsDigit(*p)) {
      if (power < 10000) power = power * 10 + (*p - '0');
      ++p;
    }
    exponent += negative_power ? -power : power;
    token->integer = false;
  }
  token->text = absl::string_view(start, static_cast<size_t>(p - start));
  if constexpr (kValue) {
    token->exact = fits && exponent >= -kExactPowers && exponent <= kExactPowers;
    token->digits = digits;
    token->exponent = exponent;
  }
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
template <bool kValue = false, typename Visit>
bool ForEachNumber(const char*& p, const char* end, Visit visit) {
  return ForEachElement(p, end, '[', ']', [&] {
    NumberToken token;
    return ReadNumber<kValue>(p, end, &token) && visit(token);
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
    if (token.exact) {
      integer = token.negative ? -static_cast<int64_t>(token.digits) : static_cast<int64_t>(token.digits);
    } else {
      const auto [end, error] = std::from_chars(first, last, integer);
      if (error != std::errc() || end != last) return false;
    }
  }
  switch (dtype) {
    case DType::kFloat32:
    case DType::kFloat64:
    case DType::kFloat16:
    case DType::kBFloat16: {
      double value = static_cast<double>(integer);
      if (!token.integer && token.exact) {
        value = static_cast<double>(token.digits);
        value = token.exponent < 0 ? value / kPowersOfTen[-token.exponent] : value * kPowersOfTen[token.exponent];
        if (token.negative) value = -value;
      } else if (!token.integer) {
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
  if (size == 0 || dtype == DType::kBool || elements < 0 || array.empty()) return false;
  // Counted before memory is taken, by its separators (the walk took only
  // flat arrays of numbers, and the decoding below refuses any other): a
  // shape that claims more values than the array holds costs nothing.
  const char* p = array.data();
  const char* const end = array.data() + array.size();
  const char* first = p + 1;
  SkipSpace(first, end);
  const int64_t count =
      first < end && *first == ']' ? 0 : static_cast<int64_t>(std::count(array.begin(), array.end(), ',')) + 1;
  if (count != elements) return false;
  out->resize(static_cast<size_t>(elements) * size);
  char* at = out->data();
  int64_t stored = 0;
  return ForEachNumber<true>(p, end,
                             [&](const NumberToken& token) {
                               if (++stored > elements) return false;
                               if (!StoreNumber(token, dtype, at)) return false;
                               at += size;
                               return true;
                             }) &&
         stored == elements;
}

}  // namespace infergate
