// Trains a GPT-2 style byte-level BPE vocabulary (vocab.json + merges.txt) from text: words from
// the GPT-2 pre-tokenizer, all 256 bytes as the base alphabet, then the most frequent adjacent
// pair merged repeatedly (ties: the smaller (left id, right id)), "<|endoftext|>" last.
#pragma once

#include "megatron/export.h"

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace megatron::tokenizer {

struct MEGATRON_API BpeTrainerOptions {
  int64_t vocab_size = 8192;  // including the 256 bytes and <|endoftext|>
  int64_t min_frequency = 2;  // stop when the best pair is rarer
};

class MEGATRON_API BpeTrainer {
 public:
  explicit BpeTrainer(BpeTrainerOptions options) : options_(options) {}
  // Counts the pre-tokenized words of one text (call for every document).
  void add_text(std::string_view text);
  void add_word_counts(const std::unordered_map<std::string, int64_t>& counts);
  // Learns the merges and writes {dir}/vocab.json and {dir}/merges.txt (atomically).
  void train_and_save(const std::string& dir);
  int64_t num_words() const { return static_cast<int64_t>(word_counts_.size()); }

 private:
  BpeTrainerOptions options_;
  std::unordered_map<std::string, int64_t> word_counts_;
};

}  // namespace megatron::tokenizer
