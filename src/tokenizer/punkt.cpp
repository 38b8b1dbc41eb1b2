// NLTK's punkt sentence tokenizer, written here from its published algorithm and nltk 3.10's
// behaviour (no C++ library has it): word tokens and their types, the first pass (sentence ends,
// ellipses, known abbreviations), the second pass (collocations, the orthographic and sentence
// starter heuristics, initials and numbers), candidate ends found by its period-context pattern,
// and closing punctuation realigned onto the sentence before. Character classes are nltk's
// (unicode_tables: its regex module's \s, \w and \d; Python's isspace, isupper, islower and
// lower) so that the same text splits the same.
#include "punkt_model.h"

#include "unicode_tables.h"
#include "utf8.h"

#include <c10/util/Exception.h>

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

namespace megatron::tokenizer {
namespace {

using detail::is_space;                  // the regex module's \s, which nltk's patterns use
using Span = std::pair<size_t, size_t>;  // [begin, end) in code points

// Orthographic contexts, as the model's ortho_context.tab stores them (bit flags).
constexpr int kOrthoBegUc = 1 << 1, kOrthoMidUc = 1 << 2, kOrthoUnkUc = 1 << 3;
constexpr int kOrthoBegLc = 1 << 4, kOrthoMidLc = 1 << 5, kOrthoUnkLc = 1 << 6;
constexpr int kOrthoUc = kOrthoBegUc | kOrthoMidUc | kOrthoUnkUc;
constexpr int kOrthoLc = kOrthoBegLc | kOrthoMidLc | kOrthoUnkLc;

bool sent_end(char32_t c) {
  return c == '.' || c == '?' || c == '!';
}

// Punctuation that cannot be inside a word (punkt's non-word characters: '?' and '!' but not '.').
bool non_word(char32_t c) {
  return std::u32string_view(U")\";}]*:@'({[?!\u2018\u2019\u201C\u201D\u00AB\u00BB").find(c) !=
         std::u32string_view::npos;
}

// Characters a word token cannot start with.
bool not_word_start(char32_t c) {
  return std::u32string_view(U"(\"`{[:;&#*@)}]-,").find(c) != std::u32string_view::npos;
}

// Closing punctuation that realignment moves onto the sentence before.
bool closing(char32_t c) {
  return std::u32string_view(U"\"')]}\u2018\u2019\u201C\u201D\u00AB\u00BB").find(c) != std::u32string_view::npos;
}

// Length of the multi-character punctuation at s[p] ("--", "..", ". . ."), 0 if none.
size_t multi_char(std::u32string_view s, size_t p) {
  const size_t n = s.size();
  for (char32_t c : {U'-', U'.'}) {
    size_t e = p;
    while (e < n && s[e] == c) ++e;
    if (e - p >= 2) return e - p;
  }
  size_t pairs = 0;  // ". " repeated, then "."
  while (p + 2 * pairs + 1 < n && s[p + 2 * pairs] == '.' && is_space(s[p + 2 * pairs + 1])) ++pairs;
  if (pairs >= 2 && p + 2 * pairs < n && s[p + 2 * pairs] == '.') return 2 * pairs + 1;
  return pairs >= 3 ? 2 * pairs - 1 : 0;
}

// Where a word token may end: whitespace, the end, a non-word character, multi-character
// punctuation, or a comma followed by one of those.
bool word_end(std::u32string_view s, size_t k) {
  const size_t n = s.size();
  if (k >= n || is_space(s[k]) || non_word(s[k]) || multi_char(s, k) > 0) return true;
  return s[k] == ',' && (k + 1 >= n || is_space(s[k + 1]) || non_word(s[k + 1]) || multi_char(s, k + 1) > 0);
}

// Punkt's word tokens of one line: multi-character punctuation, a word, or any other
// non-space character.
void word_tokenize(std::u32string_view line, std::vector<std::u32string_view>& out) {
  for (size_t p = 0; p < line.size();) {
    if (size_t m = multi_char(line, p)) {
      out.push_back(line.substr(p, m));
      p += m;
    } else if (is_space(line[p])) {
      ++p;
    } else if (not_word_start(line[p])) {
      out.push_back(line.substr(p++, 1));
    } else {
      size_t k = p + 1;
      while (!word_end(line, k)) ++k;
      out.push_back(line.substr(p, k - p));
      p = k;
    }
  }
}

// Python's str.lower(), with its two context rules.
std::u32string lower(std::u32string_view s) {
  std::u32string out;
  out.reserve(s.size());
  auto cased_at = [&](size_t i, int step) {  // skipping case-ignorable characters
    for (; i < s.size() && detail::is_case_ignorable(s[i]); i += step) {
    }
    return i < s.size() && detail::is_cased(s[i]);
  };
  for (size_t i = 0; i < s.size(); ++i) {
    const char32_t c = s[i];
    if (c == 0x130) {
      out += U"i\u0307";
    } else if (c == 0x3A3) {  // final sigma: after a cased letter, not before one
      out += i > 0 && cased_at(i - 1, -1) && !cased_at(i + 1, 1) ? U'\u03C2' : U'\u03C3';
    } else {
      out += detail::python_lower(c);
    }
  }
  return out;
}

// A number as punkt's type normalisation sees one: -?[.,]?\d[\d,.-]*\.?
bool numeric(std::u32string_view s) {
  size_t i = 0;
  if (i < s.size() && s[i] == '-') ++i;
  if (i < s.size() && (s[i] == '.' || s[i] == ',')) ++i;
  if (i >= s.size() || !detail::is_punkt_digit(s[i])) return false;
  for (++i; i < s.size(); ++i)
    if (!detail::is_punkt_digit(s[i]) && s[i] != ',' && s[i] != '.' && s[i] != '-') return false;
  return true;
}

std::string utf8(std::u32string_view s) {
  std::string out;
  for (char32_t c : s) detail::append_utf8(out, c);
  return out;
}

struct Token {
  std::u32string_view tok;
  std::u32string type;  // lower-cased, numbers as ##number##
  bool sentbreak = false, abbr = false, ellipsis = false;

  explicit Token(std::u32string_view t) : tok(t), type(lower(t)) {
    if (numeric(type)) type = U"##number##";
  }
  bool period_final() const { return tok.back() == '.'; }
  std::u32string_view type_no_period() const {
    std::u32string_view t = type;
    return t.size() > 1 && t.back() == '.' ? t.substr(0, t.size() - 1) : t;
  }
  std::u32string_view type_no_sentperiod() const { return sentbreak ? type_no_period() : std::u32string_view(type); }
  bool first_upper() const { return detail::is_python_upper(tok[0]); }
  bool first_lower() const { return detail::is_python_lower(tok[0]); }
  bool is_ellipsis() const { return tok.size() >= 2 && tok.find_first_not_of(U'.') == std::u32string_view::npos; }
  bool is_initial() const {
    return tok.size() == 2 && tok[1] == '.' && detail::is_punkt_word(tok[0]) && !detail::is_punkt_digit(tok[0]);
  }
};

enum class Starter { kYes, kNo, kUnknown };

// Punkt's decisions over tokens, from a model's parameters.
class Annotator {
 public:
  explicit Annotator(const detail::PunktModel& model) : model_(model) {}

  int ortho(std::u32string_view type) const {
    auto it = model_.ortho_context.find(utf8(type));
    return it == model_.ortho_context.end() ? 0 : it->second;
  }

  void first_pass(Token& t) const {
    if (t.tok.size() == 1 && sent_end(t.tok[0])) {
      t.sentbreak = true;
    } else if (t.is_ellipsis()) {
      t.ellipsis = true;
    } else if (t.period_final() && !(t.tok.size() >= 2 && t.tok[t.tok.size() - 2] == '.')) {
      const std::string word = utf8(lower(t.tok.substr(0, t.tok.size() - 1)));
      const size_t dash = word.rfind('-');
      if (model_.abbrev_types.count(word) ||
          model_.abbrev_types.count(dash == std::string::npos ? word : word.substr(dash + 1)))
        t.abbr = true;
      else
        t.sentbreak = true;
    }
  }

  // Whether `t` starts a sentence, by where its type was seen capitalised in training.
  Starter ortho_heuristic(const Token& t) const {
    if (t.tok.size() == 1 && std::u32string_view(U";:,.!?").find(t.tok[0]) != std::u32string_view::npos)
      return Starter::kNo;
    const int context = ortho(t.type_no_sentperiod());
    if (t.first_upper() && (context & kOrthoLc) && !(context & kOrthoMidUc)) return Starter::kYes;
    if (t.first_lower() && ((context & kOrthoUc) || !(context & kOrthoBegLc))) return Starter::kNo;
    return Starter::kUnknown;
  }

  // Token-based reclassification of a period-final token from the one after it.
  void second_pass(Token& t, const Token& next) const {
    if (!t.period_final()) return;
    const std::u32string_view typ = t.type_no_period();
    const std::u32string_view next_typ = next.type_no_sentperiod();
    const bool initial = t.is_initial();
    if (model_.collocations.count(utf8(typ) + '\t' + utf8(next_typ))) {
      t.sentbreak = false;
      t.abbr = true;
      return;
    }
    if ((t.abbr || t.ellipsis) && !initial) {
      if (ortho_heuristic(next) == Starter::kYes ||
          (next.first_upper() && model_.sent_starters.count(utf8(next_typ)))) {
        t.sentbreak = true;
        return;
      }
    }
    if (initial || typ == U"##number##") {
      const Starter starter = ortho_heuristic(next);
      if (starter == Starter::kNo ||
          (starter == Starter::kUnknown && initial && next.first_upper() && !(ortho(next_typ) & kOrthoLc))) {
        t.sentbreak = false;
        t.abbr = true;
      }
    }
  }

  // Whether a sentence break falls inside `text` (before its last token).
  bool contains_sentbreak(std::u32string_view text) const {
    std::vector<std::u32string_view> words;
    for (size_t begin = 0; begin <= text.size();) {
      size_t end = text.find(U'\n', begin);
      if (end == std::u32string_view::npos) end = text.size();
      const std::u32string_view line = text.substr(begin, end - begin);
      // A line that str.strip() empties has no tokens (its \x1c-\x1f would be tokens to \S).
      if (std::any_of(line.begin(), line.end(), [](char32_t c) { return !detail::is_python_space(c); }))
        word_tokenize(line, words);
      begin = end + 1;
    }
    std::vector<Token> tokens(words.begin(), words.end());
    for (Token& t : tokens) first_pass(t);
    for (size_t i = 0; i + 1 < tokens.size(); ++i) {
      second_pass(tokens[i], tokens[i + 1]);
      if (tokens[i].sentbreak) return true;
    }
    return false;
  }

 private:
  const detail::PunktModel& model_;
};

// One candidate sentence end found by the period-context pattern.
struct EndMatch {
  size_t start, end;          // the match
  size_t after_end;           // its lookahead ("after_tok") runs from `end` to here
  bool has_next_tok = false;  // the lookahead is whitespace-separated text, not punctuation
  size_t next_tok = 0;        // where that text starts
};

// The lookahead after a candidate end at `k`: a non-word character, or whitespace (at least one
// character of it when need_space) and a token.
bool lookahead(std::u32string_view s, size_t k, bool need_space, EndMatch& m) {
  const size_t n = s.size();
  if (k < n && non_word(s[k])) {
    m.after_end = k + 1;
    return true;
  }
  size_t q = k;
  while (q < n && is_space(s[q])) ++q;
  if (q >= n || (need_space && q == k)) return false;
  size_t r = q;
  while (r < n && !is_space(s[r])) ++r;
  m.has_next_tok = true;
  m.next_tok = q;
  m.after_end = r;
  return true;
}

// The next match of punkt's period-context pattern at or after `p`: a sentence-end character
// followed by non-word punctuation or by whitespace and a token. Megatron-LM's --keep-newlines
// pattern takes the word before and the whitespace after into the match.
bool next_end(std::u32string_view s, size_t p, bool keep_newlines, EndMatch& m) {
  const size_t n = s.size();
  for (; p < n; ++p) {
    m = EndMatch{};
    if (!keep_newlines) {
      if (sent_end(s[p]) && lookahead(s, p + 1, true, m)) {
        m.start = p;
        m.end = p + 1;
        return true;
      }
      continue;
    }
    // \S* [.?!] \s* (?=...): the greedy word backs off to its last end character that works.
    size_t q = p;
    while (q < n && !is_space(s[q])) ++q;
    for (size_t j = q; j-- > p;) {
      if (!sent_end(s[j])) continue;
      size_t r = j + 1;
      while (r < n && is_space(s[r])) ++r;
      if (r < n && lookahead(s, r, false, m)) {
        m.start = p;
        m.end = r;
        return true;
      }
    }
    p = q;  // no later start inside this word matches either
  }
  return false;
}

}  // namespace

std::vector<std::string_view> PunktSentenceSplitter::split(std::string_view text) const {
  // Code points, and where each starts in `text`.
  std::u32string cps;
  std::vector<size_t> at;
  cps.reserve(text.size());
  at.reserve(text.size() + 1);
  for (size_t i = 0; i < text.size();) {
    size_t len;
    at.push_back(i);
    cps.push_back(detail::decode_utf8(text, i, len));
    i += len;
  }
  at.push_back(text.size());

  std::vector<std::string_view> sentences;
  constexpr size_t kPiece = 1000000;  // Megatron-LM's max_len, in code points
  for (size_t base = 0; base < cps.size(); base += kPiece) {
    const std::u32string_view s = std::u32string_view(cps).substr(base, kPiece);
    // Candidate ends, each with its context: the word before (from the last ASCII whitespace
    // after the previous candidate's word), the match and its lookahead. A candidate whose
    // word overlaps the next one's is dropped.
    std::vector<Span> slices;
    size_t last_break = 0;
    auto consider = [&](const EndMatch& m, Span word) {
      if (Annotator(*model_).contains_sentbreak(s.substr(word.first, m.after_end - word.first))) {
        slices.emplace_back(last_break, m.end);
        last_break = m.has_next_tok ? m.next_tok : m.end;
      }
    };
    EndMatch m, previous;
    bool have_previous = false;
    Span previous_word{0, 0};
    for (size_t p = 0; next_end(s, p, keep_newlines_, m); p = m.end) {
      size_t space = std::u32string_view::npos;
      for (size_t i = m.start; i-- > previous_word.second;) {
        const char32_t c = s[i];
        if (c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == 0x0B || c == 0x0C) {
          space = i;
          break;
        }
      }
      // nltk takes whitespace at the first position after the previous word as none at all.
      const size_t word_start =
          space == std::u32string_view::npos || space == previous_word.second ? previous_word.first : space + 1;
      const Span word{word_start, m.start};
      if (have_previous && previous_word.second <= word.first) consider(previous, previous_word);
      previous = m;
      previous_word = word;
      have_previous = true;
    }
    if (have_previous) consider(previous, previous_word);
    size_t end = s.size();
    while (end > 0 && detail::is_python_space(s[end - 1])) --end;  // str.rstrip()
    slices.emplace_back(last_break, end);

    // Closing punctuation after a break (quotes, brackets) and the whitespace after it belong
    // to the sentence before.
    size_t realign = 0;
    for (size_t i = 0; i < slices.size(); ++i) {
      Span kept{slices[i].first + realign, slices[i].second};
      realign = 0;
      if (i + 1 < slices.size()) {
        const auto [b, e] = slices[i + 1];
        size_t k = b;
        while (k < e && closing(s[k])) {
          ++k;
          size_t w = k;
          while (w < e && is_space(s[w])) ++w;
          const bool dashes = k + 1 < e && s[k] == '-' && s[k + 1] == '-';
          if (w > k || dashes || k == e) {
            kept.second = k;
            realign = (w > k ? w : k) - b;
            break;
          }
        }
      }
      if (kept.first < kept.second)
        sentences.emplace_back(text.substr(at[base + kept.first], at[base + kept.second] - at[base + kept.first]));
    }
  }
  return sentences;
}

}  // namespace megatron::tokenizer
