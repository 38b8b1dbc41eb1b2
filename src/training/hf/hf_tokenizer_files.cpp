// The tokenizer a checkpoint was trained with, written beside its Hugging Face export, so that
// the folder alone opens in transformers (AutoTokenizer, pipeline("text-generation")).
#include <c10/util/Exception.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "input_files.h"
#include "megatron/tokenizer/hf_tokenizer.h"
#include "megatron/tokenizer/sentencepiece.h"
#include "megatron/tokenizer/tiktoken.h"
#include "megatron/tokenizer/tokenizer.h"
#include "megatron/training/checkpoint_files.h"
#include "megatron/training/gpt_callbacks.h"
#include "training/hf/hf_schema.h"

namespace megatron::training::hf {

namespace fs = std::filesystem;

namespace {

std::string read_file(const std::string& from) {
  return megatron::detail::read_whole_file(from, "[convert_checkpoint] " + from);
}

void copy_file(const std::string& from, const std::string& out_dir, const char* name) {
  write_text_file((fs::path(out_dir) / name).string(), read_file(from));
}

int64_t model_max_length(const Arguments& args) {
  return args.max_position_embeddings > 0 ? args.max_position_embeddings : args.seq_length;
}

// The tokenizer.json with --tokenizer-special-tokens among its added tokens, at the ids training
// gave them, so that transformers reads the same ids.
nlohmann::json with_added_special_tokens(const tokenizer::HuggingFaceTokenizer& tok,
                                         const std::vector<std::string>& special_tokens) {
  nlohmann::json j =
      megatron::detail::parse_json(read_file(tok.tokenizer_json()), "[convert_checkpoint] " + tok.tokenizer_json());
  nlohmann::json& added = j["added_tokens"];
  if (!added.is_array()) added = nlohmann::json::array();
  std::set<std::string> listed;
  for (const auto& t : added) listed.insert(t.value("content", std::string()));
  for (const std::string& t : special_tokens) {
    if (t.empty() || !listed.insert(t).second) continue;
    added.push_back({{"id", tok.token_to_id(t)},
                     {"content", t},
                     {"single_word", false},
                     {"lstrip", false},
                     {"rstrip", false},
                     {"normalized", false},
                     {"special", true}});
  }
  return j;
}

// tokenizer.json as it is (with --tokenizer-special-tokens added); its tokenizer_config.json (and
// special_tokens_map.json) too when there is one, else a config naming the fast tokenizer class and the eos/bos tokens.
SpecialTokenIds export_hf_tokenizer(const Arguments& args, const std::string& out_dir) {
  std::unique_ptr<tokenizer::HuggingFaceTokenizer> built;
  try {
    built = std::make_unique<tokenizer::HuggingFaceTokenizer>(
        args.tokenizer_model, !args.tokenizer_hf_no_include_special_tokens, args.tokenizer_special_tokens);
  } catch (const c10::Error& e) {
    TORCH_CHECK(false,
                "[convert_checkpoint] the checkpoint was trained with HuggingFaceTokenizer and --tokenizer-model ",
                args.tokenizer_model, ", which cannot be read here (", e.what_without_backtrace(),
                "); pass --tokenizer-model to export its tokenizer");
  }
  const tokenizer::HuggingFaceTokenizer& tok = *built;
  if (args.tokenizer_special_tokens.empty()) {
    copy_file(tok.tokenizer_json(), out_dir, "tokenizer.json");
  } else {
    write_text_file((fs::path(out_dir) / "tokenizer.json").string(),
                    with_added_special_tokens(tok, args.tokenizer_special_tokens).dump(2) + "\n");
  }
  if (!tok.tokenizer_config().empty()) {
    copy_file(tok.tokenizer_config(), out_dir, "tokenizer_config.json");
    const fs::path map = fs::path(tok.tokenizer_config()).parent_path() / "special_tokens_map.json";
    if (fs::is_regular_file(map)) copy_file(map.string(), out_dir, "special_tokens_map.json");
  } else {
    nlohmann::json config = {{"tokenizer_class", "PreTrainedTokenizerFast"},
                             {"model_max_length", model_max_length(args)}};
    if (tok.eod() >= 0) config["eos_token"] = tok.id_to_token(tok.eod());
    if (tok.bos() >= 0) config["bos_token"] = tok.id_to_token(tok.bos());
    write_text_file((fs::path(out_dir) / "tokenizer_config.json").string(), config.dump(2) + "\n");
  }
  return {tok.bos(), tok.eod()};
}

// The .model as transformers' LlamaTokenizer reads it (from tokenizer.model), adding no BOS, as
// Megatron-LM's SentencePiece types encode.
SpecialTokenIds export_sentencepiece(const Arguments& args, const std::string& out_dir) {
  TORCH_CHECK(fs::is_regular_file(args.tokenizer_model), "[convert_checkpoint] the checkpoint was trained with ",
              args.tokenizer_type, " and --tokenizer-model ", args.tokenizer_model,
              ", which is not there; pass --tokenizer-model to export its tokenizer");
  const tokenizer::SentencePieceTokenizer tok(args.tokenizer_model);
  copy_file(args.tokenizer_model, out_dir, "tokenizer.model");
  nlohmann::json config = {{"tokenizer_class", "LlamaTokenizer"},
                           {"add_bos_token", false},
                           {"add_eos_token", false},
                           {"model_max_length", model_max_length(args)}};
  if (tok.eod() >= 0) config["eos_token"] = "</s>";
  if (tok.bos() >= 0) config["bos_token"] = "<s>";
  write_text_file((fs::path(out_dir) / "tokenizer_config.json").string(), config.dump(2) + "\n");
  return {tok.bos(), tok.eod()};
}

}  // namespace

SpecialTokenIds export_tokenizer(const Arguments& args, const std::string& out_dir) {
  if (args.tokenizer_type == "HuggingFaceTokenizer") return export_hf_tokenizer(args, out_dir);
  if (args.tokenizer_type.find("SentencePiece") != std::string::npos || args.tokenizer_type == "Llama2Tokenizer")
    return export_sentencepiece(args, out_dir);
  if (args.tokenizer_type !=
      "GPT2BPETokenizer") {  // NullTokenizer, and TikTokenizer (transformers has no reader): no files
    const auto tokenizer = build_tokenizer(args);
    const auto* tiktoken = dynamic_cast<const tokenizer::TikTokenizer*>(tokenizer.get());
    return {tiktoken != nullptr ? tiktoken->bos() : tokenizer->eod(), tokenizer->eod()};
  }
  for (const auto& [flag, file] : {std::pair{"--vocab-file", args.vocab_file}, {"--merge-file", args.merge_file}})
    TORCH_CHECK(fs::is_regular_file(file), "[convert_checkpoint] the checkpoint was trained with GPT2BPETokenizer and ",
                flag, " ", file, ", which is not there; pass ", flag, " to export its tokenizer");
  const auto tokenizer = build_tokenizer(args);
  const int32_t eod = tokenizer->eod();
  TORCH_CHECK(eod >= 0, "[convert_checkpoint] ", args.vocab_file, " has no <|endoftext|> token");
  copy_file(args.vocab_file, out_dir, "vocab.json");
  copy_file(args.merge_file, out_dir, "merges.txt");
  // GPT-2's special tokens are all <|endoftext|>, as Hugging Face's gpt2 folder has them.
  const std::string end = tokenizer->detokenize({eod});
  nlohmann::json special = {{"bos_token", end}, {"eos_token", end}, {"unk_token", end}};
  // Added by transformers after the vocabulary in this order, as training added them.
  if (!args.tokenizer_special_tokens.empty()) special["additional_special_tokens"] = args.tokenizer_special_tokens;
  nlohmann::json config = special;
  config["tokenizer_class"] = "GPT2Tokenizer";
  config["add_prefix_space"] = false;
  config["model_max_length"] = model_max_length(args);
  write_text_file((fs::path(out_dir) / "special_tokens_map.json").string(), special.dump(2) + "\n");
  write_text_file((fs::path(out_dir) / "tokenizer_config.json").string(), config.dump(2) + "\n");
  return {eod, eod};
}

}  // namespace megatron::training::hf
