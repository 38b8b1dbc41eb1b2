// Trains a GPT-2 style byte-level BPE vocabulary (vocab.json, merges.txt) from a JSONL corpus,
// usable with --tokenizer-type GPT2BPETokenizer here and by HF tokenizers / Megatron-LM.
#include "cli.h"
#include "json_lines.h"
#include "megatron/tokenizer/bpe_trainer.h"

#include <c10/util/Exception.h>

#include <sys/stat.h>
#include <fstream>
#include <iostream>

int main(int argc, char** argv) {
  std::string input, output_dir;
  std::vector<std::string> keys{"text"};
  megatron::tokenizer::BpeTrainerOptions options;
  CLI::App app{"Train a byte-level BPE vocabulary"};
  app.add_option("--input", input, "JSONL corpus")->required();
  app.add_option("--json-keys", keys, "keys holding text (default: text)");
  app.add_option("--output-dir", output_dir, "writes vocab.json and merges.txt")->required();
  app.add_option("--vocab-size", options.vocab_size, "tokens incl. 256 bytes + <|endoftext|>");
  app.add_option("--min-frequency", options.min_frequency, "stop below this pair count");
  return run_tool(app, "train_tokenizer", argc, argv, [&] {
    std::ifstream in(input, std::ios::binary);
    TORCH_CHECK(in, "[train_tokenizer] --input ", input, ": cannot open");
    ::mkdir(output_dir.c_str(), 0755);
    megatron::tokenizer::BpeTrainer trainer(options);
    std::string line;
    int64_t line_no = 0;
    while (std::getline(in, line)) {
      ++line_no;
      if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
      nlohmann::json doc;
      try {
        doc = nlohmann::json::parse(line);
      } catch (const nlohmann::json::exception& e) {
        TORCH_CHECK(false, "[train_tokenizer] ", input, ":", line_no, ": malformed JSON: ", json_error_text(e));
      }
      for (const auto& k : keys) {
        const bool ok = doc.is_object() && doc.contains(k) && doc[k].is_string();
        TORCH_CHECK(ok, "[train_tokenizer] ", input, ":", line_no, ": key '", k, "' missing or not a string");
        trainer.add_text(doc[k].get_ref<const std::string&>());
      }
    }
    trainer.train_and_save(output_dir);
    return 0;
  });
}
