#include "scheduler/repository/triton/text_proto_json.h"

#include <cctype>
#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace infergate {
namespace {

using Json = nlohmann::json;

class Reader {
 public:
  explicit Reader(absl::string_view text) : text_(text) {}

  absl::StatusOr<Json> Message(char close, int depth) {
    if (depth > kTextProtoMaxDepth) return Error(absl::StrCat("nested more than ", kTextProtoMaxDepth, " deep"));
    Json out = Json::object();
    for (;;) {
      Skip();
      if (AtEnd()) {
        if (close == 0) return out;
        return Error(absl::StrCat("expected '", std::string(1, close), "' before the end"));
      }
      if (text_[pos_] == close) {
        ++pos_;
        return out;
      }
      std::string key;
      if (!Identifier(&key)) return Error("expected a field name");
      Skip();
      bool colon = false;
      if (!AtEnd() && text_[pos_] == ':') {
        ++pos_;
        colon = true;
        Skip();
      }
      absl::StatusOr<Json> value = Value(depth, colon);
      if (!value.ok()) return value.status();
      Add(out, key, *std::move(value));
      Skip();
      if (!AtEnd() && (text_[pos_] == ',' || text_[pos_] == ';')) ++pos_;
    }
  }

 private:
  // `in_list`: the value is an item of a list, which text format does not
  // let be a list itself (`[[...]]` is refused at once, however deep).
  absl::StatusOr<Json> Value(int depth, bool after_colon, bool in_list = false) {
    if (depth > kTextProtoMaxDepth) return Error(absl::StrCat("nested more than ", kTextProtoMaxDepth, " deep"));
    if (AtEnd()) return Error("expected a value");
    const char c = text_[pos_];
    if (in_list && c == '[') return Error("a list inside a list (text format has none)");
    if (c == '{' || c == '<') {
      ++pos_;
      return Message(c == '{' ? '}' : '>', depth + 1);
    }
    // `input [ {..}, {..} ]`: a list of messages needs no colon.
    if (!after_colon && c != '[') return Error("expected ':' or '{' after a field name");
    if (c == '[') {
      ++pos_;
      Json list = Json::array();
      for (;;) {
        Skip();
        if (AtEnd()) return Error("expected ']' before the end");
        if (text_[pos_] == ']') {
          ++pos_;
          return list;
        }
        absl::StatusOr<Json> item = Value(depth + 1, /*after_colon=*/true, /*in_list=*/true);
        if (!item.ok()) return item.status();
        list.push_back(*std::move(item));
        Skip();
        if (!AtEnd() && text_[pos_] == ',') ++pos_;
      }
    }
    if (c == '"' || c == '\'') return String();
    return Scalar();
  }

  absl::StatusOr<Json> String() {
    std::string out;
    // Adjacent strings join, as in protobuf's text format.
    while (!AtEnd() && (text_[pos_] == '"' || text_[pos_] == '\'')) {
      const char quote = text_[pos_++];
      for (;;) {
        if (AtEnd() || text_[pos_] == '\n') return Error("a string is not closed");
        char c = text_[pos_++];
        if (c == quote) break;
        if (c == '\\') {
          if (AtEnd()) return Error("a string is not closed");
          c = text_[pos_++];
          switch (c) {
            case 'n': c = '\n'; break;
            case 't': c = '\t'; break;
            case 'r': c = '\r'; break;
            default: break;  // \" \' \\ and the rest: the character itself
          }
        }
        out.push_back(c);
      }
      Skip();
    }
    return Json(out);
  }

  absl::StatusOr<Json> Scalar() {
    const size_t start = pos_;
    while (!AtEnd() && (std::isalnum(static_cast<unsigned char>(text_[pos_])) || text_[pos_] == '_' ||
                        text_[pos_] == '-' || text_[pos_] == '+' || text_[pos_] == '.')) {
      ++pos_;
    }
    absl::string_view word = text_.substr(start, pos_ - start);
    if (word.empty()) return Error(absl::StrCat("unexpected '", text_.substr(pos_, 1), "'"));
    if (word == "true" || word == "True" || word == "t") return Json(true);
    if (word == "false" || word == "False" || word == "f") return Json(false);
    int64_t i = 0;
    if (absl::SimpleAtoi(word, &i)) return Json(i);
    uint64_t u = 0;
    if (absl::SimpleAtoi(word, &u)) return Json(u);
    double d = 0;
    if ((std::isdigit(static_cast<unsigned char>(word[0])) || word[0] == '-' || word[0] == '.') &&
        absl::SimpleAtod(word, &d)) {
      return Json(d);
    }
    return Json(std::string(word));  // an enum value
  }

  bool Identifier(std::string* out) {
    const size_t start = pos_;
    while (!AtEnd() && (std::isalnum(static_cast<unsigned char>(text_[pos_])) || text_[pos_] == '_')) ++pos_;
    *out = std::string(text_.substr(start, pos_ - start));
    return !out->empty() && !std::isdigit(static_cast<unsigned char>((*out)[0]));
  }

  static void Add(Json& object, const std::string& key, Json value) {
    auto it = object.find(key);
    if (it == object.end()) {
      object[key] = std::move(value);
      return;
    }
    // A field written again is a list: its values gather in order (a
    // value written as [...] is already one).
    if (!it->is_array()) *it = Json::array({std::move(*it)});
    if (value.is_array()) {
      for (Json& v : value) it->push_back(std::move(v));
    } else {
      it->push_back(std::move(value));
    }
  }

  void Skip() {
    while (!AtEnd()) {
      const char c = text_[pos_];
      if (c == '#') {
        while (!AtEnd() && text_[pos_] != '\n') ++pos_;
      } else if (std::isspace(static_cast<unsigned char>(c))) {
        if (c == '\n') ++line_;
        ++pos_;
      } else {
        return;
      }
    }
  }

  bool AtEnd() const { return pos_ >= text_.size(); }
  absl::Status Error(absl::string_view what) const {
    return absl::InvalidArgumentError(absl::StrCat("line ", line_, ": ", what));
  }

  absl::string_view text_;
  size_t pos_ = 0;
  int line_ = 1;
};

}  // namespace

absl::StatusOr<nlohmann::json> TextProtoToJson(absl::string_view text) { return Reader(text).Message(0, 0); }

}  // namespace infergate
