#include "bpe.h"

#include "input_files.h"
#include "megatron/tokenizer/gpt2_bpe.h"
#include "utf8.h"

#include <c10/util/Exception.h>

#include <algorithm>
#include <atomic>
#include <climits>
#include <functional>
#include <unordered_map>

namespace megatron::tokenizer::detail {

void bpe_merge(std::vector<int32_t>& ids, const MergeTable& merges) {
  // Positions are kept in 32 bits: a word of 4 GiB would need a line of it.
  const size_t n = ids.size();
  auto rank_of = [&](int32_t a, int32_t b) { return merges.find(a, b); };
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
    return;
  }
  // Long words: the same order through a min-heap of (rank << 32 | position) over a linked list
  // of symbols. An entry is stale once its pair changed; a pair with the entry's rank at its
  // position forms the same token, so merging it then is right.
  std::vector<int64_t> prev(n), next(n);
  for (size_t i = 0; i < n; ++i) {
    prev[i] = static_cast<int64_t>(i) - 1;
    next[i] = i + 1 < n ? static_cast<int64_t>(i) + 1 : -1;
  }
  std::vector<char> alive(n, 1);
  std::vector<uint64_t> heap;
  heap.reserve(n);
  auto entry = [&](int64_t i) -> int64_t {  // the heap entry of the pair at i, or -1
    if (i < 0 || next[i] < 0) return -1;
    const auto* m = rank_of(ids[i], ids[next[i]]);
    return m == nullptr ? -1 : static_cast<int64_t>(static_cast<uint64_t>(m->first) << 32 | static_cast<uint64_t>(i));
  };
  auto push = [&](int64_t i) {
    const int64_t e = entry(i);
    if (e < 0) return;
    heap.push_back(static_cast<uint64_t>(e));
    std::push_heap(heap.begin(), heap.end(), std::greater<>());
  };
  for (size_t i = 0; i + 1 < n; ++i) {
    const int64_t e = entry(static_cast<int64_t>(i));
    if (e >= 0) heap.push_back(static_cast<uint64_t>(e));
  }
  std::make_heap(heap.begin(), heap.end(), std::greater<>());
  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), std::greater<>());
    const uint64_t top = heap.back();
    heap.pop_back();
    const auto i = static_cast<int64_t>(top & 0xFFFFFFFFu);
    const auto rank = static_cast<int32_t>(top >> 32);
    if (!alive[i] || next[i] < 0) continue;
    const auto* m = rank_of(ids[i], ids[next[i]]);
    if (m == nullptr || m->first != rank) continue;
    const int64_t j = next[i];
    ids[i] = m->second;
    alive[j] = 0;
    next[i] = next[j];
    if (next[j] >= 0) prev[next[j]] = i;
    push(prev[i]);
    push(i);
  }
  size_t k = 0;
  for (int64_t i = 0; i >= 0; i = next[i]) ids[k++] = ids[i];
  ids.resize(k);
}

std::string read_whole_file(const std::string& path, const char* what) {
  return megatron::detail::read_whole_file(path, tokenizer_file(path, what));
}
std::string tokenizer_file(const std::string& path, const char* what) {
  return "[tokenizer] " + path + " (" + what + ")";
}

bool byte_level_bytes(std::string_view token, std::string& bytes) {
  static const std::unordered_map<uint32_t, char> to_byte = [] {
    std::unordered_map<uint32_t, char> m;
    for (int b = 0; b < 256; ++b) m[bytes_to_unicode()[static_cast<size_t>(b)]] = static_cast<char>(b);
    return m;
  }();
  bytes.clear();
  size_t len;
  for (size_t i = 0; i < token.size(); i += len) {
    auto it = to_byte.find(decode_utf8(token, i, len));
    if (it == to_byte.end()) return false;
    bytes.push_back(it->second);
  }
  return true;
}

uint64_t new_tokenizer_instance_id() {
  static std::atomic<uint64_t> next{1};
  return next++;
}

WordCache& word_cache(uint64_t instance_id) {
  thread_local WordCache cache;
  if (cache.owner != instance_id) {
    cache.clear();
    cache.owner = instance_id;
  }
  return cache;
}

}  // namespace megatron::tokenizer::detail
