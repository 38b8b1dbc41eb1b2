#include "hf_pipeline.h"

#include "gpt2_pretokenizer.h"
#include "llama3_pretokenizer.h"
#include "unicode_tables.h"
#include "utf8.h"

#include <c10/util/Exception.h>
#include <oniguruma.h>
#include <utf8proc.h>
#include <nlohmann/json.hpp>

#include <cstdlib>
#include <mutex>
#include <optional>

namespace megatron::tokenizer::detail {
namespace {

using json = nlohmann::json;

// A piece's text cut into spans, each a match of the splitting pattern or the text between two.
struct Span {
  size_t begin, end;
  bool is_match;
};

enum class Behavior { kRemoved, kIsolated, kMergedWithPrevious, kMergedWithNext, kContiguous };

Behavior behavior_of(const json& spec, const std::string& where) {
  const std::string b = spec.at("behavior").get<std::string>();
  if (b == "Removed") return Behavior::kRemoved;
  if (b == "Isolated") return Behavior::kIsolated;
  if (b == "MergedWithPrevious") return Behavior::kMergedWithPrevious;
  if (b == "MergedWithNext") return Behavior::kMergedWithNext;
  TORCH_CHECK(b == "Contiguous", "[tokenizer] ", where, ": Split behavior '", b,
              "' is not one of Removed, Isolated, MergedWithPrevious, MergedWithNext, Contiguous");
  return Behavior::kContiguous;
}

// The pieces a span list becomes under a behavior (tokenizers' NormalizedString::split).
std::vector<std::pair<size_t, size_t>> apply_behavior(const std::vector<Span>& spans, Behavior behavior) {
  std::vector<std::pair<size_t, size_t>> out;
  bool previous_match = false;
  switch (behavior) {
    case Behavior::kIsolated:
      for (const Span& s : spans) out.emplace_back(s.begin, s.end);
      break;
    case Behavior::kRemoved:
      for (const Span& s : spans)
        if (!s.is_match) out.emplace_back(s.begin, s.end);
      break;
    case Behavior::kMergedWithPrevious:
      for (const Span& s : spans) {
        if (s.is_match && !previous_match && !out.empty()) {
          out.back().second = s.end;
        } else {
          out.emplace_back(s.begin, s.end);
        }
        previous_match = s.is_match;
      }
      break;
    case Behavior::kMergedWithNext:
      for (auto it = spans.rbegin(); it != spans.rend(); ++it) {
        if (it->is_match && !previous_match && !out.empty()) {
          out.back().first = it->begin;
        } else {
          out.emplace_back(it->begin, it->end);
        }
        previous_match = it->is_match;
      }
      std::reverse(out.begin(), out.end());
      break;
    case Behavior::kContiguous:
      for (size_t i = 0; i < spans.size(); ++i) {
        if (i > 0 && spans[i].is_match == previous_match) {
          out.back().second = spans[i].end;
        } else {
          out.emplace_back(spans[i].begin, spans[i].end);
        }
        previous_match = spans[i].is_match;
      }
      break;
  }
  return out;
}

// Replaces each piece by the pieces its spans give, dropping empty ones.
template <typename SpansOf>
void split_pieces(std::vector<Piece>& pieces, Behavior behavior, SpansOf&& spans_of) {
  std::vector<Piece> out;
  out.reserve(pieces.size() * 2);
  for (Piece& p : pieces) {
    for (const auto& [b, e] : apply_behavior(spans_of(p.text), behavior)) {
      if (b < e) out.push_back(Piece{p.text.substr(b, e - b), p.first && b == 0});
    }
  }
  pieces.swap(out);
}

// Spans from a match finder: found(text, emit) calls emit(begin, end) per match in order.
template <typename Finder>
std::vector<Span> spans_from(std::string_view text, bool invert, Finder&& finder) {
  std::vector<Span> spans;
  size_t prev = 0;
  finder(text, [&](size_t b, size_t e) {
    if (prev < b) spans.push_back({prev, b, invert});
    spans.push_back({b, e, !invert});
    prev = e;
  });
  if (prev < text.size()) spans.push_back({prev, text.size(), invert});
  return spans;
}

// A Split or Replace pattern: {"String": literal} or {"Regex": pattern}.
std::function<void(std::string_view, const std::function<void(size_t, size_t)>&)> pattern_finder(
    const json& pattern, const std::string& where) {
  if (pattern.contains("Regex")) {
    auto regex = std::make_shared<Regex>(pattern.at("Regex").get<std::string>(), where);
    return [regex](std::string_view text, const std::function<void(size_t, size_t)>& found) {
      regex->for_each_match(text, found);
    };
  }
  const std::string literal = pattern.at("String").get<std::string>();
  return [literal](std::string_view text, const std::function<void(size_t, size_t)>& found) {
    if (literal.empty()) {  // tokenizers compiles it as an empty regex: it matches at every character boundary
      for (size_t at = 0, len = 0; at <= text.size(); at += len) {
        found(at, at);
        if (at < text.size()) decode_utf8(text, at, len);
        if (at == text.size()) break;
      }
      return;
    }
    for (size_t at = text.find(literal); at != std::string_view::npos; at = text.find(literal, at + literal.size()))
      found(at, at + literal.size());
  };
}

// Spans of single characters that satisfy pred, as tokenizers splits on a char predicate.
template <typename Pred>
std::vector<Span> char_spans(std::string_view text, Pred&& pred) {
  return spans_from(text, false, [&](std::string_view t, auto&& emit) {
    for (size_t i = 0, len; i < t.size(); i += len) {
      if (pred(decode_utf8(t, i, len))) emit(i, i + len);
    }
  });
}

std::string normal_form(const std::string& s, int options) {
  utf8proc_uint8_t* out = nullptr;
  const utf8proc_ssize_t n =
      utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(s.data()), static_cast<utf8proc_ssize_t>(s.size()), &out,
                   static_cast<utf8proc_option_t>(options | UTF8PROC_STABLE));
  TORCH_CHECK(n >= 0, "[tokenizer] Unicode normalization failed: ", utf8proc_errmsg(n));
  std::string result(reinterpret_cast<const char*>(out), static_cast<size_t>(n));
  std::free(out);
  return result;
}

bool is_ascii(const std::string& s) {
  for (char c : s)
    if (static_cast<unsigned char>(c) >= 0x80) return false;
  return true;
}

}  // namespace

NestingGuard::NestingGuard(const std::string& where) {
  TORCH_CHECK(++depth() <= 32, "[tokenizer] ", where, ": Sequences nested deeper than 32");
}
NestingGuard::~NestingGuard() {
  --depth();
}
int& NestingGuard::depth() {
  thread_local int d = 0;
  return d;
}

std::string one_character(const json& spec, const char* key, const std::string& where) {
  const std::string c = spec.at(key).get<std::string>();
  size_t len = 0;
  TORCH_CHECK(!c.empty() && decode_utf8(c, 0, len) != kInvalid && len == c.size(), "[tokenizer] ", where, ": ", key,
              ": expected one character, found '", c, "'");
  return c;
}

namespace {

std::string type_of(const json& spec, const std::string& where) {
  TORCH_CHECK(spec.is_object() && spec.contains("type"), "[tokenizer] ", where, ": expected an object with a \"type\"");
  return spec.at("type").get<std::string>();
}

}  // namespace

Regex::Regex(const std::string& pattern, const std::string& where) : regex_(nullptr), where_(where) {
  static std::once_flag init;
  std::call_once(init, [] {
    OnigEncoding encodings[] = {ONIG_ENCODING_UTF8};
    onig_initialize(encodings, 1);
    // Bound the backtracking of a whole search, not only of one match attempt (Oniguruma's
    // default), so that a pathological pattern in a tokenizer.json fails instead of hanging.
    onig_set_retry_limit_in_search(100000000UL);
  });
  OnigErrorInfo info;
  OnigRegex re = nullptr;
  const auto* p = reinterpret_cast<const OnigUChar*>(pattern.data());
  const int rc = onig_new(&re, p, p + pattern.size(), ONIG_OPTION_NONE, ONIG_ENCODING_UTF8, ONIG_SYNTAX_DEFAULT, &info);
  if (rc != ONIG_NORMAL) {
    OnigUChar message[ONIG_MAX_ERROR_MESSAGE_LEN];
    onig_error_code_to_str(message, rc, &info);
    TORCH_CHECK(false, "[tokenizer] ", where, ": regex '", pattern,
                "' does not compile: ", reinterpret_cast<const char*>(message));
  }
  regex_ = re;
}

Regex::~Regex() {
  if (regex_ != nullptr) onig_free(static_cast<OnigRegex>(regex_));
}

void Regex::for_each_match(std::string_view text, const std::function<void(size_t, size_t)>& found) const {
  auto* re = static_cast<OnigRegex>(regex_);
  const auto* str = reinterpret_cast<const OnigUChar*>(text.data());
  const OnigUChar* end = str + text.size();
  std::unique_ptr<OnigRegion, void (*)(OnigRegion*)> region(onig_region_new(),
                                                            [](OnigRegion* r) { onig_region_free(r, 1); });
  // The onig crate's find_iter: empty matches count, except one right where the last match ended.
  size_t at = 0;
  std::optional<size_t> last_match_end;
  while (at <= text.size()) {
    const int rc = onig_search(re, str, end, str + at, end, region.get(), ONIG_OPTION_NONE);
    if (rc == ONIG_MISMATCH) return;
    if (rc < 0) {  // Oniguruma's backtracking limit, or memory: a pattern too costly for this text
      OnigUChar message[ONIG_MAX_ERROR_MESSAGE_LEN];
      onig_error_code_to_str(message, rc);
      TORCH_CHECK(false, "[tokenizer] ", where_, ": regex search failed: ", reinterpret_cast<const char*>(message));
    }
    const auto b = static_cast<size_t>(region->beg[0]), e = static_cast<size_t>(region->end[0]);
    if (e == b && last_match_end == e) {  // step over one character and search again
      size_t len = 1;
      if (at < text.size()) decode_utf8(text, at, len);
      at += len;
      continue;
    }
    at = e;
    last_match_end = e;
    found(b, e);
  }
}

bool whitespace_at(std::string_view s, size_t i, size_t& len) {
  return is_space(decode_utf8(s, i, len));
}

Normalizer build_normalizer(const json& spec, const std::string& where) {
  if (spec.is_null()) return {};
  const NestingGuard nesting(where);
  const std::string type = type_of(spec, where);
  if (type == "Sequence") {
    std::vector<Normalizer> steps;
    for (const json& s : spec.at("normalizers")) {
      if (auto n = build_normalizer(s, where)) steps.push_back(std::move(n));
    }
    return [steps](std::string& text) {
      for (const auto& n : steps) n(text);
    };
  }
  if (type == "NFC" || type == "NFD" || type == "NFKC" || type == "NFKD") {
    int options = type[type.size() - 1] == 'C' ? UTF8PROC_COMPOSE : UTF8PROC_DECOMPOSE;
    if (type.size() == 4) options |= UTF8PROC_COMPAT;
    return [options](std::string& text) {
      if (!is_ascii(text)) text = normal_form(text, options);
    };
  }
  if (type == "Prepend") {
    const std::string prefix = spec.at("prepend").get<std::string>();
    return [prefix](std::string& text) {
      if (!text.empty()) text.insert(0, prefix);
    };
  }
  if (type == "Replace") {
    auto finder = pattern_finder(spec.at("pattern"), where + ": Replace");
    const std::string content = spec.at("content").get<std::string>();
    return [finder, content](std::string& text) {
      std::string out;
      size_t prev = 0;
      finder(text, [&](size_t b, size_t e) {
        out.append(text, prev, b - prev);
        out += content;
        prev = e;
      });
      out.append(text, prev, std::string::npos);
      text.swap(out);
    };
  }
  TORCH_CHECK(type == "Strip", "[tokenizer] ", where, ": normalizer type '", type,
              "' is not supported (supported: NFC, NFD, NFKC, NFKD, Prepend, Replace, Strip, Sequence)");
  const bool left = spec.value("strip_left", true), right = spec.value("strip_right", true);
  return [left, right](std::string& text) {
    size_t b = 0, len;
    while (left && b < text.size() && whitespace_at(text, b, len)) b += len;
    size_t e = right ? b : text.size();
    for (size_t i = b; right && i < text.size();) {  // e: the end of the last non-space character
      const bool space = whitespace_at(text, i, len);
      i += len;
      if (!space) e = i;
    }
    text = text.substr(b, e - b);
  };
}

PreTokenizer build_pre_tokenizer(const json& spec, const std::string& where, bool& byte_level) {
  if (spec.is_null()) return {};
  const NestingGuard nesting(where);
  const std::string type = type_of(spec, where);
  TORCH_CHECK(!byte_level, "[tokenizer] ", where, ": a ", type,
              " pre-tokenizer after ByteLevel is not supported (ByteLevel must come last)");
  if (type == "Sequence") {
    std::vector<PreTokenizer> steps;
    for (const json& s : spec.at("pretokenizers")) {
      if (auto p = build_pre_tokenizer(s, where, byte_level)) steps.push_back(std::move(p));
    }
    return [steps](std::vector<Piece>& pieces) {
      for (const auto& p : steps) p(pieces);
    };
  }
  if (type == "Split") {
    const Behavior behavior = behavior_of(spec, where);
    const bool invert = spec.value("invert", false);
    const json& pattern = spec.at("pattern");
    const std::string regex = pattern.contains("Regex") ? pattern.at("Regex").get<std::string>() : "";
    if ((regex == kLlama3Pattern || regex == kQwen2Pattern) && behavior == Behavior::kIsolated && !invert) {
      const int max_digits = regex == kLlama3Pattern ? 3 : 1;
      return [max_digits](std::vector<Piece>& pieces) {
        split_pieces(pieces, Behavior::kIsolated, [&](const std::string& t) {
          return spans_from(
              t, false, [&](std::string_view text, auto&& emit) { for_each_llama3_pretoken(text, max_digits, emit); });
        });
      };
    }
    auto finder = pattern_finder(pattern, where + ": Split");
    return [finder, behavior, invert](std::vector<Piece>& pieces) {
      split_pieces(pieces, behavior, [&](const std::string& t) { return spans_from(t, invert, finder); });
    };
  }
  if (type == "ByteLevel") {
    byte_level = true;
    const bool add_prefix_space = spec.value("add_prefix_space", true), use_regex = spec.value("use_regex", true);
    return [add_prefix_space, use_regex](std::vector<Piece>& pieces) {
      if (add_prefix_space) {
        for (Piece& p : pieces)
          if (p.text.empty() || p.text[0] != ' ') p.text.insert(0, 1, ' ');
      }
      if (!use_regex) return;
      split_pieces(pieces, Behavior::kIsolated, [](const std::string& t) {
        return spans_from(t, false, [](std::string_view text, auto&& emit) { for_each_pretoken(text, emit); });
      });
    };
  }
  if (type == "Metaspace") {
    const std::string replacement = one_character(spec, "replacement", where);
    std::string scheme = spec.value("prepend_scheme", std::string());
    if (scheme.empty()) scheme = spec.value("add_prefix_space", true) ? "always" : "never";  // before 0.15
    TORCH_CHECK(scheme == "always" || scheme == "first" || scheme == "never", "[tokenizer] ", where,
                ": Metaspace prepend_scheme: expected always, first or never, found '", scheme, "'");
    const bool split = spec.value("split", true);
    return [replacement, scheme, split](std::vector<Piece>& pieces) {
      for (Piece& p : pieces) {
        std::string t;
        for (char c : p.text) {
          if (c == ' ') {
            t += replacement;
          } else {
            t.push_back(c);
          }
        }
        const bool starts = t.compare(0, replacement.size(), replacement) == 0;
        if (!t.empty() && !starts && (scheme == "always" || (scheme == "first" && p.first))) t.insert(0, replacement);
        p.text.swap(t);
      }
      if (!split) return;
      split_pieces(pieces, Behavior::kMergedWithNext, [&](const std::string& t) {
        return spans_from(t, false, [&](std::string_view text, auto&& emit) {
          for (size_t at = text.find(replacement); at != std::string_view::npos;
               at = text.find(replacement, at + replacement.size()))
            emit(at, at + replacement.size());
        });
      });
    };
  }
  if (type == "Digits") {
    const Behavior behavior = spec.value("individual_digits", false) ? Behavior::kIsolated : Behavior::kContiguous;
    return [behavior](std::vector<Piece>& pieces) {
      split_pieces(pieces, behavior, [](const std::string& t) { return char_spans(t, is_number); });
    };
  }
  if (type == "WhitespaceSplit") {
    return [](std::vector<Piece>& pieces) {
      split_pieces(pieces, Behavior::kRemoved, [](const std::string& t) { return char_spans(t, is_space); });
    };
  }
  TORCH_CHECK(type == "Whitespace", "[tokenizer] ", where, ": pre-tokenizer type '", type,
              "' is not supported (supported: ByteLevel, Split, Metaspace, Digits, Whitespace, WhitespaceSplit, "
              "Sequence)");
  // Whitespace keeps the matches of \w+|[^\w\s]+
  auto regex = std::make_shared<Regex>("\\w+|[^\\w\\s]+", where + ": Whitespace");
  return [regex](std::vector<Piece>& pieces) {
    split_pieces(pieces, Behavior::kRemoved, [&](const std::string& t) {
      return spans_from(t, true, [&](std::string_view text, auto&& emit) { regex->for_each_match(text, emit); });
    });
  };
}

}  // namespace megatron::tokenizer::detail
