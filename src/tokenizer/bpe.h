// Byte-pair merging shared by the BPE tokenizers: the merge table, the merge loop, and a
// per-thread cache of each word's ids.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace megatron::tokenizer::detail {

// Doubles an open-addressing table (1024 slots at first) and puts each used slot back through
// place(slot), which finds its new index.
template <typename Slot, typename Used, typename Place>
void grow_table(std::vector<Slot>& slots, size_t& mask, Used&& used, Place&& place) {
  std::vector<Slot> old;
  old.swap(slots);
  slots.assign(old.empty() ? 1024 : old.size() * 2, Slot{});
  mask = slots.size() - 1;
  for (const Slot& s : old)
    if (used(s)) slots[place(s)] = s;
}

// (left id, right id) -> (rank, merged id); the lowest rank merges first. An open-addressing
// table: std::unordered_map's modulo and node chasing were most of a long word's merge time.
class MergeTable {
 public:
  // A pair given twice keeps its last rank, as a Python dict or Rust HashMap of the merges does.
  void add(int32_t left, int32_t right, int32_t rank, int32_t merged) {
    if ((size_ + 1) * 2 > slots_.size()) grow();
    Slot& s = slots_[index_of(key(left, right))];
    if (s.key == 0) ++size_;
    s = Slot{key(left, right), {rank, merged}};
  }
  const std::pair<int32_t, int32_t>* find(int32_t left, int32_t right) const {
    if (slots_.empty()) return nullptr;
    const Slot& s = slots_[index_of(key(left, right))];
    return s.key == 0 ? nullptr : &s.value;
  }
  size_t size() const { return size_; }

 private:
  struct Slot {
    uint64_t key = 0;  // 0: empty (a real key has its top bit set; ids are non-negative int32)
    std::pair<int32_t, int32_t> value;
  };
  static uint64_t key(int32_t a, int32_t b) {
    return (uint64_t{1} << 63) | static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32 | static_cast<uint32_t>(b);
  }
  // The slot holding k, or the empty slot where it would go.
  size_t index_of(uint64_t k) const {
    const uint64_t h = k * 0x9E3779B97F4A7C15ULL;
    for (size_t i = (h ^ (h >> 29)) & mask_;; i = (i + 1) & mask_) {
      if (slots_[i].key == k || slots_[i].key == 0) return i;
    }
  }
  void grow() {
    grow_table(
        slots_, mask_, [](const Slot& s) { return s.key != 0; }, [this](const Slot& s) { return index_of(s.key); });
  }
  std::vector<Slot> slots_;
  size_t mask_ = 0, size_ = 0;
};

// Merges ids in place: the lowest-ranked adjacent pair first, the leftmost on ties, until no
// pair has a merge (GPT-2's and Hugging Face tokenizers' order).
void bpe_merge(std::vector<int32_t>& ids, const MergeTable& merges);

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
    // Long words fill the arenas before the slots: bound their bytes too (and keep offsets in 32 bits).
    if (keys_.size() + word.size() > kMaxArenaBytes || (ids_.size() + n) * sizeof(int32_t) > kMaxArenaBytes) clear();
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
  static constexpr size_t kMaxArenaBytes = size_t{64} << 20;

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

// The whole file (input_files.h's bounds), or one error naming it and what it was meant to hold.
std::string read_whole_file(const std::string& path, const char* what);
// "[tokenizer] PATH (what)": how errors about a tokenizer file begin.
std::string tokenizer_file(const std::string& path, const char* what);

// A byte-level token's raw bytes (GPT-2's bytes_to_unicode undone), or false when one of its
// characters maps to no byte (a special token spelled literally).
bool byte_level_bytes(std::string_view token, std::string& bytes);

// A fresh id for each tokenizer object: it keys the per-thread word caches.
uint64_t new_tokenizer_instance_id();

// This thread's cache, emptied when it last served another tokenizer.
WordCache& word_cache(uint64_t instance_id);

// Appends word's ids: from this thread's cache, or from encode(word, out), then remembered.
template <typename Encode>
void cached_encode(uint64_t instance_id, std::string_view word, std::vector<int32_t>& out, Encode&& encode) {
  WordCache& cache = word_cache(instance_id);
  const uint64_t h = hash_bytes(word);
  size_t n = 0;
  if (const int32_t* ids = cache.find(word, h, n)) {
    out.insert(out.end(), ids, ids + n);
    return;
  }
  const size_t start = out.size();
  encode(word, out);
  cache.insert(word, h, out.data() + start, out.size() - start);
}

}  // namespace megatron::tokenizer::detail
