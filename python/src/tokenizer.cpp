// Tokenizers (GPT-2 byte-level BPE, Hugging Face tokenizer.json, Megatron's NullTokenizer), Megatron-style construction
// from the tokenizer flags, and the BPE trainer. Text may be str (UTF-8) or bytes.
#include "megatron/tokenizer/tokenizer.h"
#include "bindings.h"
#include "megatron/tokenizer/bpe_trainer.h"
#include "megatron/tokenizer/gpt2_bpe.h"
#include "megatron/tokenizer/hf_tokenizer.h"
#include "megatron/tokenizer/null_tokenizer.h"
#include "megatron/tokenizer/sentencepiece.h"
#include "megatron/tokenizer/tiktoken.h"

namespace {

// str -> its UTF-8; bytes as they are (GPT-2 BPE keeps invalid UTF-8 byte for byte).
std::string text_of(const py::handle& text) {
  if (py::isinstance<py::bytes>(text)) return text.cast<std::string>();
  if (py::isinstance<py::str>(text)) return text.cast<std::string>();
  throw py::type_error("[tokenizer] text: expected str or bytes, found " +
                       py::str(py::type::of(text)).cast<std::string>());
}

}  // namespace

void init_tokenizer(py::module_& m) {
  namespace tok = megatron::tokenizer;
  using Release = py::call_guard<py::gil_scoped_release>;

  py::class_<tok::Tokenizer, std::shared_ptr<tok::Tokenizer>>(
      m, "Tokenizer", "Text <-> token ids (Megatron's MegatronTokenizer interface).")
      .def(
          "tokenize",
          [](const tok::Tokenizer& t, const py::object& text) {
            const std::string s = text_of(text);
            py::gil_scoped_release release;
            return t.tokenize(s);
          },
          py::arg("text"), "Token ids of str (UTF-8) or bytes.")
      .def(
          "detokenize",
          [](const tok::Tokenizer& t, const std::vector<int32_t>& ids) {
            const std::string bytes = t.detokenize(ids);
            return py::reinterpret_steal<py::str>(PyUnicode_DecodeUTF8(bytes.data(), bytes.size(), "replace"));
          },
          py::arg("ids"), "The text of ids (invalid UTF-8 replaced by U+FFFD; see detokenize_bytes).")
      .def(
          "detokenize_bytes",
          [](const tok::Tokenizer& t, const std::vector<int32_t>& ids) { return py::bytes(t.detokenize(ids)); },
          py::arg("ids"), "The exact bytes of ids.")
      .def_property_readonly("vocab_size", &tok::Tokenizer::vocab_size)
      .def_property_readonly("eod", &tok::Tokenizer::eod, "The end-of-document id.");

  py::class_<tok::GPT2BPETokenizer, tok::Tokenizer, std::shared_ptr<tok::GPT2BPETokenizer>>(
      m, "GPT2BPETokenizer", "GPT-2 byte-level BPE from vocab.json and merges.txt, encoding as HF tokenizers does.")
      .def(py::init<const std::string&, const std::string&, const std::vector<std::string>&>(), py::arg("vocab_file"),
           py::arg("merge_file"), py::arg("special_tokens") = std::vector<std::string>{}, Release(),
           "special_tokens: added after the vocabulary unless in it, matched whole in the text "
           "(--tokenizer-special-tokens).")
      .def("token_to_id", &tok::GPT2BPETokenizer::token_to_id, py::arg("token"),
           "Id of a vocabulary entry (in its byte-to-unicode spelling), or -1.");
  py::class_<tok::HuggingFaceTokenizer, tok::Tokenizer, std::shared_ptr<tok::HuggingFaceTokenizer>>(
      m, "HuggingFaceTokenizer",
      "A Hugging Face tokenizer.json (BPE: byte-level or metaspace), encoding as the tokenizers package does.")
      .def(py::init<const std::string&, bool, const std::vector<std::string>&>(), py::arg("path"),
           py::arg("include_special_tokens") = true, py::arg("special_tokens") = std::vector<std::string>{}, Release(),
           "path: a tokenizer.json or its folder (a tokenizer_config.json beside it names eos/bos). "
           "special_tokens: added as Hugging Face's add_special_tokens adds them (--tokenizer-special-tokens).")
      .def_property_readonly("bos", &tok::HuggingFaceTokenizer::bos, "The beginning-of-sequence id, or -1.")
      .def("token_to_id", &tok::HuggingFaceTokenizer::token_to_id, py::arg("token"), "Id of a token, or -1.")
      .def("id_to_token", &tok::HuggingFaceTokenizer::id_to_token, py::arg("id"),
           "A token's spelling in tokenizer.json.");
  py::class_<tok::TikTokenizer, tok::Tokenizer, std::shared_ptr<tok::TikTokenizer>>(
      m, "TikTokenizer",
      "Megatron-LM's TikTokenizer: its tiktoken JSON, ids after num_special_tokens special tokens, encoding as "
      "tiktoken does.")
      .def(
          py::init<const std::string&, const std::string&, int64_t, int64_t, const std::vector<std::string>&>(),
          py::arg("path"), py::arg("pattern") = "v2", py::arg("num_special_tokens") = 1000,
          py::arg("vocab_size") = 131072, py::arg("special_tokens") = std::vector<std::string>{}, Release(),
          "special_tokens: the special tokens in id order, the seven defaults among them (--tokenizer-special-tokens).")
      .def_property_readonly("bos", &tok::TikTokenizer::bos, "The <s> id.")
      .def_property_readonly("special_tokens", &tok::TikTokenizer::special_tokens, "Every special token, by id.");
  py::class_<tok::SentencePieceTokenizer, tok::Tokenizer, std::shared_ptr<tok::SentencePieceTokenizer>>(
      m, "SentencePieceTokenizer",
      "A SentencePiece .model (BPE or unigram), encoding as sentencepiece's encode_as_ids does (Megatron-LM's "
      "SentencePieceTokenizer, GPTSentencePieceTokenizer and Llama2Tokenizer).")
      .def(py::init<const std::string&>(), py::arg("model_file"), Release())
      .def_property_readonly("bos", &tok::SentencePieceTokenizer::bos, "The <s> id, or -1.");
  py::class_<tok::NullTokenizer, tok::Tokenizer, std::shared_ptr<tok::NullTokenizer>>(
      m, "NullTokenizer", "Megatron's NullTokenizer: text is space-separated ids; EOD is vocab_size - 1.")
      .def(py::init<int64_t>(), py::arg("vocab_size"));

  m.def(
      "build_tokenizer",
      [](const std::string& tokenizer_type, const std::string& vocab_file, const std::string& merge_file,
         const std::string& tokenizer_model, bool include_special_tokens, const std::string& tiktoken_pattern,
         int64_t tiktoken_num_special_tokens, int64_t vocab_size, const std::vector<std::string>& special_tokens) {
        tok::TokenizerOptions o;
        o.tokenizer_type = tokenizer_type;
        o.vocab_file = vocab_file;
        o.merge_file = merge_file;
        o.tokenizer_model = tokenizer_model;
        o.include_special_tokens = include_special_tokens;
        o.tiktoken_pattern = tiktoken_pattern;
        o.tiktoken_num_special_tokens = tiktoken_num_special_tokens;
        o.vocab_size = vocab_size;
        o.special_tokens = special_tokens;
        py::gil_scoped_release release;
        return std::shared_ptr<tok::Tokenizer>(tok::build_tokenizer(o));
      },
      py::arg("tokenizer_type"), py::kw_only(), py::arg("vocab_file") = "", py::arg("merge_file") = "",
      py::arg("tokenizer_model") = "", py::arg("include_special_tokens") = true, py::arg("tiktoken_pattern") = "v2",
      py::arg("tiktoken_num_special_tokens") = 1000, py::arg("vocab_size") = 0,
      py::arg("special_tokens") = std::vector<std::string>{},
      "A tokenizer by Megatron's --tokenizer-type (GPT2BPETokenizer, HuggingFaceTokenizer, TikTokenizer or "
      "NullTokenizer).");

  py::class_<tok::BpeTrainer>(m, "BpeTrainer",
                              "Trains a GPT-2 style byte-level BPE vocabulary (vocab.json + merges.txt).")
      .def(py::init([](int64_t vocab_size, int64_t min_frequency) {
             return tok::BpeTrainer(tok::BpeTrainerOptions{vocab_size, min_frequency});
           }),
           py::arg("vocab_size") = 8192, py::arg("min_frequency") = 2)
      .def(
          "add_text", [](tok::BpeTrainer& t, const py::object& text) { t.add_text(text_of(text)); }, py::arg("text"),
          "Counts the pre-tokenized words of one document.")
      .def("train_and_save", &tok::BpeTrainer::train_and_save, py::arg("dir"), Release(),
           "Learns the merges and writes {dir}/vocab.json and {dir}/merges.txt.")
      .def_property_readonly("num_words", &tok::BpeTrainer::num_words);
}
