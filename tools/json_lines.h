// Errors of JSONL readers (preprocess_data, train_tokenizer, dataset_tool): nlohmann-json's
// message says where a line broke, then echoes the bytes it read; corpora may hold invalid UTF-8
// and long lines, so the echo is left out of the one line a person reads.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

inline std::string json_error_text(const nlohmann::json::exception& e) {
  std::string what = e.what();
  const auto start = what.find("parse error");
  if (start != std::string::npos) what = what.substr(start);
  const auto echo = what.find("; last read:");
  return echo == std::string::npos ? what : what.substr(0, echo);
}
