// --config FILE: a TOML file of settings (keys are the long flag names, `num-layers = 12`), read
// with toml++ into the command-line words they stand for. They go before the given flags, so
// that flags win. A file that does not parse, an unknown key or a value of the wrong type is one
// error naming the file, line and key, never a partly read value.
#pragma once

#include <string>
#include <vector>

namespace megatron::training::detail {

std::vector<std::string> config_file_words(const std::string& path);

}  // namespace megatron::training::detail
