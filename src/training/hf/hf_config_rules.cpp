// The config rules the Hugging Face tables are written with: JSON text for each value, and
// readers that check what config.json holds (hf_schema.h, "what the tables are written with").
#include <c10/util/Exception.h>

#include <iomanip>
#include <sstream>

#include "input_files.h"
#include "training/hf/hf_schema.h"

namespace megatron::training::hf {

using nlohmann::json;

std::string json_number(double v) {
  std::ostringstream s;
  s << std::setprecision(17) << v;
  return s.str();
}
std::string json_bool(bool v) {
  return v ? "true" : "false";
}

std::string json_string(const std::string& s) {
  return json(s).dump();
}
const json* member(const json* v, const char* key) {
  if (v == nullptr || !v->is_object()) return nullptr;
  auto it = v->find(key);
  return it == v->end() ? nullptr : &*it;
}
double number_or(const json* v, double fallback) {
  return v && v->is_number() ? v->get<double>() : fallback;
}
bool bool_or(const json* v, bool fallback) {
  return v && v->is_boolean() ? v->get<bool>() : fallback;
}
std::string string_or(const json* v, const std::string& fallback) {
  return v && v->is_string() ? v->get<std::string>() : fallback;
}

namespace {

[[noreturn]] void missing(const std::string& key, const std::string& where) {
  TORCH_CHECK(false, "[convert_checkpoint] ", where, " has no \"", key, "\"");
}
// Every integer the schema requires is a size or a count: a positive integer.
int64_t required_int(const json* v, const std::string& key, const std::string& where) {
  if (!v) missing(key, where);
  // nlohmann holds every non-negative integer as uint64: checked there, then narrowed.
  const bool ok = v->is_number_unsigned() && v->get<uint64_t>() - 1 < (uint64_t{1} << 63) - 1;
  TORCH_CHECK(ok, "[convert_checkpoint] ", where, ": \"", key, "\" must be a positive integer (got ",
              megatron::detail::excerpt(v->dump()), ")");
  return v->get<int64_t>();
}

}  // namespace

int64_t positive_int_or(const json* v, int64_t fallback, const std::string& key, const std::string& where) {
  return v == nullptr || v->is_null() ? fallback : required_int(v, key, where);
}

ConfigRule integer(std::string key, int64_t Arguments::*field) {
  return {
      key, [field](const Arguments& a) { return std::to_string(a.*field); },
      [key, field](const json* v, Arguments& a, const std::string& where) { a.*field = required_int(v, key, where); }};
}
ConfigRule real(std::string key, double Arguments::*field, double fallback) {
  return {key, [field](const Arguments& a) { return json_number(a.*field); },
          [field, fallback](const json* v, Arguments& a, const std::string&) { a.*field = number_or(v, fallback); }};
}
ConfigRule constant(std::string key, std::string value) {
  return {key, [value](const Arguments&) { return value; }, [](const json*, Arguments&, const std::string&) {}};
}
ConfigRule ffn_size(std::string key, bool required) {
  return {key, [](const Arguments& a) { return std::to_string(a.ffn_hidden_size.value_or(4 * a.hidden_size)); },
          [key, required](const json* v, Arguments& a, const std::string& where) {
            if (required)
              a.ffn_hidden_size = required_int(v, key, where);
            else
              a.ffn_hidden_size = positive_int_or(v, 4 * a.hidden_size, key, where);
          }};
}
void common_tail(std::vector<ConfigRule>& rules, bool tied_by_default) {
  rules.push_back({"vocab_size", [](const Arguments& a) { return std::to_string(a.vocab_size.value_or(0)); },
                   [](const json* v, Arguments& a, const std::string& where) {
                     a.vocab_size = required_int(v, "vocab_size", where);
                   }});
  rules.push_back(real("initializer_range", &Arguments::init_method_std, 0.02));
  rules.push_back({"tie_word_embeddings",
                   [](const Arguments& a) { return json_bool(!a.untie_embeddings_and_output_weights); },
                   [tied_by_default](const json* v, Arguments& a, const std::string&) {
                     a.untie_embeddings_and_output_weights = !bool_or(v, tied_by_default);
                   }});
}

}  // namespace megatron::training::hf
