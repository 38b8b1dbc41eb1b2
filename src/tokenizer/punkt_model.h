// The parameters of a trained punkt model (NLTK's punkt_tab files), for punkt.cpp.
#pragma once

#include "megatron/tokenizer/punkt.h"

#include <string>
#include <unordered_map>
#include <unordered_set>

namespace megatron::tokenizer::detail {

struct PunktModel {
  std::unordered_set<std::string> abbrev_types, sent_starters, collocations;  // collocations: "a\tb"
  std::unordered_map<std::string, int> ortho_context;
};
}  // namespace megatron::tokenizer::detail
