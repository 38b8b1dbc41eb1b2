#include "training/arguments/toml_config.h"

#define TOML_HEADER_ONLY 1
#define TOML_ENABLE_FORMATTERS 0
#include <c10/util/Exception.h>
#include <toml++/toml.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <vector>

#include "input_files.h"
#include "megatron/training/arguments.h"

namespace megatron::training::detail {
namespace {

// A number as the command line would spell it, exactly (17 significant digits round-trip).
std::string number_word(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%.17g", v);
  return buffer;
}

const char* toml_type(const toml::node& v) {
  switch (v.type()) {
    case toml::node_type::string: return "a string";
    case toml::node_type::integer: return "an integer";
    case toml::node_type::floating_point: return "a number";
    case toml::node_type::boolean: return "true/false";
    case toml::node_type::array: return "a list";
    case toml::node_type::table: return "a table";
    default: return "a date or time";
  }
}

// One scalar as the word the flag takes, or nothing when its TOML type does not fit `type`
// ("int", "float", "str"; list elements of "List[str]" may be numbers, as in --data-path).
std::optional<std::string> scalar_word(const toml::node& v, const std::string& type) {
  if (type == "int" && v.is_integer()) return std::to_string(v.as_integer()->get());
  if (type == "float" && v.is_integer()) return std::to_string(v.as_integer()->get());
  if (type == "float" && v.is_floating_point()) return number_word(v.as_floating_point()->get());
  if (type == "str" && v.is_string()) return v.as_string()->get();
  if (type == "list-str" && v.is_string()) return v.as_string()->get();
  if (type == "list-str" && (v.is_integer() || v.is_floating_point())) return scalar_word(v, "float");
  return std::nullopt;
}

// toml++ 3.3 asks is_non_ascii_horizontal_whitespace() about some characters, and for most
// non-ASCII code points (U+00A1..U+0499 among them) that function reaches __builtin_unreachable:
// undefined behaviour, found by tests/fuzz/config_toml_fuzz.cpp. It asks about characters outside
// strings and comments, and after a backslash in a """ string. TOML 1.0 allows non-ASCII only in
// comments and strings, so this lexer refuses it elsewhere before toml++ reads the text.
void refuse_what_tomlpp_misreads(const std::string& text, const std::string& path) {
  auto refuse = [&](size_t at, const char* where) {
    size_t begin = at;
    while (begin > 0 && text[begin - 1] != '\n') --begin;
    size_t column = 1;  // in characters, as toml++ counts them
    for (size_t i = begin; i < at; ++i) column += (static_cast<unsigned char>(text[i]) & 0xC0) != 0x80;
    const auto line = 1 + std::count(text.begin(), text.begin() + static_cast<std::ptrdiff_t>(at), '\n');
    TORCH_CHECK(false, "[arguments] --config ", path, ":", line, ":", column,
                ": not valid TOML: a non-ASCII character ", where);
  };
  auto ascii = [&](size_t i) { return i >= text.size() || static_cast<unsigned char>(text[i]) < 0x80; };
  auto blank = [&](size_t i) { return i < text.size() && text[i] != '\0' && std::strchr(" \t\r\n", text[i]); };
  auto triple = [&](size_t i, char q) { return text.compare(i, 3, std::string(3, q)) == 0; };
  size_t i = text.compare(0, 3, "\xEF\xBB\xBF") == 0 ? 3 : 0;  // a byte-order mark, which toml++ skips
  while (i < text.size()) {
    const char c = text[i];
    if (!ascii(i)) refuse(i, "outside a string or comment");
    if (c == '#') {
      while (i < text.size() && text[i] != '\n') ++i;
    } else if (c == '"' || c == '\'') {
      const bool multi_line = triple(i, c);
      for (i += multi_line ? 3 : 1; i < text.size(); ++i) {
        if (!multi_line && text[i] == '\n') break;  // toml++ stops there with its own error
        if (text[i] == c && (!multi_line || triple(i, c))) {
          i += multi_line ? 3 : 1;  // and up to two more quotes, which belong to the string
          for (int extra = 0; multi_line && extra < 2 && i < text.size() && text[i] == c; ++extra) ++i;
          break;
        }
        if (c == '"' && text[i] == '\\') {
          size_t next = i + 1;
          while (multi_line && blank(next)) ++next;  // a line-ending backslash: toml++ checks up to the text
          if (multi_line && !ascii(next)) refuse(next, "after a backslash in a \"\"\" string (write it as \\uXXXX)");
          i = std::max(next, i + 2) - 1;  // past the escaped character
        }
      }
    } else {
      ++i;
    }
  }
}

// toml++ builds a table per dotted key part and per header part, and parses and frees them
// recursively: a key of 200,000 parts overflows the stack. This counts, outside strings and
// comments, how deep a point of the text can nest (header parts, key parts, open lists and inline
// tables; a dot in a number counts too, which only overestimates) and refuses past kMaxNesting.
void refuse_deep_nesting(const std::string& text, const std::string& path) {
  std::vector<int> open;  // what each open [ or { adds
  int open_depth = 0;     // their sum
  int header = 0;         // depth of the table the last [header] opened
  int parts = 1;          // parts of the key being read
  int key = 0;            // parts of the key before the last '=', not yet opened
  bool in_header = false, line_start = true;
  auto check = [&](size_t at) {
    if (header + open_depth + key + parts <= megatron::detail::kMaxNesting) return;
    const auto line = 1 + std::count(text.begin(), text.begin() + static_cast<std::ptrdiff_t>(at), '\n');
    TORCH_CHECK(false, "[arguments] --config ", path, ":", line, ": tables, dotted keys and lists nest deeper than ",
                megatron::detail::kMaxNesting, " levels");
  };
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '#') {
      while (i + 1 < text.size() && text[i + 1] != '\n') ++i;
    } else if (c == '"' || c == '\'') {  // a string: skipped, escapes included
      const bool multi_line = text.compare(i, 3, std::string(3, c)) == 0;
      for (i += multi_line ? 3 : 1; i < text.size(); ++i) {
        if (c == '"' && text[i] == '\\') {
          ++i;
          continue;
        }
        if (text[i] == c && (!multi_line || text.compare(i, 3, std::string(3, c)) == 0)) {
          i += multi_line ? 2 : 0;
          break;
        }
      }
    } else if (c == '\n') {
      line_start = true;
      if (open.empty()) parts = 1, key = 0;
      continue;
    } else if (c == '[' && line_start && open.empty()) {
      in_header = true, header = 0, parts = 1;
      if (i + 1 < text.size() && text[i + 1] == '[') ++i, header = 1;  // an array of tables
    } else if (c == ']' && in_header) {
      in_header = false, header += parts, parts = 1;
      if (i + 1 < text.size() && text[i + 1] == ']') ++i;
    } else if (c == '.') {
      ++parts;
      check(i);
    } else if (c == '=') {
      key = parts, parts = 1;
    } else if (c == '[' || c == '{') {
      open.push_back(key + 1), open_depth += key + 1, key = 0, parts = 1;
      check(i);
    } else if ((c == ']' || c == '}') && !open.empty()) {
      open_depth -= open.back(), open.pop_back(), parts = 1;
    } else if (c == ',') {
      key = 0, parts = 1;
    }
    line_start = line_start && (c == ' ' || c == '\t' || c == '\r');
  }
}

std::string expected(const std::string& type) {
  if (type == "bool") return "true or false";
  if (type == "int") return "an integer";
  if (type == "float") return "a number";
  if (type == "str") return "a string";
  if (type == "List[int]") return "a list of integers";
  return "a list of strings";
}

}  // namespace

std::vector<std::string> config_file_words(const std::string& path) {
  const std::string text = megatron::detail::read_whole_file(path, "[arguments] --config " + path);
  refuse_what_tomlpp_misreads(text, path);
  refuse_deep_nesting(text, path);
  toml::table table;
  try {
    table = toml::parse(text, path);
  } catch (const toml::parse_error& e) {
    TORCH_CHECK(false, "[arguments] --config ", path, ":", e.source().begin.line, ":", e.source().begin.column,
                ": not valid TOML: ", e.description());
  }
  // Python types of the settings by flag, aliases (--local_rank) included.
  std::map<std::string, std::string> types;
  for (const auto& f : argument_fields()) {
    if (f.flag.empty()) continue;
    std::string type = f.python_type;
    if (type.rfind("Optional[", 0) == 0) type = type.substr(9, type.size() - 10);
    types[f.flag] = type;
  }
  std::vector<std::string> words;
  for (const auto& entry : table) {
    const toml::key& key = entry.first;
    const toml::node& value = entry.second;  // a named reference: lambdas cannot capture bindings
    const std::string name(key.str());
    std::string flag = "--" + name;
    for (auto& c : flag) c = c == '_' ? '-' : c;
    const auto where = path + ":" + std::to_string(key.source().begin.line) + ": ";
    const auto it = types.find(flag);
    TORCH_CHECK(it != types.end() && flag != "--config", "[arguments] --config ", where, "unknown setting '", name,
                "' (keys are pretrain_gpt's long flag names; see --help)");
    const std::string& type = it->second;
    auto wrong = [&]() {
      TORCH_CHECK(false, "[arguments] --config ", where, "'", name, "' must be ", expected(type), " (got ",
                  toml_type(value), ")");
    };
    if (type == "bool") {
      if (!value.is_boolean()) wrong();
      words.push_back(flag + (value.as_boolean()->get() ? "=true" : "=false"));
    } else if (type == "List[int]" || type == "List[str]") {
      const toml::array* list = value.as_array();
      if (!list || list->empty()) wrong();
      words.push_back(flag);
      for (const auto& element : *list) {
        auto word = scalar_word(element, type == "List[int]" ? "int" : "list-str");
        if (!word) wrong();
        words.push_back(*word);
      }
    } else {
      auto word = scalar_word(value, type);
      if (!word) wrong();
      words.push_back(flag + "=" + *word);
    }
  }
  return words;
}

}  // namespace megatron::training::detail
