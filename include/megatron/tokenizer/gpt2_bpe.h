// GPT-2 byte-level BPE from vocab.json + merges.txt, encoding exactly as GPT-2 / HF tokenizers'
// ByteLevel BPE (add_prefix_space=false): the GPT-2 pre-tokenization pattern
//   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
// then bytes mapped to printable characters and merged lowest rank first (leftmost on ties).
// Input that is not valid UTF-8 is kept byte for byte: each invalid byte is one symbol of the
// [^\s\p{L}\p{N}] class, so decode(encode(x)) == x for any bytes.
#pragma once

#include "megatron/export.h"

#include "megatron/tokenizer/tokenizer.h"

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace megatron::tokenizer {
namespace detail {
class AddedTokenSplitter;
class MergeTable;
}  // namespace detail

// GPT-2's reversible byte -> code point table (printable bytes map to themselves).
MEGATRON_API const std::array<uint32_t, 256>& bytes_to_unicode();

// Splits UTF-8 text into GPT-2 pre-tokens (byte ranges, in order, covering the text).
MEGATRON_API std::vector<std::string_view> gpt2_pretokenize(std::string_view text);

class MEGATRON_API GPT2BPETokenizer : public Tokenizer {
 public:
  // special_tokens (--tokenizer-special-tokens): added as Hugging Face's add_special_tokens adds
  // them to GPT-2's tokenizer (Megatron-LM's GPT2BPETokenizer): a vocabulary token keeps its id,
  // a new one gets the next id; only these are matched whole in the text.
  GPT2BPETokenizer(const std::string& vocab_file, const std::string& merges_file,
                   const std::vector<std::string>& special_tokens = {});
  ~GPT2BPETokenizer() override;

  void tokenize_into(std::string_view text, std::vector<int32_t>& out) const override;
  std::string detokenize(const std::vector<int32_t>& ids) const override;
  int64_t vocab_size() const override { return static_cast<int64_t>(id_to_bytes_.size()); }
  int32_t eod() const override { return eod_; }

  // Token id of a vocabulary entry (in its byte-to-unicode spelling), or -1.
  int32_t token_to_id(const std::string& token) const;

 private:
  void bpe(std::string_view word, std::vector<int32_t>& out) const;

  std::unordered_map<std::string, int32_t> vocab_;
  std::vector<std::string> id_to_bytes_;  // raw bytes of each token
  std::array<int32_t, 256> byte_ids_;     // single-byte tokens (-1 when absent)
  std::unique_ptr<detail::MergeTable> merges_;
  std::unique_ptr<detail::AddedTokenSplitter> specials_;  // null without special tokens
  int32_t eod_ = -1;
  uint64_t instance_id_;  // keys the per-thread word caches
};

}  // namespace megatron::tokenizer
