// A SentencePiece .model file (the ModelProto protocol buffer) and its normalizer.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace megatron::tokenizer::detail {

// ModelProto.SentencePiece.Type
enum class PieceType { kNormal = 1, kUnknown = 2, kControl = 3, kUserDefined = 4, kUnused = 5, kByte = 6 };

struct SpModel {
  struct Piece {
    std::string piece;
    float score = 0;
    PieceType type = PieceType::kNormal;
  };
  std::vector<Piece> pieces;
  int model_type = 1;  // TrainerSpec.ModelType: 1 unigram, 2 BPE, 3 word, 4 char
  bool byte_fallback = false;
  bool treat_whitespace_as_suffix = false;
  std::string unk_piece = "<unk>", bos_piece = "<s>", eos_piece = "</s>";
  std::string unk_surface = " \xE2\x81\x87 ";  // " ⁇ "
  // NormalizerSpec, with the protocol buffer's defaults.
  std::string normalizer_name;
  std::string precompiled_charsmap;
  bool add_dummy_prefix = true;
  bool remove_extra_whitespaces = true;
  bool escape_whitespaces = true;
};

// The fields above, read from the file's protocol buffer; errors name the file.
SpModel read_sp_model(const std::string& path);

// The longest user-defined symbol at the start of text (sentencepiece's PrefixMatcher): its
// byte length and found = true, or one character's length and found = false.
class SymbolMatcher {
 public:
  explicit SymbolMatcher(const std::vector<std::string>& symbols);
  size_t match(std::string_view text, bool& found) const;

 private:
  std::vector<std::vector<std::string>> by_first_byte_;  // longest first
};

// sentencepiece's Normalizer::Normalize: the precompiled character map (longest rule first),
// user-defined symbols kept as they are, extra whitespace removed, the dummy prefix added and
// spaces written U+2581, as the NormalizerSpec says.
class SpNormalizer {
 public:
  SpNormalizer(const SpModel& model, const SymbolMatcher& symbols, const std::string& where);
  std::string normalize(std::string_view input) const;

 private:
  // The normalized form of the prefix of input, and how many bytes of input it consumed.
  std::pair<std::string_view, size_t> normalize_prefix(std::string_view input) const;

  const SpModel& model_;
  const SymbolMatcher& symbols_;
  std::vector<uint32_t> trie_;  // a Darts-clone double array
  std::string normalized_;      // NUL-separated replacement strings the trie's values index
};

}  // namespace megatron::tokenizer::detail
