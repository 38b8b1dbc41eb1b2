#include "training/arguments/data_blends.h"

#include <c10/util/Exception.h>

#include "megatron/datasets/gpt_dataset.h"

#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

namespace megatron::training::detail {
namespace {

std::string read_named_file(const char* flag, const std::string& path) {
  std::ifstream in(path);
  TORCH_CHECK(in, "[arguments] ", flag, " ", path, ": cannot open it");
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

std::vector<std::string> words_of(const std::string& text) {
  std::istringstream in(text);
  return {std::istream_iterator<std::string>(in), std::istream_iterator<std::string>()};
}

// parse_data_path, its error naming the flag the words came from.
std::optional<datasets::DataBlend> blend_of(const std::string& flag, const std::vector<std::string>& words) {
  if (words.empty()) return std::nullopt;
  try {
    return datasets::parse_data_path(words);
  } catch (const c10::Error& e) {
    std::string why = e.what_without_backtrace();
    if (why.rfind("--data-path", 0) == 0) why = flag + why.substr(std::string("--data-path").size());
    TORCH_CHECK(false, why);
  }
}

// Megatron-LM's file: {"train": ..., "valid": ..., "test": ...}, each a list of words, one
// string of them, or null.
std::array<std::optional<datasets::DataBlend>, 3> read_per_split_file(const std::string& path) {
  const char* flag = "--per-split-data-args-path";
  nlohmann::json json;
  try {
    json = nlohmann::json::parse(read_named_file(flag, path));
  } catch (const nlohmann::json::exception& e) {
    TORCH_CHECK(false, "[arguments] ", flag, " ", path, ": not JSON (", e.what(), ")");
  }
  TORCH_CHECK(json.is_object(), "[arguments] ", flag, " ", path, ": expected an object with train, valid and test");
  std::array<std::optional<datasets::DataBlend>, 3> out;
  const char* const keys[3] = {"train", "valid", "test"};
  for (int s = 0; s < 3; ++s) {
    TORCH_CHECK(json.contains(keys[s]), "[arguments] ", flag, " ", path, ": no \"", keys[s], "\" key");
    const auto& v = json[keys[s]];
    std::vector<std::string> words;
    if (v.is_string()) {
      words = words_of(v.get<std::string>());
    } else if (v.is_array()) {
      for (const auto& w : v) {
        TORCH_CHECK(w.is_string() || w.is_number(), "[arguments] ", flag, " ", path, ": \"", keys[s], "\" holds ",
                    w.type_name(), ", expected weights and prefixes");
        words.push_back(w.is_string() ? w.get<std::string>() : w.dump());
      }
    } else {
      TORCH_CHECK(v.is_null(), "[arguments] ", flag, " ", path, ": \"", keys[s], "\" is ", v.type_name(),
                  ", expected a list, a string or null");
    }
    out[s] = blend_of(std::string(flag) + " " + path + " (" + keys[s] + ")", words);
  }
  return out;
}

}  // namespace

DataBlends data_blends_from_args(const Arguments& a) {
  DataBlends out;
  if (!a.data_path.empty())
    out.blend = datasets::parse_data_path(a.data_path);
  else if (!a.data_args_path.empty())
    out.blend = blend_of("--data-args-path " + a.data_args_path,
                         words_of(read_named_file("--data-args-path", a.data_args_path)));
  else if (!a.per_split_data_args_path.empty())
    out.per_split = read_per_split_file(a.per_split_data_args_path);
  else
    out.per_split = {blend_of("--train-data-path", a.train_data_path), blend_of("--valid-data-path", a.valid_data_path),
                     blend_of("--test-data-path", a.test_data_path)};
  return out;
}

void validate_data_sources(const Arguments& a) {
#define DATA_CHECK(cond, ...) TORCH_CHECK(cond, "[arguments] ", __VA_ARGS__)
  // One source, as Megatron-LM asks: mock data, one blend split by --split, or a blend per split.
  const bool inline_per_split = !a.train_data_path.empty() || !a.valid_data_path.empty() || !a.test_data_path.empty();
  const bool one_blend = !a.data_path.empty() || !a.data_args_path.empty();
  const bool per_split = inline_per_split || !a.per_split_data_args_path.empty();
  DATA_CHECK(int(a.mock_data) + int(one_blend) + int(per_split) == 1,
             a.mock_data || one_blend || per_split
                 ? "give one data source: --mock-data, --data-path (or --data-args-path), or the per-split paths"
                 : "give --data-path (or --mock-data), --data-args-path, or a blend per split (--train-data-path, "
                   "--per-split-data-args-path)");
  DATA_CHECK(a.data_path.empty() || a.data_args_path.empty(), "give only one of --data-path and --data-args-path");
  DATA_CHECK(!inline_per_split || a.per_split_data_args_path.empty(),
             "give --train/valid/test-data-path or --per-split-data-args-path, not both");
  DATA_CHECK(!inline_per_split || !a.train_data_path.empty(),
             "--valid-data-path and --test-data-path need --train-data-path");
  // The dataset code parses these again when it builds; checking here makes a typo a parse error
  // (the files the flags name are read then).
  try {
    if (a.data_args_path.empty() && a.per_split_data_args_path.empty()) (void)data_blends_from_args(a);
    (void)datasets::parse_and_normalize_split(a.split);
  } catch (const c10::Error& e) {
    DATA_CHECK(false, e.what_without_backtrace());
  }
#undef DATA_CHECK
}

}  // namespace megatron::training::detail
