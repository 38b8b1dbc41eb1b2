#include "bpe.h"

#include <atomic>
#include <climits>
#include <functional>
#include <queue>

namespace megatron::tokenizer::detail {

void bpe_merge(std::vector<int32_t>& ids, const MergeTable& merges) {
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
  size_t k = 0;
  for (int64_t i = 0; i >= 0; i = next[i]) ids[k++] = ids[i];
  ids.resize(k);
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
