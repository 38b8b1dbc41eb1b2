#include "megatron/tokenizer/gpt2_bpe.h"

#include "unicode_tables.h"

#include <c10/util/Exception.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <queue>
#include <sstream>

namespace megatron::tokenizer {
namespace {

using detail::is_letter;
using detail::is_number;
using detail::is_space;

constexpr uint32_t kInvalid = 0xFFFFFFFF;  // an undecodable byte: the "other" class

std::string read_file(const std::string& path, const char* what) {
  std::ifstream in(path, std::ios::binary);
  TORCH_CHECK(in, "[tokenizer] ", path, ": cannot open the ", what);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void append_utf8(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

// Decodes the code point at s[i], setting len; invalid or overlong sequences, surrogates and
// values past U+10FFFF give kInvalid with len 1.
uint32_t decode_utf8(std::string_view s, size_t i, size_t& len) {
  const auto b0 = static_cast<unsigned char>(s[i]);
  len = 1;
  if (b0 < 0x80) return b0;
  int n;
  uint32_t cp, min;
  if ((b0 & 0xE0) == 0xC0) {
    n = 1;
    cp = b0 & 0x1F;
    min = 0x80;
  } else if ((b0 & 0xF0) == 0xE0) {
    n = 2;
    cp = b0 & 0x0F;
    min = 0x800;
  } else if ((b0 & 0xF8) == 0xF0) {
    n = 3;
    cp = b0 & 0x07;
    min = 0x10000;
  } else
    return kInvalid;
  for (int k = 1; k <= n; ++k) {
    if (i + k >= s.size()) return kInvalid;
    const auto b = static_cast<unsigned char>(s[i + k]);
    if ((b & 0xC0) != 0x80) return kInvalid;
    cp = (cp << 6) | (b & 0x3F);
  }
  if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return kInvalid;
  len = static_cast<size_t>(n) + 1;
  return cp;
}

enum Class : uint8_t { kLetter, kNumber, kSpace, kOther };

struct AsciiClasses {
  Class table[128];
  AsciiClasses() {
    for (uint32_t c = 0; c < 128; ++c) {
      table[c] = is_space(c) ? kSpace : is_letter(c) ? kLetter : is_number(c) ? kNumber : kOther;
    }
  }
};
const AsciiClasses kAscii;

inline Class classify(uint32_t cp) {
  if (cp < 128) return kAscii.table[cp];
  if (cp == kInvalid) return kOther;
  if (is_space(cp)) return kSpace;
  if (is_letter(cp)) return kLetter;
  if (is_number(cp)) return kNumber;
  return kOther;
}

// The class and byte length of the character at text[i].
inline Class class_at(std::string_view text, size_t i, size_t& len) {
  const auto b = static_cast<unsigned char>(text[i]);
  if (b < 0x80) {
    len = 1;
    return kAscii.table[b];
  }
  return classify(decode_utf8(text, i, len));
}

// Calls emit(begin, end) for each GPT-2 pre-token of text, left to right.
template <typename Emit>
void for_each_pretoken(std::string_view text, Emit&& emit) {
  const size_t n = text.size();
  size_t i = 0;
  while (i < n) {
    const char c = text[i];
    // 's 't 're 've 'm 'll 'd (ASCII apostrophe, lower case, as the pattern is written)
    if (c == '\'' && i + 1 < n) {
      const char a = text[i + 1];
      if (a == 's' || a == 't' || a == 'm' || a == 'd') {
        emit(i, i + 2);
        i += 2;
        continue;
      }
      if (i + 2 < n) {
        const char b = text[i + 2];
        if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) {
          emit(i, i + 3);
          i += 3;
          continue;
        }
      }
    }
    // ` ?\p{L}+`, ` ?\p{N}+`, ` ?[^\s\p{L}\p{N}]+`: an optional ASCII space then a class run.
    const size_t j = (c == ' ' && i + 1 < n) ? i + 1 : i;
    size_t len;
    const Class cls = class_at(text, j, len);
    if (cls != kSpace) {
      size_t k = j + len;
      while (k < n && class_at(text, k, len) == cls) k += len;
      emit(i, k);
      i = k;
      continue;
    }
    // Whitespace: `\s+(?!\S)` leaves the last space of a run for the next word; `\s+` takes a
    // lone one (or the run at the end of the text).
    size_t k = i, last = i, count = 0;
    while (k < n && class_at(text, k, len) == kSpace) {
      last = k;
      k += len;
      ++count;
    }
    const size_t end = (k < n && count > 1) ? last : k;
    emit(i, end);
    i = end;
  }
}

inline uint64_t hash_bytes(std::string_view s) {
  uint64_t h = 0x9E3779B97F4A7C15ULL ^ s.size();
  size_t i = 0;
  for (; i + 8 <= s.size(); i += 8) {
    uint64_t v;
    std::memcpy(&v, s.data() + i, 8);
    h = (h ^ v) * 0xBF58476D1CE4E5B9ULL;
    h ^= h >> 31;
  }
  uint64_t tail = 0;
  std::memcpy(&tail, s.data() + i, s.size() - i);
  h = (h ^ tail) * 0x94D049BB133111EBULL;
  return h ^ (h >> 29);
}

// A per-thread word -> ids cache: open addressing over flat key and id arenas (no per-entry
// allocation), emptied when full and reset when the thread switches tokenizers.
class WordCache {
 public:
  uint64_t owner = 0;

  const int32_t* find(std::string_view word, uint64_t h, size_t& n) const {
    if (slots_.empty()) return nullptr;
    for (size_t i = h & mask_;; i = (i + 1) & mask_) {
      const Slot& s = slots_[i];
      if (s.key_len == 0) return nullptr;
      if (s.hash == h && s.key_len == word.size() &&
          std::memcmp(keys_.data() + s.key_off, word.data(), word.size()) == 0) {
        n = s.val_len;
        return ids_.data() + s.val_off;
      }
    }
  }

  void insert(std::string_view word, uint64_t h, const int32_t* ids, size_t n) {
    if (word.empty() || word.size() > 0xFFFF || n > 0xFFFF) return;
    if (slots_.empty() || (count_ + 1) * 2 > slots_.size()) {
      if (slots_.size() >= kMaxSlots) {
        clear();
      } else {
        grow();
      }
    }
    for (size_t i = h & mask_;; i = (i + 1) & mask_) {
      Slot& s = slots_[i];
      if (s.key_len != 0) continue;
      s.hash = h;
      s.key_off = static_cast<uint32_t>(keys_.size());
      s.key_len = static_cast<uint16_t>(word.size());
      s.val_off = static_cast<uint32_t>(ids_.size());
      s.val_len = static_cast<uint16_t>(n);
      keys_.append(word.data(), word.size());
      ids_.insert(ids_.end(), ids, ids + n);
      ++count_;
      return;
    }
  }

  void clear() {
    std::fill(slots_.begin(), slots_.end(), Slot{});
    keys_.clear();
    ids_.clear();
    count_ = 0;
  }

 private:
  struct Slot {
    uint64_t hash = 0;
    uint32_t key_off = 0, val_off = 0;
    uint16_t key_len = 0, val_len = 0;
  };
  static constexpr size_t kMaxSlots = 1 << 20;

  void grow() {
    std::vector<Slot> old;
    old.swap(slots_);
    slots_.assign(old.empty() ? 1 << 12 : old.size() * 2, Slot{});
    mask_ = slots_.size() - 1;
    for (const Slot& s : old) {
      if (s.key_len == 0) continue;
      for (size_t i = s.hash & mask_;; i = (i + 1) & mask_) {
        if (slots_[i].key_len == 0) {
          slots_[i] = s;
          break;
        }
      }
    }
  }

  std::vector<Slot> slots_;
  size_t mask_ = 0, count_ = 0;
  std::string keys_;
  std::vector<int32_t> ids_;
};

std::atomic<uint64_t> next_instance_id{1};

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
  for_each_pretoken(text, [&](size_t b, size_t e) { out.push_back(text.substr(b, e - b)); });
  return out;
}

GPT2BPETokenizer::GPT2BPETokenizer(const std::string& vocab_file, const std::string& merges_file)
    : instance_id_(next_instance_id++) {
  nlohmann::json vocab;
  try {
    vocab = nlohmann::json::parse(read_file(vocab_file, "vocabulary (--vocab-file)"));
  } catch (const nlohmann::json::exception& e) {  // parse errors, and numbers out of range
    TORCH_CHECK(false, "[tokenizer] ", vocab_file, ": not valid JSON: ", e.what());
  }
  TORCH_CHECK(vocab.is_object() && !vocab.empty(), "[tokenizer] ", vocab_file,
              ": expected a JSON object of token -> id");
  // Token strings spell bytes through bytes_to_unicode; invert that to get each token's bytes.
  std::unordered_map<uint32_t, uint8_t> unicode_to_byte;
  for (int b = 0; b < 256; ++b) unicode_to_byte[bytes_to_unicode()[b]] = static_cast<uint8_t>(b);
  int64_t max_id = -1;
  for (const auto& [token, id] : vocab.items()) {
    TORCH_CHECK(id.is_number_unsigned() && id.get<uint64_t>() <= static_cast<uint64_t>(INT32_MAX), "[tokenizer] ",
                vocab_file, ": token '", token, "' expected a non-negative integer id");
    max_id = std::max<int64_t>(max_id, id.get<int64_t>());
  }
  id_to_bytes_.assign(static_cast<size_t>(max_id + 1), std::string());
  for (const auto& [token, id] : vocab.items()) {
    const auto tid = id.get<int32_t>();
    vocab_[token] = tid;
    std::string bytes;
    for (size_t i = 0; i < token.size();) {
      size_t len;
      const uint32_t cp = decode_utf8(token, i, len);
      auto it = unicode_to_byte.find(cp);
      if (it == unicode_to_byte.end()) {
        bytes = token;  // a special token such as <|endoftext|> spelled literally
        break;
      }
      bytes.push_back(static_cast<char>(it->second));
      i += len;
    }
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

  const std::string merges = read_file(merges_file, "merges (--merge-file)");
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
    const uint64_t key = static_cast<uint64_t>(l->second) << 32 | static_cast<uint32_t>(r->second);
    merges_.emplace(key, std::make_pair(rank++, m->second));  // the first rank wins
  }
}

int32_t GPT2BPETokenizer::token_to_id(const std::string& token) const {
  auto it = vocab_.find(token);
  return it == vocab_.end() ? -1 : it->second;
}

void GPT2BPETokenizer::bpe(std::string_view word, std::vector<int32_t>& out) const {
  const size_t n = word.size();
  std::vector<int32_t> ids(n);
  for (size_t i = 0; i < n; ++i) {
    const auto b = static_cast<unsigned char>(word[i]);
    ids[i] = byte_ids_[b];
    TORCH_CHECK(ids[i] >= 0, "[tokenizer] byte 0x", std::hex, static_cast<int>(b),
                " has no token in the vocabulary (a byte-level vocabulary lists all 256)");
  }
  auto rank_of = [&](int32_t a, int32_t b) -> const std::pair<int32_t, int32_t>* {
    auto it = merges_.find(static_cast<uint64_t>(a) << 32 | static_cast<uint32_t>(b));
    return it == merges_.end() ? nullptr : &it->second;
  };
  if (n <= 64) {
    // Short words: rescan for the lowest-ranked adjacent pair (leftmost on ties) and merge it.
    while (ids.size() > 1) {
      int32_t best_rank = INT32_MAX, best_id = -1;
      size_t best = 0;
      for (size_t i = 0; i + 1 < ids.size(); ++i) {
        const auto* m = rank_of(ids[i], ids[i + 1]);
        if (m != nullptr && m->first < best_rank) {
          best_rank = m->first;
          best_id = m->second;
          best = i;
        }
      }
      if (best_id < 0) break;
      ids[best] = best_id;
      ids.erase(ids.begin() + static_cast<int64_t>(best) + 1);
    }
    out.insert(out.end(), ids.begin(), ids.end());
    return;
  }
  // Long words: the same order through a heap over a linked list of symbols.
  std::vector<int64_t> prev(n), next(n);
  std::vector<bool> alive(n, true);
  for (size_t i = 0; i < n; ++i) {
    prev[i] = static_cast<int64_t>(i) - 1;
    next[i] = i + 1 < n ? static_cast<int64_t>(i) + 1 : -1;
  }
  struct Candidate {
    int32_t rank;
    int64_t pos;
    int32_t left, right;  // the ids the candidate was made from (stale if they changed)
    bool operator>(const Candidate& o) const { return rank != o.rank ? rank > o.rank : pos > o.pos; }
  };
  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<Candidate>> heap;
  auto push = [&](int64_t i) {
    if (i < 0 || next[i] < 0) return;
    const auto* m = rank_of(ids[i], ids[next[i]]);
    if (m != nullptr) heap.push({m->first, i, ids[i], ids[next[i]]});
  };
  for (size_t i = 0; i + 1 < n; ++i) push(static_cast<int64_t>(i));
  while (!heap.empty()) {
    const Candidate c = heap.top();
    heap.pop();
    const int64_t i = c.pos;
    if (!alive[i] || next[i] < 0 || ids[i] != c.left || ids[next[i]] != c.right) continue;
    const int64_t j = next[i];
    ids[i] = rank_of(c.left, c.right)->second;
    alive[j] = false;
    next[i] = next[j];
    if (next[j] >= 0) prev[next[j]] = i;
    push(prev[i]);
    push(i);
  }
  for (int64_t i = 0; i >= 0; i = next[i]) out.push_back(ids[i]);
}

void GPT2BPETokenizer::tokenize_into(std::string_view text, std::vector<int32_t>& out) const {
  thread_local WordCache cache;
  if (cache.owner != instance_id_) {
    cache.clear();
    cache.owner = instance_id_;
  }
  for_each_pretoken(text, [&](size_t b, size_t e) {
    const std::string_view word = text.substr(b, e - b);
    if (word.size() == 1) {  // a single byte is its own token
      bpe(word, out);
      return;
    }
    const uint64_t h = hash_bytes(word);
    size_t n = 0;
    if (const int32_t* ids = cache.find(word, h, n)) {
      out.insert(out.end(), ids, ids + n);
      return;
    }
    const size_t start = out.size();
    bpe(word, out);
    cache.insert(word, h, out.data() + start, out.size() - start);
  });
}

std::vector<int32_t> GPT2BPETokenizer::tokenize(std::string_view text) const {
  std::vector<int32_t> out;
  out.reserve(text.size() / 3 + 8);
  tokenize_into(text, out);
  return out;
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
