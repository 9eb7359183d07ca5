#pragma once
// Passing over JSON text without parsing it, for the walks that find a
// body's numeric data in its text (service/call/numeric_json_data.h,
// service/torchserve/instance_text.h) before any tree is built. Nothing
// here validates: what a walk passes over, a tree still parses or refuses.
// Each function takes `p` at the text and leaves it after what it passed
// (unspecified when it returns false). Pure functions; thread-safe.

#include <array>
#include <string_view>

#include "absl/strings/string_view.h"

namespace infergate {

inline bool IsJsonSpace(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

inline void SkipJsonSpace(const char*& p, const char* end) {
  while (p < end && IsJsonSpace(*p)) ++p;
}

// The bytes a list of numbers is made of between its brackets: digits,
// signs, points, exponents, commas and whitespace. Whether they are JSON's
// numbers is the reader's to find.
inline constexpr std::array<bool, 256> kNumberListBytes = [] {
  std::array<bool, 256> bytes{};
  for (unsigned char c : std::string_view("0123456789+-.eE, \t\n\r")) bytes[c] = true;
  return bytes;
}();

// Passes number-list bytes; stops at the first other byte (or the end).
inline void SkipNumberListBytes(const char*& p, const char* end) {
  while (p < end && kNumberListBytes[static_cast<unsigned char>(*p)]) ++p;
}

// The list of numbers at `p` ('['): the bytes between its brackets into
// `numbers` when they are all number-list bytes, `p` left after its ']';
// false otherwise.
inline bool ReadNumberList(const char*& p, const char* end, absl::string_view* numbers) {
  if (p == end || *p != '[') return false;
  const char* start = ++p;
  SkipNumberListBytes(p, end);
  if (p == end || *p != ']') return false;
  *numbers = absl::string_view(start, static_cast<size_t>(p - start));
  ++p;
  return true;
}

// An object key without escapes at `p` ('"'), into `key`; false for a key
// with one (it may spell any name), or no key.
bool ReadPlainJsonKey(const char*& p, const char* end, absl::string_view* key);

// Calls `element()` with `p` at each element of the list at `p` (`open`
// ... `close`, elements parted by commas), which must move `p` past it;
// leaves `p` after `close`. False when the text is no such list or
// `element` returned false.
template <typename Element>
bool ForEachJsonElement(const char*& p, const char* end, char open, char close, Element element) {
  if (p == end || *p != open) return false;
  ++p;
  SkipJsonSpace(p, end);
  if (p < end && *p == close) {
    ++p;
    return true;
  }
  while (true) {
    if (!element()) return false;
    SkipJsonSpace(p, end);
    if (p == end) return false;
    if (*p == close) {
      ++p;
      return true;
    }
    if (*p != ',') return false;
    ++p;
    SkipJsonSpace(p, end);
  }
}

// Calls `member(key)` with `p` at the value of each member of the object
// at `p` ('{'), which must move `p` past it; leaves `p` after '}'. False
// when the text is no such object, a key has an escape (ReadPlainJsonKey)
// or `member` returned false.
template <typename Member>
bool ForEachJsonMember(const char*& p, const char* end, Member member) {
  return ForEachJsonElement(p, end, '{', '}', [&] {
    absl::string_view key;
    if (!ReadPlainJsonKey(p, end, &key)) return false;
    SkipJsonSpace(p, end);
    if (p == end || *p != ':') return false;
    ++p;
    SkipJsonSpace(p, end);
    return member(key);
  });
}

// Any one value at `p` (a string, a number or literal, or an array or
// object with whatever nests in it); false where it does not end.
bool SkipJsonValue(const char*& p, const char* end);

}  // namespace infergate
