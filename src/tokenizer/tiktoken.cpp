// Megatron-LM's tiktoken JSON is read with nlohmann-json (the tiktoken package is Python over
// Rust, with no C API); the split pattern runs on Oniguruma, which reads tiktoken's possessive
// quantifiers and Unicode classes as tiktoken's regex engine does.
#include "megatron/tokenizer/tiktoken.h"

#include "added_tokens.h"
#include "bpe.h"
#include "hf_pipeline.h"
#include "input_files.h"
#include "utf8.h"

#include <c10/util/Exception.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

namespace megatron::tokenizer {
namespace {

// Megatron-LM's two patterns (its tiktoken_tokenizer.py): v1 is tiktoken's cl100k-style split,
// v2 splits letter case runs as o200k does.
constexpr const char* kPatternV1 =
    R"([^\r\n\p{L}\p{N}]?+\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]++[\r\n]*|\s*[\r\n]|\s+(?!\S)|\s+)";
constexpr const char* kPatternV2 =
    R"([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+|)"
    R"([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*|\p{N}|)"
    R"( ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
const std::array<const char*, 7> kSpecialTokens = {"<unk>", "<s>", "</s>", "<mask>", "<pad>", "<cls>", "<sep>"};

// RFC 4648 base64 (with padding), or nullopt-like false on any other character.
bool base64_decode(const std::string& in, std::string& out) {
  out.clear();
  uint32_t acc = 0;
  int bits = 0;
  size_t pad = 0;
  for (char c : in) {
    int v;
    if (c >= 'A' && c <= 'Z') {
      v = c - 'A';
    } else if (c >= 'a' && c <= 'z') {
      v = c - 'a' + 26;
    } else if (c >= '0' && c <= '9') {
      v = c - '0' + 52;
    } else if (c == '+') {
      v = 62;
    } else if (c == '/') {
      v = 63;
    } else if (c == '=') {
      ++pad;
      continue;
    } else {
      return false;
    }
    if (pad > 0) return false;  // data after padding
    acc = (acc << 6) | static_cast<uint32_t>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out.push_back(static_cast<char>((acc >> bits) & 0xFF));
    }
  }
  return pad <= 2 && (in.size() % 4 == 0 || pad == 0);
}

// Megatron-LM's special tokens: the list given (the seven defaults when none is), then
// <SPECIAL_i> up to num_special_tokens, the name of each filler its id.
std::vector<std::string> special_token_names(const std::vector<std::string>& given, int64_t num_special_tokens) {
  std::vector<std::string> names = given;
  if (names.empty()) names.assign(kSpecialTokens.begin(), kSpecialTokens.end());
  std::set<std::string> seen(names.begin(), names.end());
  TORCH_CHECK(seen.size() == names.size(), "[tokenizer] --tokenizer-special-tokens: expected each token once, found ",
              names.size() - seen.size(), " repeated");
  TORCH_CHECK(static_cast<int64_t>(names.size()) <= num_special_tokens,
              "[tokenizer] --tokenizer-special-tokens: ", names.size(),
              " tokens, more than --tiktoken-num-special-tokens (", num_special_tokens, ")");
  for (const char* required : kSpecialTokens)
    TORCH_CHECK(seen.count(required),
                "[tokenizer] --tokenizer-special-tokens: TikTokenizer needs all of <unk> <s> </s> <mask> <pad> <cls> "
                "<sep> among them; ",
                required, " is missing");
  TORCH_CHECK(!seen.count(""), "[tokenizer] --tokenizer-special-tokens: an empty token");
  for (int64_t i = static_cast<int64_t>(names.size()); i < num_special_tokens; ++i) {
    names.push_back("<SPECIAL_" + std::to_string(i) + ">");
    TORCH_CHECK(seen.insert(names.back()).second, "[tokenizer] --tokenizer-special-tokens: ", names.back(),
                " is the name of filler token ", i);
  }
  return names;
}

}  // namespace

struct TikTokenizer::Impl {
  std::string path;
  int32_t num_special = 0;
  std::vector<std::string> special_names;  // by id
  int32_t eod = -1, bos = -1;
  int64_t vocab_size = 0;
  std::unique_ptr<detail::Regex> regex;
  std::unordered_map<std::string, int32_t> ids;  // token bytes -> id
  std::vector<std::string> id_to_bytes;          // every id, special tokens spelled out
  std::array<int32_t, 256> byte_ids{};
  detail::MergeTable merges;
  detail::AddedTokenSplitter specials;
  uint64_t instance_id = detail::new_tokenizer_instance_id();

  void encode_piece(std::string_view piece, std::vector<int32_t>& out) const {
    auto it = ids.find(std::string(piece));
    if (it != ids.end()) {
      out.push_back(it->second);
      return;
    }
    detail::cached_encode(instance_id, piece, out, [this](std::string_view w, std::vector<int32_t>& o) {
      std::vector<int32_t> symbols(w.size());
      for (size_t i = 0; i < w.size(); ++i) symbols[i] = byte_ids[static_cast<unsigned char>(w[i])];
      detail::bpe_merge(symbols, merges);
      o.insert(o.end(), symbols.begin(), symbols.end());
    });
  }
};

TikTokenizer::TikTokenizer(const std::string& path, const std::string& pattern, int64_t num_special_tokens,
                           int64_t vocab_size, const std::vector<std::string>& special_tokens)
    : impl_(std::make_unique<Impl>()) {
  Impl& m = *impl_;
  m.path = path;
  TORCH_CHECK(pattern == "v1" || pattern == "v2", "[tokenizer] --tiktoken-pattern: expected v1 or v2, found '", pattern,
              "'");
  TORCH_CHECK(num_special_tokens >= static_cast<int64_t>(kSpecialTokens.size()) && num_special_tokens < vocab_size &&
                  vocab_size <= (1 << 30),
              "[tokenizer] TikTokenizer: expected ", kSpecialTokens.size(),
              " <= --tiktoken-num-special-tokens < --vocab-size <= 2^30, found ", num_special_tokens, " and ",
              vocab_size);
  m.num_special = static_cast<int32_t>(num_special_tokens);
  m.vocab_size = vocab_size;
  m.special_names = special_token_names(special_tokens, num_special_tokens);
  auto index_of = [&](const char* name) {
    return static_cast<int32_t>(std::find(m.special_names.begin(), m.special_names.end(), name) -
                                m.special_names.begin());
  };
  m.eod = index_of("</s>");
  m.bos = index_of("<s>");
  const char* what = "tiktoken JSON (--tokenizer-model)";
  const nlohmann::json list =
      megatron::detail::parse_json(detail::read_whole_file(path, what), detail::tokenizer_file(path, what));
  const auto inner = static_cast<size_t>(vocab_size - num_special_tokens);
  TORCH_CHECK(inner >= 256, "[tokenizer] TikTokenizer: --vocab-size ", vocab_size,
              " leaves fewer than the 256 single-byte tokens after ", num_special_tokens, " special tokens");
  TORCH_CHECK(list.is_array() && list.size() >= inner, "[tokenizer] ", path,
              ": expected a JSON list of at least --vocab-size - --tiktoken-num-special-tokens = ", inner,
              " tokens, found ", list.is_array() ? std::to_string(list.size()) + " tokens" : list.type_name());
  m.id_to_bytes.resize(static_cast<size_t>(vocab_size));
  for (int32_t i = 0; i < m.num_special; ++i) {
    const std::string& name = m.special_names[static_cast<size_t>(i)];
    m.id_to_bytes[static_cast<size_t>(i)] = name;
    m.specials.add(detail::AddedToken{name, i});
  }
  for (size_t i = 0; i < inner; ++i) {
    const nlohmann::json& entry = list[i];
    std::string bytes;
    const bool ok = entry.is_object() && entry.contains("rank") && entry["rank"].is_number_unsigned() &&
                    entry["rank"].get<uint64_t>() == i && entry.contains("token_bytes") &&
                    entry["token_bytes"].is_string() && base64_decode(entry["token_bytes"].get<std::string>(), bytes);
    TORCH_CHECK(ok, "[tokenizer] ", path, ": entry ", i, ": expected {\"rank\": ", i,
                ", \"token_bytes\": <base64>, ...}, found ", megatron::detail::excerpt(entry.dump(), 200));
    TORCH_CHECK(i >= 256 || bytes == std::string(1, static_cast<char>(i)), "[tokenizer] ", path, ": entry ", i,
                ": the first 256 tokens must be the single bytes 0..255 in order");
    // Real tokens are short; a huge one in a hostile file would make the pair listing below quadratic.
    TORCH_CHECK(bytes.size() <= 1024, "[tokenizer] ", path, ": entry ", i, " is ", bytes.size(),
                " bytes long; tokens over 1024 bytes are refused");
    TORCH_CHECK(!bytes.empty() && m.ids.emplace(bytes, static_cast<int32_t>(i) + m.num_special).second, "[tokenizer] ",
                path, ": entry ", i, ": its bytes are empty or repeat an earlier token's");
    m.id_to_bytes[i + static_cast<size_t>(m.num_special)] = bytes;
  }
  for (int b = 0; b < 256; ++b) m.byte_ids[static_cast<size_t>(b)] = b + m.num_special;
  // tiktoken merges any adjacent pair whose concatenation is a token, at that token's rank: list
  // every way each token splits into two tokens.
  for (const auto& [bytes, id] : m.ids) {
    for (size_t k = 1; k < bytes.size(); ++k) {
      auto left = m.ids.find(bytes.substr(0, k)), right = m.ids.find(bytes.substr(k));
      if (left != m.ids.end() && right != m.ids.end()) m.merges.add(left->second, right->second, id, id);
    }
  }
  m.regex = std::make_unique<detail::Regex>(pattern == "v1" ? kPatternV1 : kPatternV2,
                                            path + ": --tiktoken-pattern " + pattern);
}

TikTokenizer::~TikTokenizer() = default;

void TikTokenizer::tokenize_into(std::string_view text, std::vector<int32_t>& out) const {
  std::string replaced;
  text = detail::as_valid_utf8(text, replaced);
  const Impl& m = *impl_;
  // Only the pattern's matches are encoded, as tiktoken does (the patterns match every character).
  m.specials.split(
      text,
      [&](size_t b, size_t e) {
        const std::string_view part = text.substr(b, e - b);
        m.regex->for_each_match(part, [&](size_t pb, size_t pe) { m.encode_piece(part.substr(pb, pe - pb), out); });
      },
      [&](int32_t id) { out.push_back(id); });
}

std::string TikTokenizer::detokenize(const std::vector<int32_t>& ids) const {
  std::string out;
  for (int32_t id : ids) {
    TORCH_CHECK(id >= 0 && id < impl_->vocab_size, "[tokenizer] token id ", id, " outside the vocabulary [0, ",
                impl_->vocab_size, ")");
    out += impl_->id_to_bytes[static_cast<size_t>(id)];
  }
  return out;
}

int64_t TikTokenizer::vocab_size() const {
  return impl_->vocab_size;
}
int32_t TikTokenizer::eod() const {
  return impl_->eod;
}
int32_t TikTokenizer::bos() const {
  return impl_->bos;
}
const std::vector<std::string>& TikTokenizer::special_tokens() const {
  return impl_->special_names;
}

}  // namespace megatron::tokenizer
