// The tokenizer a checkpoint was trained with, written beside its Hugging Face export, so that
// the folder alone opens in transformers (AutoTokenizer, pipeline("text-generation")).
#include <c10/util/Exception.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <iterator>

#include "hf_schema.h"
#include "megatron/tokenizer/tokenizer.h"
#include "megatron/training/checkpoint_files.h"
#include "megatron/training/gpt_callbacks.h"

namespace megatron::training::hf {

namespace fs = std::filesystem;

int64_t export_tokenizer(const Arguments& args, const std::string& out_dir) {
  if (args.tokenizer_type != "GPT2BPETokenizer") return build_tokenizer(args)->eod();  // NullTokenizer: no files
  for (const auto& [flag, file] : {std::pair{"--vocab-file", args.vocab_file}, {"--merge-file", args.merge_file}})
    TORCH_CHECK(fs::is_regular_file(file), "[convert_checkpoint] the checkpoint was trained with GPT2BPETokenizer and ",
                flag, " ", file, ", which is not there; pass ", flag, " to export its tokenizer");
  const auto tokenizer = build_tokenizer(args);
  const int32_t eod = tokenizer->eod();
  TORCH_CHECK(eod >= 0, "[convert_checkpoint] ", args.vocab_file, " has no <|endoftext|> token");
  auto copy = [&](const std::string& from, const char* name) {
    std::ifstream in(from, std::ios::binary);
    write_text_file((fs::path(out_dir) / name).string(),
                    std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>()));
  };
  copy(args.vocab_file, "vocab.json");
  copy(args.merge_file, "merges.txt");
  // GPT-2's special tokens are all <|endoftext|>, as Hugging Face's gpt2 folder has them.
  const std::string end = tokenizer->detokenize({eod});
  nlohmann::json special = {{"bos_token", end}, {"eos_token", end}, {"unk_token", end}};
  nlohmann::json config = special;
  config["tokenizer_class"] = "GPT2Tokenizer";
  config["add_prefix_space"] = false;
  config["model_max_length"] = args.max_position_embeddings > 0 ? args.max_position_embeddings : args.seq_length;
  write_text_file((fs::path(out_dir) / "special_tokens_map.json").string(), special.dump(2) + "\n");
  write_text_file((fs::path(out_dir) / "tokenizer_config.json").string(), config.dump(2) + "\n");
  return eod;
}

}  // namespace megatron::training::hf
