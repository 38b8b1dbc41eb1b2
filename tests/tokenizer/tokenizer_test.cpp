#include "megatron/tokenizer/gpt2_bpe.h"
#include "megatron/tokenizer/null_tokenizer.h"

#include <c10/util/Exception.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <thread>

#include "error_of.h"
#include "temp_dir.h"

namespace megatron::tokenizer {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

using megatron::testing::error_of;

std::vector<std::string> pieces(std::string_view text) {
  std::vector<std::string> out;
  for (auto p : gpt2_pretokenize(text)) out.emplace_back(p);
  return out;
}

TEST(Pretokenize, FollowsTheGpt2Pattern) {
  EXPECT_THAT(pieces("Hello world"), ElementsAre("Hello", " world"));
  EXPECT_THAT(pieces("I'm they'll"), ElementsAre("I", "'m", " they", "'ll"));
  EXPECT_THAT(pieces("a   b"), ElementsAre("a", "  ", " b"));
  EXPECT_THAT(pieces("x \n y"), ElementsAre("x", " \n", " y"));
  EXPECT_THAT(pieces("x\ny"), ElementsAre("x", "\n", "y"));
  EXPECT_THAT(pieces("end  "), ElementsAre("end", "  "));
  EXPECT_THAT(pieces("abc123 ?!x"), ElementsAre("abc", "123", " ?!", "x"));
  EXPECT_THAT(pieces("caf\xc3\xa9 \xe6\x97\xa5\xe6\x9c\xac"), ElementsAre("caf\xc3\xa9", " \xe6\x97\xa5\xe6\x9c\xac"));
  // Invalid UTF-8 bytes are "other" symbols and keep their bytes.
  EXPECT_THAT(pieces("a\xff\xfe b"), ElementsAre("a", "\xff\xfe", " b"));
}

// A byte-level vocabulary with every byte and two merges: "h e" -> "he", "he l" -> "hel".
struct TinyVocab {
  std::string dir, vocab, merges;
  TinyVocab() {
    dir = megatron::testing::make_temp_dir("tok_test");
    vocab = dir + "/vocab.json";
    merges = dir + "/merges.txt";
    std::ofstream v(vocab);
    v << "{";
    const auto& table = bytes_to_unicode();
    for (int b = 0; b < 256; ++b) {
      std::string s;
      const uint32_t cp = table[b];
      if (cp < 0x80)
        s.push_back(static_cast<char>(cp));
      else {
        s.push_back(static_cast<char>(0xC0 | (cp >> 6)));
        s.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
      }
      if (s == "\"" || s == "\\") s = "\\" + s;
      v << "\"" << s << "\": " << b << ", ";
    }
    v << "\"he\": 256, \"hel\": 257, \"<|endoftext|>\": 258}";
    std::ofstream m(merges);
    m << "#version: 0.2\nh e\nhe l\n";
  }
};

TEST(GPT2BPETokenizer, MergesByRankAndRoundTrips) {
  TinyVocab t;
  GPT2BPETokenizer tok(t.vocab, t.merges);
  EXPECT_EQ(tok.vocab_size(), 259);
  EXPECT_EQ(tok.eod(), 258);
  EXPECT_THAT(tok.tokenize("hello"), ElementsAre(257, 'l', 'o'));
  EXPECT_THAT(tok.tokenize("he"), ElementsAre(256));
  const std::string text = "hello \xff\x00 h\xc3\xa9";
  EXPECT_EQ(tok.detokenize(tok.tokenize(std::string(text.data(), text.size()))), text);
  EXPECT_THAT(error_of([&] { tok.detokenize({999}); }), HasSubstr("outside the vocabulary"));
}

TEST(GPT2BPETokenizer, LongWordsTakeTheHeapPathWithTheSameResult) {
  TinyVocab t;
  GPT2BPETokenizer tok(t.vocab, t.merges);
  std::string word;
  for (int i = 0; i < 40; ++i) word += "hel";
  auto ids = tok.tokenize(word);  // 120 bytes: heap path
  EXPECT_EQ(ids, std::vector<int32_t>(40, 257));
}

TEST(GPT2BPETokenizer, ThreadsAgree) {
  TinyVocab t;
  GPT2BPETokenizer tok(t.vocab, t.merges);
  const std::string text = "hello hell help he shell helium";
  const auto expected = tok.tokenize(text);
  std::vector<std::thread> threads;
  std::vector<int> ok(8, 0);
  for (int i = 0; i < 8; ++i) {
    threads.emplace_back([&, i] {
      bool all = true;
      for (int k = 0; k < 200; ++k) all &= tok.tokenize(text) == expected;
      ok[i] = all;
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(ok, std::vector<int>(8, 1));
}

TEST(GPT2BPETokenizer, BadFilesAreNamed) {
  TinyVocab t;
  EXPECT_THAT(error_of([&] { GPT2BPETokenizer x(t.dir + "/none.json", t.merges); }), HasSubstr("none.json"));
  std::ofstream(t.merges, std::ios::app) << "q zz\n";
  EXPECT_THAT(error_of([&] { GPT2BPETokenizer x(t.vocab, t.merges); }), HasSubstr("merges.txt:4"));
}

TEST(NullTokenizer, ParsesIds) {
  NullTokenizer tok(100);
  EXPECT_THAT(tok.tokenize("1 22 99"), ElementsAre(1, 22, 99));
  EXPECT_EQ(tok.eod(), 99);
  EXPECT_EQ(tok.detokenize({1, 2}), "1 2");
  EXPECT_THAT(error_of([&] { tok.tokenize("1 x"); }), HasSubstr("'x'"));
  EXPECT_THAT(error_of([&] { tok.tokenize("100"); }), HasSubstr("'100'"));
}

}  // namespace
}  // namespace megatron::tokenizer
