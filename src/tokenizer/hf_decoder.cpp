// tokenizer.json decoders, each as the tokenizers package's decode_chain transforms the tokens.
#include "bpe.h"
#include "hf_pipeline.h"
#include "megatron/tokenizer/gpt2_bpe.h"
#include "utf8.h"

#include <c10/util/Exception.h>
#include <nlohmann/json.hpp>

namespace megatron::tokenizer::detail {
namespace {

using json = nlohmann::json;

// "<0xAB>" -> 0xAB, or -1.
int byte_token(const std::string& t) {
  if (t.size() != 6 || t.compare(0, 3, "<0x") != 0 || t[5] != '>') return -1;
  int v = 0;
  for (int i = 3; i < 5; ++i) {
    const char c = t[static_cast<size_t>(i)];
    const int d = c >= '0' && c <= '9'   ? c - '0'
                  : c >= 'A' && c <= 'F' ? c - 'A' + 10
                  : c >= 'a' && c <= 'f' ? c - 'a' + 10
                                         : -1;
    if (d < 0) return -1;
    v = v * 16 + d;
  }
  return v;
}

std::string replace_all(const std::string& s, const std::string& from, const std::string& to) {
  if (from.empty()) return s;
  std::string out;
  size_t prev = 0;
  for (size_t at = s.find(from); at != std::string::npos; at = s.find(from, prev)) {
    out.append(s, prev, at - prev);
    out += to;
    prev = at + from.size();
  }
  out.append(s, prev, std::string::npos);
  return out;
}

}  // namespace

Decoder build_decoder(const json& spec, const std::string& where) {
  if (spec.is_null()) {  // no decoder: tokens joined by spaces
    return [](std::vector<std::string>& tokens) {
      for (size_t i = 1; i < tokens.size(); ++i) tokens[i].insert(0, 1, ' ');
    };
  }
  TORCH_CHECK(spec.is_object() && spec.contains("type"), "[tokenizer] ", where, ": expected an object with a \"type\"");
  const NestingGuard nesting(where);
  const std::string type = spec.at("type").get<std::string>();
  if (type == "Sequence") {
    std::vector<Decoder> steps;
    for (const json& d : spec.at("decoders")) steps.push_back(build_decoder(d, where));
    return [steps](std::vector<std::string>& tokens) {
      for (const auto& d : steps) d(tokens);
    };
  }
  if (type == "ByteLevel") {  // each token's characters back to bytes; a token with an unmapped one stays as it is
    return [](std::vector<std::string>& tokens) {
      std::string out, bytes;
      for (const std::string& t : tokens) out += byte_level_bytes(t, bytes) ? bytes : t;
      tokens.assign(1, out);
    };
  }
  if (type == "Metaspace") {  // the replacement back to spaces, dropped from the first token
    const std::string replacement = one_character(spec, "replacement", where);
    std::string scheme = spec.value("prepend_scheme", std::string());
    if (scheme.empty()) scheme = spec.value("add_prefix_space", true) ? "always" : "never";
    const bool strip_first = scheme != "never";
    return [replacement, strip_first](std::vector<std::string>& tokens) {
      for (size_t i = 0; i < tokens.size(); ++i)
        tokens[i] = replace_all(tokens[i], replacement, i == 0 && strip_first ? "" : " ");
    };
  }
  if (type == "Replace") {
    const json& pattern = spec.at("pattern");
    TORCH_CHECK(pattern.contains("String"), "[tokenizer] ", where,
                ": a Replace decoder with a Regex pattern is not supported");
    const std::string from = pattern.at("String").get<std::string>(), to = spec.at("content").get<std::string>();
    return [from, to](std::vector<std::string>& tokens) {
      for (std::string& t : tokens) t = replace_all(t, from, to);
    };
  }
  if (type == "ByteFallback") {  // runs of <0xXX> tokens become their bytes, or one U+FFFD per byte if not UTF-8
    return [](std::vector<std::string>& tokens) {
      std::vector<std::string> out;
      std::string run;
      size_t run_len = 0;
      auto flush = [&] {
        if (run_len == 0) return;
        if (is_valid_utf8(run)) {
          out.push_back(run);
        } else {
          for (size_t i = 0; i < run_len; ++i) out.emplace_back("\xEF\xBF\xBD");
        }
        run.clear();
        run_len = 0;
      };
      for (std::string& t : tokens) {
        const int b = byte_token(t);
        if (b >= 0) {
          run.push_back(static_cast<char>(b));
          ++run_len;
        } else {
          flush();
          out.push_back(std::move(t));
        }
      }
      flush();
      tokens.swap(out);
    };
  }
  if (type == "Fuse") {
    return [](std::vector<std::string>& tokens) {
      std::string all;
      for (const std::string& t : tokens) all += t;
      tokens.assign(1, all);
    };
  }
  TORCH_CHECK(type == "Strip", "[tokenizer] ", where, ": decoder type '", type,
              "' is not supported (supported: ByteLevel, Metaspace, Replace, ByteFallback, Fuse, Strip, Sequence)");
  // Strip: up to `start` leading and `stop` trailing copies of one character per token
  const std::string content = spec.at("content").get<std::string>();
  const int64_t start = spec.value("start", int64_t{0}), stop = spec.value("stop", int64_t{0});
  return [content, start, stop](std::vector<std::string>& tokens) {
    if (content.empty()) return;
    for (std::string& t : tokens) {
      size_t b = 0, e = t.size();
      for (int64_t k = 0; k < start && t.compare(b, content.size(), content) == 0 && b < e; ++k) b += content.size();
      for (int64_t k = 0;
           k < stop && e >= b + content.size() && t.compare(e - content.size(), content.size(), content) == 0; ++k)
        e -= content.size();
      t = t.substr(b, e - b);
    }
  };
}

}  // namespace megatron::tokenizer::detail
