#include "megatron/tokenizer/bpe_trainer.h"

#include "megatron/logging.h"
#include "megatron/tokenizer/gpt2_bpe.h"

#include <c10/util/Exception.h>

#include <unistd.h>
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <queue>

namespace megatron::tokenizer {
namespace {

uint64_t key(int32_t a, int32_t b) {
  return static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32 | static_cast<uint32_t>(b);
}

std::string utf8(uint32_t cp) {
  std::string s;
  if (cp < 0x80) {
    s.push_back(static_cast<char>(cp));
  } else {
    s.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    s.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
  return s;
}

std::string json_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '"' || c == '\\') out.push_back('\\');
    out.push_back(c);
  }
  return out;
}

void write_atomically(const std::string& path, const std::string& content) {
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    TORCH_CHECK(out, "[train_tokenizer] ", tmp, ": cannot create");
    out << content;
    out.flush();
    TORCH_CHECK(out, "[train_tokenizer] ", tmp, ": write failed");
  }
  TORCH_CHECK(std::rename(tmp.c_str(), path.c_str()) == 0, "[train_tokenizer] ", path, ": rename failed");
}

}  // namespace

void BpeTrainer::add_text(std::string_view text) {
  for (auto word : gpt2_pretokenize(text)) ++word_counts_[std::string(word)];
}

void BpeTrainer::add_word_counts(const std::unordered_map<std::string, int64_t>& counts) {
  for (const auto& [w, c] : counts) word_counts_[w] += c;
}

void BpeTrainer::train_and_save(const std::string& dir) {
  TORCH_CHECK(options_.vocab_size >= 257,
              "[train_tokenizer] --vocab-size must be at least 257 "
              "(256 bytes + <|endoftext|>), got ",
              options_.vocab_size);
  // Base alphabet in GPT-2's order: bytes sorted by their printable code point.
  const auto& table = bytes_to_unicode();
  std::vector<int> order(256);
  for (int b = 0; b < 256; ++b) order[b] = b;
  std::sort(order.begin(), order.end(), [&](int x, int y) { return table[x] < table[y]; });
  std::vector<std::string> tokens;  // token strings in byte-to-unicode spelling
  std::unordered_map<std::string, int32_t> ids;
  std::vector<int32_t> byte_id(256);
  for (int i = 0; i < 256; ++i) {
    byte_id[order[i]] = i;
    tokens.push_back(utf8(table[order[i]]));
    ids[tokens.back()] = i;
  }

  // Words as symbol lists, in a fixed order so that training is deterministic.
  std::vector<std::pair<std::string, int64_t>> sorted(word_counts_.begin(), word_counts_.end());
  std::sort(sorted.begin(), sorted.end());
  std::vector<std::vector<int32_t>> words;
  std::vector<int64_t> counts;
  for (const auto& [w, c] : sorted) {
    std::vector<int32_t> syms;
    for (unsigned char b : w) syms.push_back(byte_id[b]);
    words.push_back(std::move(syms));
    counts.push_back(c);
  }
  std::unordered_map<uint64_t, int64_t> pair_count;
  std::unordered_map<uint64_t, std::vector<int32_t>> where;
  for (size_t w = 0; w < words.size(); ++w) {
    for (size_t i = 0; i + 1 < words[w].size(); ++i) {
      const uint64_t k = key(words[w][i], words[w][i + 1]);
      pair_count[k] += counts[w];
      auto& list = where[k];
      if (list.empty() || list.back() != static_cast<int32_t>(w)) list.push_back(static_cast<int32_t>(w));
    }
  }
  // Max-heap on (count, then smaller pair key), with stale entries skipped on pop.
  using Entry = std::pair<int64_t, uint64_t>;
  auto less = [](const Entry& a, const Entry& b) {
    return a.first != b.first ? a.first < b.first : a.second > b.second;
  };
  std::priority_queue<Entry, std::vector<Entry>, decltype(less)> heap(less);
  for (const auto& [k, c] : pair_count) heap.push({c, k});

  std::vector<std::pair<int32_t, int32_t>> merges;
  const int64_t target_merges = options_.vocab_size - 257;
  std::vector<int32_t> seen(words.size(), -1);
  while (static_cast<int64_t>(merges.size()) < target_merges && !heap.empty()) {
    const auto [c, k] = heap.top();
    heap.pop();
    auto it = pair_count.find(k);
    if (it == pair_count.end() || it->second != c) continue;  // stale
    if (c < options_.min_frequency) break;
    const auto a = static_cast<int32_t>(k >> 32), b = static_cast<int32_t>(k & 0xFFFFFFFF);
    const std::string merged = tokens[a] + tokens[b];
    int32_t z;
    auto found = ids.find(merged);
    if (found != ids.end()) {
      z = found->second;
    } else {
      z = static_cast<int32_t>(tokens.size());
      tokens.push_back(merged);
      ids[merged] = z;
    }
    merges.emplace_back(a, b);
    std::vector<uint64_t> touched;
    const int32_t stamp = static_cast<int32_t>(merges.size());
    for (int32_t w : where[k]) {
      if (seen[w] == stamp) continue;
      seen[w] = stamp;
      auto& syms = words[w];
      // Take the word's pairs out, merge left to right, put the new pairs in.
      for (size_t i = 0; i + 1 < syms.size(); ++i) {
        const uint64_t p = key(syms[i], syms[i + 1]);
        pair_count[p] -= counts[w];
        touched.push_back(p);
      }
      std::vector<int32_t> out;
      out.reserve(syms.size());
      for (size_t i = 0; i < syms.size(); ++i) {
        if (i + 1 < syms.size() && syms[i] == a && syms[i + 1] == b) {
          out.push_back(z);
          ++i;
        } else {
          out.push_back(syms[i]);
        }
      }
      syms.swap(out);
      for (size_t i = 0; i + 1 < syms.size(); ++i) {
        const uint64_t p = key(syms[i], syms[i + 1]);
        pair_count[p] += counts[w];
        touched.push_back(p);
        auto& list = where[p];
        if (list.empty() || list.back() != w) list.push_back(w);
      }
    }
    std::sort(touched.begin(), touched.end());
    touched.erase(std::unique(touched.begin(), touched.end()), touched.end());
    for (uint64_t p : touched) {
      auto pc = pair_count.find(p);
      if (pc->second <= 0) {
        pair_count.erase(pc);
      } else {
        heap.push({pc->second, p});
      }
    }
    pair_count.erase(k);
    where.erase(k);
  }
  tokens.push_back("<|endoftext|>");

  std::string vocab = "{";
  for (size_t i = 0; i < tokens.size(); ++i) {
    vocab += (i ? ", \"" : "\"") + json_escape(tokens[i]) + "\": " + std::to_string(i);
  }
  vocab += "}\n";
  std::string merges_text = "#version: 0.2\n";
  for (const auto& [a, b] : merges) merges_text += tokens[a] + " " + tokens[b] + "\n";
  write_atomically(dir + "/vocab.json", vocab);
  write_atomically(dir + "/merges.txt", merges_text);
  log_info("[train_tokenizer] " + std::to_string(merges.size()) + " merges, vocabulary of " +
           std::to_string(tokens.size()) + " tokens from " + std::to_string(words.size()) + " distinct words");
}

}  // namespace megatron::tokenizer
