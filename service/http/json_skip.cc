#include "service/http/json_skip.h"

namespace infergate {
namespace {

// The string at `p` ('"'), to its closing quote.
bool SkipJsonString(const char*& p, const char* end) {
  ++p;
  while (p < end && *p != '"') p += *p == '\\' ? 2 : 1;
  if (p >= end) return false;
  ++p;
  return true;
}

}  // namespace

bool ReadPlainJsonKey(const char*& p, const char* end, absl::string_view* key) {
  if (p == end || *p != '"') return false;
  const char* start = ++p;
  while (p < end && *p != '"') {
    if (*p == '\\') return false;
    ++p;
  }
  if (p == end) return false;
  *key = absl::string_view(start, static_cast<size_t>(p - start));
  ++p;
  return true;
}

bool SkipJsonValue(const char*& p, const char* end) {
  if (p == end) return false;
  if (*p == '"') return SkipJsonString(p, end);
  if (*p == '{' || *p == '[') {
    int depth = 0;
    while (p < end) {
      const char c = *p;
      if (c == '"') {
        if (!SkipJsonString(p, end)) return false;
        continue;
      }
      ++p;
      if (c == '{' || c == '[') {
        ++depth;
      } else if (c == '}' || c == ']') {
        if (--depth == 0) return true;
      }
    }
    return false;
  }
  const char* start = p;
  while (p < end && *p != ',' && *p != '}' && *p != ']' && !IsJsonSpace(*p)) ++p;
  return p != start;
}

}  // namespace infergate
