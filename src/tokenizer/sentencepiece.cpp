#include "megatron/tokenizer/sentencepiece.h"

#include "sentencepiece_model.h"
#include "utf8.h"

#include <c10/util/Exception.h>

#include <algorithm>
#include <array>
#include <cfloat>
#include <cstdio>
#include <queue>
#include <unordered_map>
#include <unordered_set>

namespace megatron::tokenizer {
namespace {

using detail::PieceType;
using Result = std::vector<std::pair<std::string_view, int32_t>>;  // (piece, id) in order
// BPE: an unused piece's last merge, to split it back into what it was made of.
using RevMerge = std::unordered_map<std::string_view, std::pair<std::string_view, std::string_view>>;

constexpr std::string_view kSpace = "\xE2\x96\x81";  // U+2581, SentencePiece's space
constexpr float kUnkPenalty = 10.0f;                 // unigram: an unknown character costs min score - 10

}  // namespace

struct SentencePieceTokenizer::Impl {
  std::string path;
  detail::SpModel model;
  std::unique_ptr<detail::SymbolMatcher> symbols;
  std::unique_ptr<detail::SpNormalizer> normalizer;
  // Keys view model.pieces' strings, which never move after loading.
  std::unordered_map<std::string_view, int32_t> pieces;    // normal, user-defined and unused
  std::unordered_map<std::string_view, int32_t> reserved;  // control, unknown and byte
  std::unordered_set<std::string_view> prefixes;           // unigram: every prefix of a piece
  std::array<int32_t, 256> byte_ids{};
  int32_t unk = -1, bos = -1, eos = -1;
  float min_score = FLT_MAX, max_score = FLT_MIN;  // FLT_MIN, as sentencepiece starts it

  PieceType type(int32_t id) const { return model.pieces[static_cast<size_t>(id)].type; }
  int32_t piece_to_id(std::string_view w) const {
    auto r = reserved.find(w);
    if (r != reserved.end()) return r->second;
    auto p = pieces.find(w);
    return p != pieces.end() ? p->second : unk;
  }
  void encode_bpe(std::string_view text, Result& out) const;
  void encode_unigram(std::string_view text, Result& out) const;
  void resegment(std::string_view piece, const RevMerge& rev_merge, Result& out) const;
};

SentencePieceTokenizer::SentencePieceTokenizer(const std::string& model_file) : impl_(std::make_unique<Impl>()) {
  Impl& m = *impl_;
  m.path = model_file;
  m.model = detail::read_sp_model(model_file);
  const auto& sp = m.model;
  TORCH_CHECK(sp.model_type == 1 || sp.model_type == 2, "[tokenizer] ", model_file, ": model type ", sp.model_type,
              " is not supported (SentencePiece unigram (1) and BPE (2) are)");
  m.byte_ids.fill(-1);
  std::vector<std::string> user_defined;
  for (size_t i = 0; i < sp.pieces.size(); ++i) {
    const auto& p = sp.pieces[i];
    const auto id = static_cast<int32_t>(i);
    const bool normal = p.type == PieceType::kNormal || p.type == PieceType::kUserDefined || p.type == PieceType::kUnused;
    TORCH_CHECK(!p.piece.empty() && (normal ? m.pieces : m.reserved).emplace(p.piece, id).second, "[tokenizer] ",
                model_file, ": piece ", i, " ('", p.piece, "') is empty or defined twice");
    if (p.type == PieceType::kUserDefined) user_defined.push_back(p.piece);
    if (p.type == PieceType::kUnknown) m.unk = id;
    if (p.type == PieceType::kNormal) {
      m.min_score = std::min(m.min_score, p.score);
      m.max_score = std::max(m.max_score, p.score);
    }
    if (p.type == PieceType::kByte) {
      unsigned value = 0;
      TORCH_CHECK(p.piece.size() == 6 && std::sscanf(p.piece.c_str(), "<0x%2X>", &value) == 1 && value < 256,
                  "[tokenizer] ", model_file, ": byte piece ", i, " is '", p.piece, "', expected <0xXX>");
      m.byte_ids[value] = id;
    }
    if (normal) {
      for (size_t k = 1; k <= p.piece.size(); ++k) m.prefixes.insert(std::string_view(p.piece).substr(0, k));
    }
  }
  TORCH_CHECK(m.unk >= 0, "[tokenizer] ", model_file, ": the model has no unknown piece (<unk>)");
  TORCH_CHECK(!sp.byte_fallback || *std::min_element(m.byte_ids.begin(), m.byte_ids.end()) >= 0, "[tokenizer] ",
              model_file, ": byte_fallback is set but the 256 <0xXX> pieces are not all there");
  m.bos = m.piece_to_id("<s>") == m.unk ? -1 : m.piece_to_id("<s>");
  m.eos = m.piece_to_id("</s>") == m.unk ? -1 : m.piece_to_id("</s>");
  m.symbols = std::make_unique<detail::SymbolMatcher>(user_defined);
  m.normalizer = std::make_unique<detail::SpNormalizer>(m.model, *m.symbols, model_file);
}

SentencePieceTokenizer::~SentencePieceTokenizer() = default;

// sentencepiece's BPE: characters (user-defined symbols whole and frozen), then repeatedly the
// adjacent pair whose concatenation is a piece of the highest score, leftmost on ties.
void SentencePieceTokenizer::Impl::encode_bpe(std::string_view text, Result& out) const {
  struct Symbol {
    int prev, next;
    std::string_view piece;
    bool freeze;
  };
  struct Pair {
    int left, right;
    float score;
    size_t size;
  };
  auto lower = [](const Pair& a, const Pair& b) { return a.score < b.score || (a.score == b.score && a.left > b.left); };
  std::priority_queue<Pair, std::vector<Pair>, decltype(lower)> agenda(lower);
  std::vector<Symbol> syms;
  for (std::string_view rest = text; !rest.empty();) {
    bool frozen = false;
    const size_t len = symbols->match(rest, frozen);
    const int index = static_cast<int>(syms.size());
    syms.push_back({index - 1, rest.size() == len ? -1 : index + 1, rest.substr(0, len), frozen});
    rest.remove_prefix(len);
  }
  RevMerge rev_merge;
  auto maybe_add = [&](int left, int right) {
    if (left < 0 || right < 0 || syms[left].freeze || syms[right].freeze) return;
    const std::string_view joined(syms[left].piece.data(), syms[left].piece.size() + syms[right].piece.size());
    auto it = pieces.find(joined);
    if (it == pieces.end()) return;
    agenda.push({left, right, model.pieces[static_cast<size_t>(it->second)].score, joined.size()});
    // An unused piece still merges, and is then split back into the two it was made of.
    if (type(it->second) == PieceType::kUnused) rev_merge[joined] = {syms[left].piece, syms[right].piece};
  };
  for (size_t i = 1; i < syms.size(); ++i) maybe_add(static_cast<int>(i) - 1, static_cast<int>(i));
  while (!agenda.empty()) {
    const Pair top = agenda.top();
    agenda.pop();
    Symbol &l = syms[top.left], &r = syms[top.right];
    if (l.piece.empty() || r.piece.empty() || l.piece.size() + r.piece.size() != top.size) continue;  // stale
    l.piece = std::string_view(l.piece.data(), top.size);
    l.next = r.next;
    if (r.next >= 0) syms[r.next].prev = top.left;
    r.piece = std::string_view();
    maybe_add(l.prev, top.left);
    maybe_add(top.left, l.next);
  }
  for (int i = syms.empty() ? -1 : 0; i >= 0; i = syms[i].next) resegment(syms[i].piece, rev_merge, out);
}

void SentencePieceTokenizer::Impl::resegment(std::string_view piece, const RevMerge& rev_merge, Result& out) const {
  const int32_t id = piece_to_id(piece);
  auto split = rev_merge.find(piece);
  if (type(id) != PieceType::kUnused || split == rev_merge.end()) {
    out.emplace_back(piece, id);
    return;
  }
  resegment(split->second.first, rev_merge, out);
  resegment(split->second.second, rev_merge, out);
}

// sentencepiece's unigram Viterbi path: the segmentation of the highest total piece score; an
// unknown character costs the lowest score minus 10; user-defined symbols always win.
void SentencePieceTokenizer::Impl::encode_unigram(std::string_view text, Result& out) const {
  struct Node {
    int32_t id = -1;
    float score = 0;
    int64_t starts_at = -1;
  };
  const auto size = static_cast<int64_t>(text.size());
  const float unk_score = min_score - kUnkPenalty;
  std::vector<Node> best(static_cast<size_t>(size) + 1);
  for (int64_t start = 0; start < size;) {
    const float till_here = best[static_cast<size_t>(start)].score;
    size_t one_char;
    detail::decode_utf8(text, static_cast<size_t>(start), one_char);
    const auto mblen = static_cast<int64_t>(std::min<size_t>(one_char, static_cast<size_t>(size - start)));
    bool has_single = false;
    for (int64_t end = start + 1; end <= size; ++end) {
      const std::string_view sub = text.substr(static_cast<size_t>(start), static_cast<size_t>(end - start));
      if (!prefixes.count(sub)) break;
      auto it = pieces.find(sub);
      if (it == pieces.end() || type(it->second) == PieceType::kUnused) continue;
      const auto length = end - start;
      const float score = type(it->second) == PieceType::kUserDefined
                              ? static_cast<float>(length) * max_score - 0.1f
                              : model.pieces[static_cast<size_t>(it->second)].score;
      Node& target = best[static_cast<size_t>(end)];
      if (target.starts_at == -1 || score + till_here > target.score) target = {it->second, score + till_here, start};
      if (length == mblen) has_single = true;
    }
    if (!has_single) {
      Node& target = best[static_cast<size_t>(start + mblen)];
      if (target.starts_at == -1 || unk_score + till_here > target.score) target = {unk, unk_score + till_here, start};
    }
    start += mblen;
  }
  const size_t first = out.size();
  for (int64_t end = size; end > 0;) {
    const Node& node = best[static_cast<size_t>(end)];
    out.emplace_back(text.substr(static_cast<size_t>(node.starts_at), static_cast<size_t>(end - node.starts_at)),
                     node.id);
    end = node.starts_at;
  }
  std::reverse(out.begin() + static_cast<int64_t>(first), out.end());
}

void SentencePieceTokenizer::tokenize_into(std::string_view text, std::vector<int32_t>& out) const {
  std::string replaced;
  text = detail::as_valid_utf8(text, replaced);
  const Impl& m = *impl_;
  const std::string normalized = m.normalizer->normalize(text);
  Result result;
  if (m.model.model_type == 2) {
    m.encode_bpe(normalized, result);
  } else {
    m.encode_unigram(normalized, result);
  }
  // Unknown pieces: their UTF-8 bytes with byte fallback, else one unknown id per run of them.
  bool prev_unk = false;
  for (const auto& [piece, id] : result) {
    const bool is_unk = id == m.unk;
    if (is_unk && m.model.byte_fallback) {
      for (char c : piece) out.push_back(m.byte_ids[static_cast<unsigned char>(c)]);
    } else if (!(is_unk && prev_unk)) {
      out.push_back(id);
    }
    prev_unk = is_unk;
  }
}

std::string SentencePieceTokenizer::detokenize(const std::vector<int32_t>& ids) const {
  const Impl& m = *impl_;
  std::string out, bytes;
  bool at_start = true;  // the dummy prefix's U+2581 is dropped from the first piece
  auto flush_bytes = [&] {
    // Byte pieces join into UTF-8; each byte that does not decode becomes U+FFFD.
    for (size_t i = 0, len; i < bytes.size(); i += len) {
      if (detail::decode_utf8(bytes, i, len) == detail::kInvalid) {
        out += "\xEF\xBF\xBD";
      } else {
        out.append(bytes, i, len);
      }
    }
    if (!bytes.empty()) at_start = false;
    bytes.clear();
  };
  for (int32_t id : ids) {
    TORCH_CHECK(id >= 0 && static_cast<size_t>(id) < m.model.pieces.size(), "[tokenizer] token id ", id,
                " outside the vocabulary [0, ", m.model.pieces.size(), ")");
    const auto& p = m.model.pieces[static_cast<size_t>(id)];
    if (p.type == PieceType::kByte) {
      bytes.push_back(static_cast<char>(std::stoi(p.piece.substr(3, 2), nullptr, 16)));
      continue;
    }
    flush_bytes();
    if (p.type == PieceType::kControl) continue;
    if (p.type == PieceType::kUnknown) {
      out += " \xE2\x81\x87 ";  // sentencepiece's unk_surface, " ⁇ "
      at_start = false;
      continue;
    }
    std::string_view piece = p.piece;
    if (at_start && !m.model.treat_whitespace_as_suffix && piece.compare(0, kSpace.size(), kSpace) == 0)
      piece.remove_prefix(kSpace.size());
    at_start = false;
    for (size_t i = 0; i < piece.size();) {
      if (piece.compare(i, kSpace.size(), kSpace) == 0) {
        out.push_back(' ');
        i += kSpace.size();
      } else {
        out.push_back(piece[i++]);
      }
    }
  }
  flush_bytes();
  return out;
}

int64_t SentencePieceTokenizer::vocab_size() const { return static_cast<int64_t>(impl_->model.pieces.size()); }
int32_t SentencePieceTokenizer::eod() const { return impl_->eos; }
int32_t SentencePieceTokenizer::bos() const { return impl_->bos; }

}  // namespace megatron::tokenizer
