#include "config_file.h"

#define TOML_HEADER_ONLY 1
#define TOML_ENABLE_FORMATTERS 0
#include <c10/util/Exception.h>
#include <toml++/toml.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>

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
  TORCH_CHECK(std::ifstream(path).good(), "[arguments] --config ", path, ": cannot open the file");
  toml::table table;
  try {
    table = toml::parse_file(path);
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
