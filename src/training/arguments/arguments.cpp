// The command line and the TOML config, bound from the table in arguments_table.h.
#include "megatron/training/arguments.h"

#include <c10/util/Exception.h>
#include <CLI/CLI.hpp>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <set>
#include <sstream>
#include <type_traits>

#include "training/arguments/checkpoint_args.h"
#include "training/arguments/deepspeed_config.h"
#include "training/arguments/foreign_flags.h"
#include "training/arguments/toml_config.h"

namespace megatron::training {
namespace {

// --help's group titles, in the order Megatron-LM's arguments.py adds them.
struct GroupTitle {
  ArgGroup group;
  const char* title;
};
constexpr GroupTitle kGroups[] = {
    {ArgGroup::network_size, "network size"},
    {ArgGroup::moe, "moe"},
    {ArgGroup::regularization, "regularization"},
    {ArgGroup::training, "training"},
    {ArgGroup::initialization, "initialization"},
    {ArgGroup::learning_rate, "learning rate"},
    {ArgGroup::checkpointing, "checkpointing"},
    {ArgGroup::mixed_precision, "mixed precision"},
    {ArgGroup::distributed, "distributed"},
    {ArgGroup::validation, "validation"},
    {ArgGroup::data, "data and dataloader"},
    {ArgGroup::tokenizer, "tokenizer"},
    {ArgGroup::logging, "logging"},
    {ArgGroup::aliases, "Megatron-LM compatibility"},
    {ArgGroup::ignored, "Megatron-LM compatibility"},
};

// The CLI11 binding a field's type asks for. Switches are flags (`--x`, `--x=false`); optional
// values stay unset unless given; a flag given twice takes the last value, as argparse does.
CLI::Option* bind_field(CLI::App& app, const std::string& flag, bool& v, const char* help) {
  return app.add_flag(flag, v, help);
}
template <typename T>
CLI::Option* bind_field(CLI::App& app, const std::string& flag, std::optional<T>& v, const char* help) {
  return app
      .add_option_function<T>(
          flag, [&v](const T& x) { v = x; }, help)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
}
template <typename T>
CLI::Option* bind_field(CLI::App& app, const std::string& flag, T& v, const char* help) {
  auto* option = app.add_option(flag, v, help);
  // Launch scripts append to a common flag list: a value given twice takes the last, as argparse.
  if constexpr (std::is_arithmetic_v<T> || std::is_same_v<T, std::string>)
    option->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  if constexpr (std::is_arithmetic_v<T>) option->capture_default_str();
  if constexpr (std::is_same_v<T, std::string>) {
    if (!v.empty()) option->capture_default_str();
  }
  return option;
}

// A flag's names: DeepSpeed spells its own with underscores (its launcher appends --local_rank=N;
// Megatron-DeepSpeed's scripts say --deepspeed_config), Megatron-LM two of its scheduler's.
std::string cli_names(const std::string& field) {
  if (field == "local_rank" || field == "deepspeed_config") return flag_of(field) + ",--" + field;
  if (field == "override_opt_param_scheduler") return flag_of(field) + ",--override-opt_param-scheduler";
  if (field == "use_checkpoint_opt_param_scheduler") return flag_of(field) + ",--use-checkpoint-opt_param-scheduler";
  return flag_of(field);
}

// Megatron-LM's _add_<group>_args: the table's lines of one group.
void bind_group(CLI::App& app, Arguments& a, const GroupTitle& g) {
#define MEGATRON_BIND_FIELD(group_, field, saved, check, help) \
  if (g.group == ArgGroup::group_) bind_field(app, cli_names(#field), a.field, help)->group(g.title);
  MEGATRON_ARGUMENTS(MEGATRON_BIND_FIELD)
#undef MEGATRON_BIND_FIELD
}

void bind(CLI::App& app, Arguments& a) {
  // Read apart (toml_config.cpp) with a strict TOML parser; CLI11's own reader takes malformed lines.
  app.add_option("--config", a.config_file, "TOML file of settings (keys: long flag names); flags override it")
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  for (const auto& g : kGroups) bind_group(app, a, g);
  if (app.get_name() == "pretrain_gpt")  // examples/pretrain_gpt.cpp reads it before parsing
    app.footer(
        "--check-args FLAGS...: say whether a run with FLAGS would start (for the launcher's world size, or "
        "WORLD_SIZE=N), naming each refused or no-effect flag, without starting it; exit 0 only if it would");
}

template <typename T>
struct PythonType;
template <>
struct PythonType<bool> {
  static constexpr const char* name = "bool";
};
template <>
struct PythonType<int64_t> {
  static constexpr const char* name = "int";
};
template <>
struct PythonType<uint64_t> {
  static constexpr const char* name = "int";
};
template <>
struct PythonType<double> {
  static constexpr const char* name = "float";
};
template <>
struct PythonType<std::string> {
  static constexpr const char* name = "str";
};
template <>
struct PythonType<std::vector<std::string>> {
  static constexpr const char* name = "List[str]";
};
template <>
struct PythonType<std::vector<int64_t>> {
  static constexpr const char* name = "List[int]";
};
template <>
struct PythonType<std::optional<int64_t>> {
  static constexpr const char* name = "Optional[int]";
};
template <>
struct PythonType<std::optional<double>> {
  static constexpr const char* name = "Optional[float]";
};

// Python's int() and float() take digits grouped with underscores (BLOOM's scripts write
// 220_000_000); CLI11 does not. Such a number, after a numeric flag, loses its underscores.
std::string python_number(const std::string& value) {
  if (value.find('_') == std::string::npos) return value;
  for (size_t i = 0; i < value.size(); ++i) {
    const char c = value[i];
    if (c == '_') {
      const bool between_digits = i > 0 && i + 1 < value.size() &&
                                  std::isdigit(static_cast<unsigned char>(value[i - 1])) &&
                                  std::isdigit(static_cast<unsigned char>(value[i + 1]));
      if (!between_digits) return value;
    } else if (!std::isdigit(static_cast<unsigned char>(c)) && !std::strchr("+-.eE", c)) {
      return value;
    }
  }
  std::string out;
  for (char c : value)
    if (c != '_') out += c;
  return out;
}

// An integer flag's value that Python's int() would take but that does not fit int64 is refused
// by name (CLI11 would saturate it silently).
void check_int64(const std::string& flag, const std::string& value) {
  const size_t digits = value.find_first_not_of("+-") == 0 ? 0 : 1;
  if (value.size() <= digits || value.find_first_not_of("0123456789", digits) != std::string::npos) return;
  errno = 0;
  (void)std::strtoll(value.c_str(), nullptr, 10);
  TORCH_CHECK(errno != ERANGE, "[arguments] ", flag, " ", value, " does not fit a 64-bit integer");
}

std::vector<std::string> with_python_numbers(const std::vector<std::string>& args) {
  std::set<std::string> numeric, integer, lists;
  for (const auto& f : argument_fields()) {
    const std::string type = f.python_type;
    if (f.flag.empty()) continue;
    if (type == "List[int]") lists.insert(f.flag);
    if (type.find("int") != std::string::npos) integer.insert(f.flag);
    if (type.find("int") != std::string::npos || type.find("float") != std::string::npos) numeric.insert(f.flag);
  }
  std::vector<std::string> out;
  std::string flag;  // the numeric flag whose values follow, up to the next flag
  auto number = [&](const std::string& value) {
    const std::string v = python_number(value);
    if (integer.count(flag)) check_int64(flag, v);
    return v;
  };
  for (const auto& word : args) {
    if (word.rfind("--", 0) == 0) {
      const auto eq = word.find('=');
      flag = word.substr(0, eq);
      if (!numeric.count(flag)) flag.clear();
      out.push_back(eq != std::string::npos && !flag.empty() ? flag + "=" + number(word.substr(eq + 1)) : word);
    } else if (lists.count(flag) && word.find_first_of(" [],") != std::string::npos) {
      // A list given as one word ("2 2", "[2 2]"), as a YAML config hands it over: its numbers.
      std::string spaced = word;
      for (char& c : spaced)
        if (c == '[' || c == ']' || c == ',') c = ' ';
      std::istringstream items(spaced);
      for (std::string item; items >> item;) out.push_back(number(item));
    } else {
      out.push_back(flag.empty() ? word : number(word));
    }
  }
  return out;
}

// The words of the last --config file, before the command line's own so that flags win.
std::vector<std::string> with_config_file(const std::vector<std::string>& args) {
  std::optional<std::string> path;
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--config" && i + 1 < args.size()) path = args[i + 1];
    if (args[i].rfind("--config=", 0) == 0) path = args[i].substr(9);
  }
  if (!path) return args;
  std::vector<std::string> words = detail::config_file_words(*path);
  words.insert(words.end(), args.begin(), args.end());
  return words;
}

size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = up;
    }
  }
  return row[b.size()];
}

// Every flag the command line names that no option knows, in the order given, each with the
// closest known flag when one is close (CLI11's own message lists them reversed, with values).
void check_flags_known(const std::vector<std::string>& args, CLI::App& app, const std::string& program) {
  std::vector<std::string> known = {"--help"};
  for (const CLI::Option* option : app.get_options())
    for (const auto& name : option->get_lnames()) known.push_back("--" + name);
  std::vector<std::string> unknown;
  std::vector<std::pair<std::string, std::string>> refused;  // reason, its flags
  for (const auto& word : args) {
    if (word.rfind("--", 0) != 0 || word.size() == 2) continue;
    const std::string flag = word.substr(0, word.find('='));
    if (std::find(known.begin(), known.end(), flag) != known.end()) continue;
    if (const std::string why = detail::foreign_flag_reason(flag); !why.empty()) {
      auto same = std::find_if(refused.begin(), refused.end(), [&](const auto& r) { return r.first == why; });
      if (same == refused.end())
        refused.emplace_back(why, flag);
      else if (same->second.find(flag) == std::string::npos)
        same->second += ", " + flag;
      continue;
    }
    std::string closest;
    size_t best = flag.size() / 3 + 1;  // a few typos, never a different word
    for (const auto& k : known) {
      const size_t d = edit_distance(flag, k);
      if (d < best) best = d, closest = k;
    }
    unknown.push_back(closest.empty() ? flag : flag + " (did you mean " + closest + "?)");
  }
  std::string list, why;
  for (const auto& u : unknown) list += (list.empty() ? "" : ", ") + u;
  for (const auto& [reason, flags] : refused) why += (why.empty() ? "" : "; ") + flags + ": " + reason;
  TORCH_CHECK(unknown.empty(), "[arguments] unknown flag", unknown.size() > 1 ? "s " : " ", list, "; see ", program,
              " --help", why.empty() ? "" : " (also refused: " + why + ")");
  TORCH_CHECK(refused.empty(), "[arguments] ", why);
}

}  // namespace

std::string flag_of(const std::string& field) {
  std::string flag = "--" + field;
  for (auto& c : flag) c = c == '_' ? '-' : c;
  return flag;
}

const std::vector<ArgumentField>& argument_fields() {
  static const std::vector<ArgumentField> fields = [] {
    std::vector<ArgumentField> out;
#define MEGATRON_FIELD_ROW(group_, field, saved, check, help)                                                         \
  out.push_back({#field, ArgGroup::group_ == ArgGroup::derived ? std::string() : flag_of(#field), ArgGroup::group_,   \
                 ArgSaved::saved == ArgSaved::kSaved, PythonType<std::remove_cv_t<decltype(Arguments::field)>>::name, \
                 help, check});
    using namespace arg;
    MEGATRON_ARGUMENTS(MEGATRON_FIELD_ROW)
#undef MEGATRON_FIELD_ROW
    return out;
  }();
  return fields;
}

std::vector<std::string> ignored_megatron_flags(const Arguments& a) {
  const Arguments defaults;
  std::vector<std::string> out;
#define MEGATRON_IGNORED_FLAG(group_, field, saved, check, help) \
  if (ArgGroup::group_ == ArgGroup::ignored && a.field != defaults.field) out.push_back(flag_of(#field));
  MEGATRON_ARGUMENTS(MEGATRON_IGNORED_FLAG)
#undef MEGATRON_IGNORED_FLAG
  return out;
}

std::optional<Arguments> parse_arguments(const std::vector<std::string>& args, int64_t world_size,
                                         const std::string& program) {
  Arguments a;
  CLI::App app{"Megatron-style GPT pretraining (megatron-cpp)", program};
  bind(app, a);
  const std::vector<std::string> words = with_python_numbers(with_config_file(args));
  check_flags_known(words, app, program);
  std::vector<std::string> reversed(words.rbegin(), words.rend());  // CLI11 parses from the back
  try {
    app.parse(reversed);
  } catch (const CLI::CallForHelp&) {
    std::printf("%s", app.help().c_str());
    return std::nullopt;
  } catch (const CLI::ParseError& e) {
    TORCH_CHECK(false, "[arguments] ", e.what(), "; see ", program, " --help");
  }
  std::set<std::string> given;  // fields the command line or the TOML config set
  for (const CLI::Option* option : app.get_options()) {
    if (option->count() == 0 || option->get_lnames().empty()) continue;
    std::string field = option->get_lnames().front();
    std::replace(field.begin(), field.end(), '-', '_');
    given.insert(field);
  }
  // The checkpoint's parallel sizes first: the DeepSpeed batch rule needs the data-parallel size.
  detail::apply_checkpoint_args(a, given);
  detail::apply_deepspeed_config(a, given, world_size);
  a.validate(world_size);
  return a;
}

std::string arguments_help(const std::string& program) {
  Arguments a;
  CLI::App app{"Megatron-style GPT pretraining (megatron-cpp)", program};
  bind(app, a);
  return app.help();
}

}  // namespace megatron::training
