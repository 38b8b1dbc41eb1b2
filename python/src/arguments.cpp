// Arguments: Megatron-LM's flags in one validated structure, parsed from a list of strings (as on
// the command line, --config TOML included) or a dict {flag name: value}.
#include <c10/util/Exception.h>

#include <sstream>

#include "bindings.h"
#include "megatron/comm/launcher_env.h"
#include "megatron/training/arguments.h"

namespace megatron::python {

std::string flag_name(std::string key) {
  if (key.rfind("--", 0) == 0) return key;
  for (auto& c : key) c = c == '_' ? '-' : c;
  return "--" + key;
}

}  // namespace megatron::python

namespace {

using megatron::training::Arguments;

// {"num_layers": 2, "mock_data": True, "data_path": ["1", "a"], "lr": None} -> the command line
// ["--num-layers", "2", "--mock-data", "--data-path", "1", "a"]; False gives --flag=false and None
// leaves the flag out.
std::vector<std::string> command_line_of(const py::dict& settings) {
  std::vector<std::string> words;
  for (const auto& [key, value] : settings) {
    TORCH_CHECK_TYPE(py::isinstance<py::str>(key), "[arguments] keys: expected flag names (str), found ",
                     py::repr(key).cast<std::string>());
    const std::string flag = megatron::python::flag_name(key.cast<std::string>());
    if (value.is_none()) continue;
    if (py::isinstance<py::bool_>(value)) {
      words.push_back(value.cast<bool>() ? flag : flag + "=false");
    } else if (py::isinstance<py::list>(value) || py::isinstance<py::tuple>(value)) {
      words.push_back(flag);
      for (const auto& item : value) words.push_back(py::str(item).cast<std::string>());
    } else {
      words.push_back(flag);
      words.push_back(py::str(value).cast<std::string>());
    }
  }
  return words;
}

std::vector<std::string> command_line_from(const py::object& args) {
  if (py::isinstance<py::dict>(args)) return command_line_of(args.cast<py::dict>());
  TORCH_CHECK_TYPE(!py::isinstance<py::str>(args),
                   "[arguments] expected a list of strings or a dict, found one string; split it into words");
  return args.cast<std::vector<std::string>>();
}

}  // namespace

void init_arguments(py::module_& m) {
  py::class_<Arguments> cls(m, "Arguments",
                            "Every setting of a training run, with Megatron-LM's flag names as attributes "
                            "(--num-layers -> num_layers). Usually from parse_arguments(); a default-constructed one "
                            "holds the defaults and must pass validate() before pretrain() uses it.");
  cls.def(py::init<>())
      .def("validate", &Arguments::validate, py::arg("world_size"),
           "Checks every combination against world_size and fills the derived values "
           "(data_parallel_size, num_microbatches, ...); raises naming the flags.");
  // Every line of the table (arguments_table.h) is an attribute.
#define MEGATRON_BIND_FIELD(group, field, saved, check, help) cls.def_readwrite(#field, &Arguments::field, help);
  MEGATRON_ARGUMENTS(MEGATRON_BIND_FIELD)
#undef MEGATRON_BIND_FIELD
  cls.def(
         "to_dict",
         [](const Arguments& a) {
           py::dict d;
#define MEGATRON_FIELD_TO_DICT(group, field, saved, check, help) d[#field] = py::cast(a.field);
           MEGATRON_ARGUMENTS(MEGATRON_FIELD_TO_DICT)
#undef MEGATRON_FIELD_TO_DICT
           return d;
         },
         "Every field by attribute name.")
      .def("__copy__", [](const Arguments& a) { return Arguments(a); })
      .def(
          "__deepcopy__", [](const Arguments& a, const py::dict&) { return Arguments(a); }, py::arg("memo"))
      .def("__repr__", [](const py::object& self) {
        return "Arguments(" + py::str(self.attr("to_dict")()).cast<std::string>() + ")";
      });

  m.def(
      "parse_arguments",
      [](const py::object& args, std::optional<int64_t> world_size,
         const std::string& program) -> std::optional<Arguments> {
        const auto words = command_line_from(args);
        const int64_t world = world_size.value_or(megatron::comm::LauncherEnv::from_environment().world_size);
        return megatron::training::parse_arguments(words, world, program);
      },
      py::arg("args"), py::arg("world_size") = py::none(), py::arg("program") = "pretrain_gpt",
      "Parses Megatron-LM flags from a list of strings (['--num-layers', '2', '--config', "
      "'gpt.toml', ...]) or a dict ({'num_layers': 2, 'mock_data': True, 'data_path': [...]}: "
      "keys are flag names with - or _, True/False switch flags, None leaves a flag out) and "
      "validates them for world_size (default: the launcher's). Returns None for --help (the "
      "help is printed); bad flags raise RuntimeError with one line naming them.");
  m.def(
      "check_args",
      [](const py::object& args, std::optional<int64_t> world_size, const std::string& program) {
        const auto words = command_line_from(args);
        const int64_t world = world_size.value_or(megatron::comm::LauncherEnv::from_environment().world_size);
        std::ostringstream report;
        const bool would_start = megatron::training::check_arguments(words, world, report, program);
        return py::make_tuple(would_start, report.str());
      },
      py::arg("args"), py::arg("world_size") = py::none(), py::arg("program") = "pretrain_gpt",
      "pretrain_gpt --check-args: whether a run with these flags (as parse_arguments takes them) would "
      "start on world_size ranks, without building anything. Returns (would_start, report): the report "
      "names each flag with no effect here and why, then the layout, or why the flags are refused.");
  m.def("arguments_help", &megatron::training::arguments_help, py::arg("program") = "pretrain_gpt",
        "The flag list --help prints.");
}
