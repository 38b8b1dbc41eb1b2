// The .model file is read by hand: Debian's libsentencepiece defines FLAGS_minloglevel as
// LibTorch's libc10 does and overwrites c10's flags when loaded (serialization_test checks that
// they stay intact), and libprotobuf would be a second copy beside LibTorch's. The wire format
// of the dozen fields read here is small: varints, 32-bit floats and length-prefixed bytes.
#include "sentencepiece_model.h"

#include "bpe.h"
#include "utf8.h"

#include <c10/util/Exception.h>

#include <algorithm>
#include <cstring>

namespace megatron::tokenizer::detail {
namespace {

// One protocol buffer message: calls field(number, wire_type, varint, bytes) for each field.
class WireReader {
 public:
  WireReader(std::string_view data, const std::string& where) : data_(data), where_(where) {}

  template <typename Field>
  void for_each(Field&& field) {
    while (at_ < data_.size()) {
      const uint64_t key = varint();
      const auto number = static_cast<int>(key >> 3);
      const auto wire = static_cast<int>(key & 7);
      uint64_t value = 0;
      std::string_view bytes;
      if (wire == 0) {
        value = varint();
      } else if (wire == 1 || wire == 5) {  // fixed64 / fixed32 (a float score)
        const size_t n = wire == 1 ? 8 : 4;
        need(n);
        std::memcpy(&value, data_.data() + at_, n);  // little-endian on the machines we build for
        at_ += n;
      } else if (wire == 2) {
        const uint64_t n = varint();
        need(n);
        bytes = data_.substr(at_, n);
        at_ += n;
      } else {
        TORCH_CHECK(false, "[tokenizer] ", where_, ": not a SentencePiece model (protocol buffer wire type ", wire,
                    " at byte ", at_, ")");
      }
      field(number, wire, value, bytes);
    }
  }

 private:
  uint64_t varint() {
    uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      need(1);
      const auto b = static_cast<uint8_t>(data_[at_++]);
      v |= static_cast<uint64_t>(b & 0x7F) << shift;
      if ((b & 0x80) == 0) return v;
    }
    TORCH_CHECK(false, "[tokenizer] ", where_, ": not a SentencePiece model (a varint longer than 10 bytes)");
  }
  void need(uint64_t n) {
    TORCH_CHECK(n <= data_.size() - at_, "[tokenizer] ", where_, ": truncated or not a SentencePiece model (", n,
                " bytes wanted at byte ", at_, " of ", data_.size(), ")");
  }

  std::string_view data_;
  const std::string& where_;
  size_t at_ = 0;
};

float as_float(uint64_t bits) {
  float f;
  const auto b = static_cast<uint32_t>(bits);
  std::memcpy(&f, &b, 4);
  return f;
}

}  // namespace

SpModel read_sp_model(const std::string& path) {
  const std::string data = read_whole_file(path, "SentencePiece model (--tokenizer-model)");
  SpModel m;
  WireReader(data, path).for_each([&](int number, int wire, uint64_t value, std::string_view bytes) {
    if (number == 1 && wire == 2) {  // pieces
      SpModel::Piece p;
      WireReader(bytes, path).for_each([&](int n, int w, uint64_t v, std::string_view b) {
        if (n == 1 && w == 2) p.piece = std::string(b);
        if (n == 2 && w == 5) p.score = as_float(v);
        if (n == 3 && w == 0) p.type = static_cast<PieceType>(v);
      });
      const auto type = static_cast<int>(p.type);
      TORCH_CHECK(type >= 1 && type <= 6, "[tokenizer] ", path, ": piece ", m.pieces.size(), " has type ", type,
                  ", expected 1..6");
      m.pieces.push_back(std::move(p));
    } else if (number == 2 && wire == 2) {  // trainer_spec
      WireReader(bytes, path).for_each([&](int n, int w, uint64_t v, std::string_view b) {
        if (w == 2) {
          if (n == 44) m.unk_surface = std::string(b);
          if (n == 45) m.unk_piece = std::string(b);
          if (n == 46) m.bos_piece = std::string(b);
          if (n == 47) m.eos_piece = std::string(b);
        }
        if (w != 0) return;
        if (n == 3) m.model_type = static_cast<int>(v);
        if (n == 24) m.treat_whitespace_as_suffix = v != 0;
        if (n == 35) m.byte_fallback = v != 0;
      });
    } else if (number == 3 && wire == 2) {  // normalizer_spec
      WireReader(bytes, path).for_each([&](int n, int w, uint64_t v, std::string_view b) {
        if (n == 1 && w == 2) m.normalizer_name = std::string(b);
        if (n == 2 && w == 2) m.precompiled_charsmap = std::string(b);
        if (n == 3 && w == 0) m.add_dummy_prefix = v != 0;
        if (n == 4 && w == 0) m.remove_extra_whitespaces = v != 0;
        if (n == 5 && w == 0) m.escape_whitespaces = v != 0;
      });
    }
  });
  TORCH_CHECK(!m.pieces.empty() && m.pieces.size() < (1u << 30), "[tokenizer] ", path,
              ": not a SentencePiece model (expected pieces, found ", m.pieces.size(), ")");
  return m;
}

SymbolMatcher::SymbolMatcher(const std::vector<std::string>& symbols) : by_first_byte_(256) {
  for (const std::string& s : symbols) {
    if (!s.empty()) by_first_byte_[static_cast<unsigned char>(s[0])].push_back(s);
  }
  for (auto& list : by_first_byte_)
    std::stable_sort(list.begin(), list.end(), [](const auto& a, const auto& b) { return a.size() > b.size(); });
}

size_t SymbolMatcher::match(std::string_view text, bool& found) const {
  found = false;
  if (text.empty()) return 0;
  for (const std::string& s : by_first_byte_[static_cast<unsigned char>(text[0])]) {
    if (text.compare(0, s.size(), s) == 0) {
      found = true;
      return s.size();
    }
  }
  size_t len;
  decode_utf8(text, 0, len);
  return len;
}

SpNormalizer::SpNormalizer(const SpModel& model, const SymbolMatcher& symbols, const std::string& where)
    : model_(model), symbols_(symbols) {
  // precompiled_charsmap: [uint32 trie bytes][Darts-clone double array][normalized strings].
  const std::string& map = model.precompiled_charsmap;
  if (map.empty()) return;
  uint32_t trie_bytes = 0;
  TORCH_CHECK(map.size() >= 4, "[tokenizer] ", where, ": precompiled_charsmap is truncated");
  std::memcpy(&trie_bytes, map.data(), 4);
  TORCH_CHECK(trie_bytes % 4 == 0 && trie_bytes >= 4 && trie_bytes <= map.size() - 4, "[tokenizer] ", where,
              ": precompiled_charsmap's trie of ", trie_bytes, " bytes does not fit its ", map.size(), " bytes");
  trie_.resize(trie_bytes / 4);
  std::memcpy(trie_.data(), map.data() + 4, trie_bytes);
  normalized_ = map.substr(4 + trie_bytes);
  TORCH_CHECK(!normalized_.empty() && normalized_.back() == '\0', "[tokenizer] ", where,
              ": precompiled_charsmap's strings do not end in NUL");
}

std::pair<std::string_view, size_t> SpNormalizer::normalize_prefix(std::string_view input) const {
  bool found = false;
  const size_t symbol = symbols_.match(input, found);
  if (found) return {input.substr(0, symbol), symbol};
  // The longest rule of the character map that the input starts with (Darts-clone's
  // commonPrefixSearch, bounds-checked: the array comes from the file).
  size_t longest = 0;
  uint32_t value = 0;
  if (!trie_.empty()) {
    auto offset = [](uint32_t unit) { return (unit >> 10) << ((unit & (1u << 9)) >> 6); };
    size_t node = offset(trie_[0]);
    for (size_t i = 0; i < input.size(); ++i) {
      const auto c = static_cast<unsigned char>(input[i]);
      node ^= c;
      if (node >= trie_.size()) break;
      const uint32_t unit = trie_[node];
      if ((unit & ((1u << 31) | 0xFF)) != c) break;  // label
      node ^= offset(unit);
      if (node >= trie_.size()) break;
      if ((unit >> 8) & 1) {  // has a leaf: a rule ends here
        longest = i + 1;
        value = trie_[node] & ((1u << 31) - 1);
      }
    }
  }
  if (longest > 0) {
    TORCH_CHECK(value < normalized_.size(), "[tokenizer] precompiled_charsmap: rule value ", value,
                " is outside its strings");
    return {std::string_view(normalized_.data() + value), longest};
  }
  size_t len;
  if (decode_utf8(input, 0, len) == kInvalid) return {"\xEF\xBF\xBD", 1};
  return {input.substr(0, len), len};
}

std::string SpNormalizer::normalize(std::string_view input) const {
  static constexpr std::string_view kSpace = "\xE2\x96\x81";  // U+2581
  const SpModel& m = model_;
  std::string out;
  if (m.remove_extra_whitespaces) {  // leading spaces
    while (!input.empty()) {
      const auto [piece, used] = normalize_prefix(input);
      if (piece != " ") break;
      input.remove_prefix(used);
    }
  }
  if (input.empty()) return out;
  auto add_space = [&] { out += m.escape_whitespaces ? kSpace : std::string_view(" "); };
  if (!m.treat_whitespace_as_suffix && m.add_dummy_prefix) add_space();
  bool prev_space = m.remove_extra_whitespaces;
  while (!input.empty()) {
    auto [piece, used] = normalize_prefix(input);
    while (prev_space && !piece.empty() && piece.front() == ' ') piece.remove_prefix(1);
    if (!piece.empty()) {
      for (char c : piece) {
        if (m.escape_whitespaces && c == ' ') {
          out += kSpace;
        } else {
          out.push_back(c);
        }
      }
      prev_space = piece.back() == ' ';
    }
    input.remove_prefix(used);
    if (!m.remove_extra_whitespaces) prev_space = false;
  }
  if (m.remove_extra_whitespaces) {  // trailing spaces
    const std::string_view space = m.escape_whitespaces ? kSpace : std::string_view(" ");
    while (out.size() >= space.size() && out.compare(out.size() - space.size(), space.size(), space) == 0)
      out.resize(out.size() - space.size());
  }
  if (m.treat_whitespace_as_suffix && m.add_dummy_prefix) add_space();
  return out;
}

}  // namespace megatron::tokenizer::detail
