#include "megatron/tokenizer/sentencepiece.h"

#include "bpe.h"
#include "sentencepiece_model.h"
#include "utf8.h"

#include <c10/util/Exception.h>

#include <algorithm>
#include <array>
#include <cfloat>
#include <cstring>
#include <queue>
#include <unordered_map>

namespace megatron::tokenizer {
namespace {

using detail::PieceType;
using Result = std::vector<std::pair<std::string_view, int32_t>>;  // (piece, id) in order
// BPE: an unused piece's last merge, to split it back into what it was made of.
using RevMerge = std::unordered_map<std::string_view, std::pair<std::string_view, std::string_view>>;

// FNV-1a, which extends a prefix's hash by one byte: the unigram lattice looks up every prefix.
constexpr uint64_t kFnvOffset = 0xCBF29CE484222325ULL;
inline uint64_t fnv_extend(uint64_t h, char c) {
  return (h ^ static_cast<unsigned char>(c)) * 0x100000001B3ULL;
}
inline uint64_t fnv(std::string_view s) {
  uint64_t h = kFnvOffset;
  for (char c : s) h = fnv_extend(h, c);
  return h;
}

// string_view -> id over keys that outlive it, by open addressing: std::unordered_map's hashing
// and node chasing were a third of BPE encoding time.
class PieceIndex {
 public:
  // The value slot of key, inserted with value `absent` when new; `inserted` says which.
  int32_t& find_or_insert(std::string_view key, uint64_t h, int32_t absent, bool& inserted) {
    if ((size_ + 1) * 2 > slots_.size()) grow();
    Slot& s = slots_[index_of(key, h)];
    inserted = !s.used;
    if (inserted) {
      s = Slot{h, key, absent, true};
      ++size_;
    }
    return s.value;
  }
  // h: fnv(key)
  const int32_t* find(std::string_view key, uint64_t h) const {
    if (slots_.empty()) return nullptr;
    const Slot& s = slots_[index_of(key, h)];
    return s.used ? &s.value : nullptr;
  }
  const int32_t* find(std::string_view key) const { return find(key, fnv(key)); }

 private:
  struct Slot {
    uint64_t hash = 0;
    std::string_view key;
    int32_t value = 0;
    bool used = false;
  };
  size_t index_of(std::string_view key, uint64_t h) const {
    for (size_t i = (h ^ (h >> 32)) & mask_;; i = (i + 1) & mask_) {
      const Slot& s = slots_[i];
      if (!s.used || (s.hash == h && s.key == key)) return i;
    }
  }
  void grow() {
    detail::grow_table(
        slots_, mask_, [](const Slot& s) { return s.used; }, [this](const Slot& s) { return index_of(s.key, s.hash); });
  }
  std::vector<Slot> slots_;
  size_t mask_ = 0, size_ = 0;
};

constexpr std::string_view kSpace = "\xE2\x96\x81";  // U+2581, SentencePiece's space
constexpr float kUnkPenalty = 10.0f;
// Real pieces are a few characters (the trainer's limit is 16 by default); a longer one in a
// corrupt or hostile file would make the unigram lattice slow.
constexpr size_t kMaxPieceBytes = 1024;  // unigram: an unknown character costs min score - 10

}  // namespace

struct SentencePieceTokenizer::Impl {
  std::string path;
  detail::SpModel model;
  std::unique_ptr<detail::SymbolMatcher> symbols;
  std::unique_ptr<detail::SpNormalizer> normalizer;
  // Keys view model.pieces' strings, which never move after loading.
  PieceIndex pieces;    // normal, user-defined and unused
  PieceIndex reserved;  // control, unknown and byte
  PieceIndex prefixes;  // unigram: every prefix of a normal piece -> the piece's id, or -1
  std::array<int32_t, 256> byte_ids{};
  std::unordered_map<int32_t, char> byte_value;  // each byte piece's byte
  int32_t unk = -1, bos = -1, eos = -1;
  float min_score = FLT_MAX, max_score = FLT_MIN;  // FLT_MIN, as sentencepiece starts it

  PieceType type(int32_t id) const { return model.pieces[static_cast<size_t>(id)].type; }
  int32_t piece_to_id(std::string_view w) const {
    if (const int32_t* r = reserved.find(w)) return *r;
    const int32_t* p = pieces.find(w);
    return p != nullptr ? *p : unk;
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
    const bool normal =
        p.type == PieceType::kNormal || p.type == PieceType::kUserDefined || p.type == PieceType::kUnused;
    bool inserted = false;
    TORCH_CHECK(p.piece.size() <= kMaxPieceBytes, "[tokenizer] ", model_file, ": piece ", i, " is ", p.piece.size(),
                " bytes long; pieces over ", kMaxPieceBytes, " bytes are refused");
    if (!p.piece.empty()) (normal ? m.pieces : m.reserved).find_or_insert(p.piece, fnv(p.piece), id, inserted);
    TORCH_CHECK(inserted, "[tokenizer] ", model_file, ": piece ", i, " ('", p.piece, "') is empty or defined twice");
    if (p.type == PieceType::kUserDefined) user_defined.push_back(p.piece);
    if (p.type == PieceType::kUnknown) {
      TORCH_CHECK(m.unk < 0, "[tokenizer] ", model_file, ": pieces ", m.unk, " and ", i, " are both the unknown piece");
      m.unk = id;
    }
    if (p.type == PieceType::kNormal) {
      m.min_score = std::min(m.min_score, p.score);
      m.max_score = std::max(m.max_score, p.score);
    }
    if (p.type == PieceType::kByte) {
      // Exactly <0xXX> with upper-case hex digits, as sentencepiece writes and accepts them.
      auto hex = [](char c) { return c >= '0' && c <= '9' ? c - '0' : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1; };
      const bool ok = p.piece.size() == 6 && p.piece.compare(0, 3, "<0x") == 0 && p.piece[5] == '>' &&
                      hex(p.piece[3]) >= 0 && hex(p.piece[4]) >= 0;
      TORCH_CHECK(ok, "[tokenizer] ", model_file, ": byte piece ", i, " is '", p.piece, "', expected <0xXX>");
      const int value = hex(p.piece[3]) * 16 + hex(p.piece[4]);
      TORCH_CHECK(m.byte_ids[static_cast<size_t>(value)] < 0, "[tokenizer] ", model_file, ": byte piece ", i, " ('",
                  p.piece, "') is defined twice");
      m.byte_ids[static_cast<size_t>(value)] = id;
      m.byte_value[id] = static_cast<char>(value);
    }
    if (normal && sp.model_type == 1) {  // unigram
      uint64_t h = kFnvOffset;
      for (size_t k = 1; k <= p.piece.size(); ++k) {
        h = fnv_extend(h, p.piece[k - 1]);
        int32_t& value = m.prefixes.find_or_insert(std::string_view(p.piece).substr(0, k), h, -1, inserted);
        if (k == p.piece.size()) value = id;
      }
    }
  }
  TORCH_CHECK(m.unk >= 0, "[tokenizer] ", model_file, ": the model has no unknown piece (<unk>)");
  TORCH_CHECK(!sp.byte_fallback || *std::min_element(m.byte_ids.begin(), m.byte_ids.end()) >= 0, "[tokenizer] ",
              model_file, ": byte_fallback is set but the 256 <0xXX> pieces are not all there");
  // As sentencepiece's bos_id() and eos_id(): the trainer's bos/eos pieces when they are control pieces.
  for (auto [piece, id] : {std::pair{&sp.bos_piece, &m.bos}, {&sp.eos_piece, &m.eos}}) {
    const int32_t found = m.piece_to_id(*piece);
    *id = found >= 0 && m.type(found) == PieceType::kControl ? found : -1;
  }
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
  // A candidate merge as (score, then leftmost first) packed into one key for a max-heap, with
  // the merged size; its right symbol is the left one's next whenever it is not stale.
  using Pair = std::pair<uint64_t, uint32_t>;
  auto key = [](float score, int left) {
    uint32_t bits;
    std::memcpy(&bits, &score, 4);
    bits = (bits & 0x80000000u) ? ~bits : (bits | 0x80000000u);  // orders as the floats do
    return static_cast<uint64_t>(bits) << 32 | (0xFFFFFFFFu - static_cast<uint32_t>(left));
  };
  std::priority_queue<Pair> agenda;
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
    const int32_t* id = pieces.find(joined);
    if (id == nullptr) return;
    agenda.emplace(key(model.pieces[static_cast<size_t>(*id)].score, left), static_cast<uint32_t>(joined.size()));
    // An unused piece still merges, and is then split back into the two it was made of.
    if (type(*id) == PieceType::kUnused) rev_merge[joined] = {syms[left].piece, syms[right].piece};
  };
  for (size_t i = 1; i < syms.size(); ++i) maybe_add(static_cast<int>(i) - 1, static_cast<int>(i));
  while (!agenda.empty()) {
    const auto [top, size] = agenda.top();
    agenda.pop();
    const auto left = static_cast<int>(0xFFFFFFFFu - static_cast<uint32_t>(top));
    Symbol& l = syms[left];
    if (l.piece.empty() || l.next < 0) continue;  // stale
    Symbol& r = syms[l.next];
    if (l.piece.size() + r.piece.size() != size) continue;  // stale
    l.piece = std::string_view(l.piece.data(), size);
    l.next = r.next;
    if (r.next >= 0) syms[r.next].prev = left;
    r.piece = std::string_view();
    maybe_add(l.prev, left);
    maybe_add(left, l.next);
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
    uint64_t h = kFnvOffset;
    for (int64_t end = start + 1; end <= size; ++end) {
      const std::string_view sub = text.substr(static_cast<size_t>(start), static_cast<size_t>(end - start));
      h = fnv_extend(h, sub.back());
      const int32_t* found = prefixes.find(sub, h);
      if (found == nullptr) break;
      const int32_t id = *found;
      if (id < 0 || type(id) == PieceType::kUnused) continue;
      const auto length = end - start;
      // In float: the sentencepiece package's near-ties come out as float sums do (test_sentencepiece's
      // long runs of one letter tell the two apart).
      const float score = type(id) == PieceType::kUserDefined ? static_cast<float>(length) * max_score - 0.1f
                                                              : model.pieces[static_cast<size_t>(id)].score;
      Node& target = best[static_cast<size_t>(end)];
      if (target.starts_at == -1 || score + till_here > target.score) target = {id, score + till_here, start};
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
  // sentencepiece's Decode: the dummy prefix's U+2581 is dropped from the first piece that
  // decodes to something (with extra-whitespace removal, from every piece until one does).
  const bool strip = m.model.add_dummy_prefix || m.model.remove_extra_whitespaces;
  bool at_start = true;
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
      bytes.push_back(m.byte_value.at(id));
      continue;
    }
    flush_bytes();
    if (p.type == PieceType::kControl) continue;
    if (p.type == PieceType::kUnknown) {
      out += m.model.unk_surface;
      at_start = at_start && m.model.unk_surface.empty();
      continue;
    }
    std::string_view piece = p.piece;
    bool stripped = false;
    if (at_start && strip && piece.compare(0, kSpace.size(), kSpace) == 0) {
      piece.remove_prefix(kSpace.size());
      stripped = !m.model.remove_extra_whitespaces;
    }
    if (stripped || !piece.empty()) at_start = false;
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

int64_t SentencePieceTokenizer::vocab_size() const {
  return static_cast<int64_t>(impl_->model.pieces.size());
}
int32_t SentencePieceTokenizer::eod() const {
  return impl_->eos;
}
int32_t SentencePieceTokenizer::bos() const {
  return impl_->bos;
}

}  // namespace megatron::tokenizer
