#include "megatron/utils/json.h"

#include <cstdlib>

namespace megatron::utils {
namespace {

class Parser {
 public:
  explicit Parser(std::string_view text) : s_(text) {}

  JsonValue parse_document() {
    JsonValue v = value(0);
    skip_space();
    if (i_ != s_.size()) fail("unexpected text after the JSON value");
    return v;
  }

 private:
  [[noreturn]] void fail(const std::string& what) const { throw JsonError(what, i_); }

  void skip_space() {
    while (i_ < s_.size() && (s_[i_] == ' ' || s_[i_] == '\t' || s_[i_] == '\n' || s_[i_] == '\r')) ++i_;
  }

  bool consume(char c) {
    skip_space();
    if (i_ < s_.size() && s_[i_] == c) {
      ++i_;
      return true;
    }
    return false;
  }

  JsonValue value(int depth) {
    if (depth > 512) fail("nesting deeper than 512");
    skip_space();
    if (i_ >= s_.size()) fail("expected a value, found the end of the text");
    JsonValue v;
    const char c = s_[i_];
    if (c == '{') {
      v.type = JsonValue::Type::kObject;
      ++i_;
      if (consume('}')) return v;
      do {
        skip_space();
        if (i_ >= s_.size() || s_[i_] != '"') fail("expected a member name");
        std::string key = string();
        if (!consume(':')) fail("expected ':' after a member name");
        v.object.emplace_back(std::move(key), value(depth + 1));
      } while (consume(','));
      if (!consume('}')) fail("expected ',' or '}' in an object");
    } else if (c == '[') {
      v.type = JsonValue::Type::kArray;
      ++i_;
      if (consume(']')) return v;
      do {
        v.array.push_back(value(depth + 1));
      } while (consume(','));
      if (!consume(']')) fail("expected ',' or ']' in an array");
    } else if (c == '"') {
      v.type = JsonValue::Type::kString;
      v.string = string();
    } else if (s_.compare(i_, 4, "true") == 0) {
      v.type = JsonValue::Type::kBool;
      v.boolean = true;
      i_ += 4;
    } else if (s_.compare(i_, 5, "false") == 0) {
      v.type = JsonValue::Type::kBool;
      i_ += 5;
    } else if (s_.compare(i_, 4, "null") == 0) {
      i_ += 4;
    } else if (c == '-' || (c >= '0' && c <= '9')) {
      v.type = JsonValue::Type::kNumber;
      v.number = number();
    } else {
      fail(std::string("unexpected character '") + c + "'");
    }
    return v;
  }

  double number() {
    const size_t start = i_;
    if (s_[i_] == '-') ++i_;
    auto digits = [&] {
      const size_t d = i_;
      while (i_ < s_.size() && s_[i_] >= '0' && s_[i_] <= '9') ++i_;
      if (i_ == d) fail("expected digits in a number");
    };
    if (i_ < s_.size() && s_[i_] == '0') {
      ++i_;
    } else {
      digits();
    }
    if (i_ < s_.size() && s_[i_] == '.') {
      ++i_;
      digits();
    }
    if (i_ < s_.size() && (s_[i_] == 'e' || s_[i_] == 'E')) {
      ++i_;
      if (i_ < s_.size() && (s_[i_] == '+' || s_[i_] == '-')) ++i_;
      digits();
    }
    return std::strtod(std::string(s_.substr(start, i_ - start)).c_str(), nullptr);
  }

  static void append_utf8(std::string& out, uint32_t cp) {
    if (cp < 0x80) {
      out.push_back(static_cast<char>(cp));
    } else if (cp < 0x800) {
      out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
      out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    } else if (cp < 0x10000) {
      out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
      out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
      out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    } else {
      out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
      out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
      out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
      out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    }
  }

  uint32_t hex4() {
    if (i_ + 4 > s_.size()) fail("truncated \\u escape");
    uint32_t v = 0;
    for (int k = 0; k < 4; ++k) {
      const char h = s_[i_++];
      v <<= 4;
      if (h >= '0' && h <= '9')
        v |= h - '0';
      else if (h >= 'a' && h <= 'f')
        v |= h - 'a' + 10;
      else if (h >= 'A' && h <= 'F')
        v |= h - 'A' + 10;
      else
        fail("bad hex digit in a \\u escape");
    }
    return v;
  }

  std::string string() {
    ++i_;  // opening quote
    std::string out;
    while (true) {
      // Copy the run up to the next quote or backslash in one go.
      size_t j = i_;
      while (j < s_.size() && s_[j] != '"' && s_[j] != '\\' && static_cast<unsigned char>(s_[j]) >= 0x20) {
        ++j;
      }
      out.append(s_.data() + i_, j - i_);
      i_ = j;
      if (i_ >= s_.size()) fail("unterminated string");
      const char c = s_[i_];
      if (c == '"') {
        ++i_;
        return out;
      }
      if (c != '\\') fail("control character in a string");
      if (++i_ >= s_.size()) fail("unterminated escape");
      const char e = s_[i_++];
      switch (e) {
        case '"': out.push_back('"'); break;
        case '\\': out.push_back('\\'); break;
        case '/': out.push_back('/'); break;
        case 'b': out.push_back('\b'); break;
        case 'f': out.push_back('\f'); break;
        case 'n': out.push_back('\n'); break;
        case 'r': out.push_back('\r'); break;
        case 't': out.push_back('\t'); break;
        case 'u': {
          uint32_t cp = hex4();
          if (cp >= 0xD800 && cp <= 0xDBFF && i_ + 6 <= s_.size() && s_[i_] == '\\' && s_[i_ + 1] == 'u') {
            const size_t save = i_;
            i_ += 2;
            const uint32_t lo = hex4();
            if (lo >= 0xDC00 && lo <= 0xDFFF) {
              cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
            } else {
              i_ = save;
            }
          }
          if (cp >= 0xD800 && cp <= 0xDFFF) cp = 0xFFFD;  // lone surrogate
          append_utf8(out, cp);
          break;
        }
        default: fail(std::string("unknown escape '\\") + e + "'");
      }
    }
  }

  std::string_view s_;
  size_t i_ = 0;
};

}  // namespace

const JsonValue* JsonValue::find(std::string_view key) const {
  for (auto it = object.rbegin(); it != object.rend(); ++it) {
    if (it->first == key) return &it->second;
  }
  return nullptr;
}

JsonValue parse_json(std::string_view text) {
  return Parser(text).parse_document();
}

std::string json_quote(std::string_view s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

}  // namespace megatron::utils
