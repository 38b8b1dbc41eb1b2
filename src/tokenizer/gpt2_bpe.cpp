#include "megatron/tokenizer/gpt2_bpe.h"

#include "added_tokens.h"
#include "bpe.h"
#include "gpt2_pretokenizer.h"
#include "input_files.h"

#include <c10/util/Exception.h>

#include <algorithm>
#include <cstring>
#include <nlohmann/json.hpp>
#include <sstream>

namespace megatron::tokenizer {
namespace {

using detail::append_utf8;
using detail::decode_utf8;

}  // namespace

const std::array<uint32_t, 256>& bytes_to_unicode() {
  static const std::array<uint32_t, 256> table = [] {
    std::array<uint32_t, 256> t{};
    uint32_t n = 0;
    for (uint32_t b = 0; b < 256; ++b) {
      const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
      t[b] = printable ? b : 256 + n++;
    }
    return t;
  }();
  return table;
}

std::vector<std::string_view> gpt2_pretokenize(std::string_view text) {
  std::vector<std::string_view> out;
  detail::for_each_pretoken(text, [&](size_t b, size_t e) { out.push_back(text.substr(b, e - b)); });
  return out;
}

GPT2BPETokenizer::GPT2BPETokenizer(const std::string& vocab_file, const std::string& merges_file,
                                   const std::vector<std::string>& special_tokens)
    : merges_(std::make_unique<detail::MergeTable>()), instance_id_(detail::new_tokenizer_instance_id()) {
  const char* what = "vocabulary (--vocab-file)";
  const nlohmann::json vocab =
      megatron::detail::parse_json(detail::read_whole_file(vocab_file, what), detail::tokenizer_file(vocab_file, what));
  TORCH_CHECK(vocab.is_object() && !vocab.empty(), "[tokenizer] ", vocab_file,
              ": expected a JSON object of token -> id");
  int64_t max_id = -1;
  for (const auto& [token, id] : vocab.items()) {
    TORCH_CHECK(id.is_number_unsigned() && id.get<uint64_t>() <= static_cast<uint64_t>(INT32_MAX), "[tokenizer] ",
                vocab_file, ": token '", megatron::detail::excerpt(token), "' expected a non-negative integer id");
    max_id = std::max<int64_t>(max_id, id.get<int64_t>());
  }
  id_to_bytes_.assign(static_cast<size_t>(max_id + 1), std::string());
  for (const auto& [token, id] : vocab.items()) {
    const auto tid = id.get<int32_t>();
    vocab_[token] = tid;
    // Token strings spell bytes through bytes_to_unicode; a special token such as <|endoftext|>
    // is spelled literally.
    std::string bytes;
    if (!detail::byte_level_bytes(token, bytes)) bytes = token;
    id_to_bytes_[static_cast<size_t>(tid)] = bytes;
  }
  for (int b = 0; b < 256; ++b) {
    std::string s;
    append_utf8(s, bytes_to_unicode()[b]);
    auto it = vocab_.find(s);
    byte_ids_[b] = it == vocab_.end() ? -1 : it->second;
  }
  auto eod = vocab_.find("<|endoftext|>");
  eod_ = eod == vocab_.end() ? -1 : eod->second;

  const std::string merges = detail::read_whole_file(merges_file, "merges (--merge-file)");
  std::istringstream lines(merges);
  std::string line;
  int32_t rank = 0;
  int64_t line_no = 0;
  while (std::getline(lines, line)) {
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line_no == 1 && line.rfind("#version", 0) == 0) continue;
    if (line.empty()) continue;
    const size_t space_at = line.find(' ');
    TORCH_CHECK(space_at != std::string::npos && space_at > 0 && space_at + 1 < line.size() &&
                    line.find(' ', space_at + 1) == std::string::npos,
                "[tokenizer] ", merges_file, ":", line_no, ": expected two tokens separated by one space, found '",
                line, "'");
    const std::string left = line.substr(0, space_at), right = line.substr(space_at + 1);
    auto l = vocab_.find(left), r = vocab_.find(right), m = vocab_.find(left + right);
    TORCH_CHECK(l != vocab_.end() && r != vocab_.end() && m != vocab_.end(), "[tokenizer] ", merges_file, ":", line_no,
                ": merge '", line, "' uses a token missing from ", vocab_file);
    merges_->add(l->second, r->second, rank++, m->second);
  }
  for (const std::string& t : special_tokens) {
    if (t.empty()) continue;
    if (!specials_) specials_ = std::make_unique<detail::AddedTokenSplitter>();
    detail::add_special_token(
        t, *specials_, [&](const std::string& s) { return token_to_id(s); },
        [&](const std::string& s) {
          const auto id = static_cast<int32_t>(id_to_bytes_.size());
          vocab_.emplace(s, id);
          id_to_bytes_.push_back(s);
          return id;
        });
  }
}

GPT2BPETokenizer::~GPT2BPETokenizer() = default;

int32_t GPT2BPETokenizer::token_to_id(const std::string& token) const {
  auto it = vocab_.find(token);
  return it == vocab_.end() ? -1 : it->second;
}

void GPT2BPETokenizer::bpe(std::string_view word, std::vector<int32_t>& out) const {
  std::vector<int32_t> ids(word.size());
  for (size_t i = 0; i < word.size(); ++i) {
    const auto b = static_cast<unsigned char>(word[i]);
    ids[i] = byte_ids_[b];
    TORCH_CHECK(ids[i] >= 0, "[tokenizer] byte 0x", std::hex, static_cast<int>(b),
                " has no token in the vocabulary (a byte-level vocabulary lists all 256)");
  }
  detail::bpe_merge(ids, *merges_);
  out.insert(out.end(), ids.begin(), ids.end());
}

void GPT2BPETokenizer::tokenize_into(std::string_view text, std::vector<int32_t>& out) const {
  auto words = [&](std::string_view part) {
    detail::for_each_pretoken(part, [&](size_t b, size_t e) {
      const std::string_view word = part.substr(b, e - b);
      if (word.size() == 1) {  // a single byte is its own token
        bpe(word, out);
        return;
      }
      detail::cached_encode(instance_id_, word, out,
                            [this](std::string_view w, std::vector<int32_t>& o) { bpe(w, o); });
    });
  };
  if (!specials_) {
    words(text);
    return;
  }
  specials_->split(
      text, [&](size_t b, size_t e) { words(text.substr(b, e - b)); }, [&](int32_t id) { out.push_back(id); });
}

std::string GPT2BPETokenizer::detokenize(const std::vector<int32_t>& ids) const {
  std::string out;
  for (int32_t id : ids) {
    TORCH_CHECK(id >= 0 && static_cast<size_t>(id) < id_to_bytes_.size(), "[tokenizer] token id ", id,
                " outside the vocabulary [0, ", id_to_bytes_.size(), ")");
    out += id_to_bytes_[static_cast<size_t>(id)];
  }
  return out;
}

}  // namespace megatron::tokenizer
