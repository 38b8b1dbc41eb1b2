// tokenizer.json is read by hand because the tokenizers package is Rust with no C API; its
// regexes run on the same engine (Oniguruma) and its normal forms come from utf8proc.
#include "megatron/tokenizer/hf_tokenizer.h"

#include "added_tokens.h"
#include "bpe.h"
#include "hf_pipeline.h"
#include "input_files.h"
#include "megatron/tokenizer/gpt2_bpe.h"
#include "unicode_tables.h"
#include "utf8.h"

#include <c10/util/Exception.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <unordered_map>

namespace megatron::tokenizer {
namespace {

using json = nlohmann::json;
namespace fs = std::filesystem;

// A special-token entry of tokenizer_config.json: a string, or an object with "content".
std::string token_name(const json& v) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_object() && v.contains("content")) return v.at("content").get<std::string>();
  return "";
}

// A Hub name ("meta-llama/Meta-Llama-3-8B", as Megatron-LM scripts pass to AutoTokenizer) read
// from the local Hugging Face cache, as huggingface_hub lays it out offline:
// <cache>/models--<org>--<name>/refs/main holds the snapshot under <cache>/.../snapshots/.
// Returns "" when the name is not cached.
std::string cached_hub_snapshot(const std::string& name) {
  if (name.empty() || name.front() == '/' || name.front() == '.' || name.find('/') == std::string::npos) return "";
  auto env = [](const char* key) { return std::getenv(key) != nullptr ? std::string(std::getenv(key)) : ""; };
  fs::path cache;
  if (!env("HF_HUB_CACHE").empty()) {
    cache = env("HF_HUB_CACHE");
  } else if (!env("HF_HOME").empty()) {
    cache = fs::path(env("HF_HOME")) / "hub";
  } else {
    const std::string base = !env("XDG_CACHE_HOME").empty() ? env("XDG_CACHE_HOME") : env("HOME") + "/.cache";
    cache = fs::path(base) / "huggingface" / "hub";
  }
  std::string folder = "models--" + name;
  for (size_t at = folder.find('/'); at != std::string::npos; at = folder.find('/', at + 2))
    folder.replace(at, 1, "--");
  const fs::path repo = cache / folder;
  std::ifstream ref(repo / "refs" / "main");
  std::string snapshot;
  if (!(ref >> snapshot) || snapshot.find('/') != std::string::npos) return "";
  std::error_code ec;
  const fs::path dir = repo / "snapshots" / snapshot;
  return fs::is_directory(dir, ec) ? dir.string() : "";
}

}  // namespace

struct HuggingFaceTokenizer::Impl {
  std::string json_path, config_path;
  bool include_special_tokens = true;
  detail::Normalizer normalizer;
  detail::PreTokenizer pre_tokenizer;
  detail::Decoder decoder;
  bool byte_level = false;

  // The BPE model.
  std::unordered_map<std::string, int32_t> vocab;       // spelling -> id
  std::unordered_map<std::string, int32_t> byte_vocab;  // byte-level: a token's raw bytes -> id
  std::array<int32_t, 256> byte_ids{};                  // byte-level: each byte's one-character token
  std::array<int32_t, 256> fallback_ids{};              // byte_fallback: the <0xXX> tokens
  detail::MergeTable merges;
  int32_t unk_id = -1;
  bool fuse_unk = false, byte_fallback = false, ignore_merges = false;

  detail::AddedTokenSplitter raw_added, normalized_added;
  std::unordered_map<std::string, int32_t> added_ids;
  std::vector<std::string> id_to_token;
  std::vector<int32_t> prefix_ids, suffix_ids;  // the post-processor's tokens around a sequence
  int32_t eos = -1, bos = -1;
  uint64_t instance_id = detail::new_tokenizer_instance_id();

  void load(const json& j);
  void load_model(const json& model);
  void load_post_processor(const json& spec);
  int32_t lookup(const std::string& token) const {
    auto a = added_ids.find(token);
    if (a != added_ids.end()) return a->second;
    auto v = vocab.find(token);
    return v == vocab.end() ? -1 : v->second;
  }
  // --tokenizer-special-tokens (detail::add_special_token); one that tokenizer.json lists as an
  // added token already stays as it is listed.
  void add_special_tokens(const std::vector<std::string>& tokens) {
    for (const std::string& t : tokens) {
      if (t.empty() || added_ids.count(t)) continue;
      added_ids[t] = detail::add_special_token(
          t, raw_added, [&](const std::string& s) { return lookup(s); },
          [&](const std::string& s) {
            id_to_token.push_back(s);
            return static_cast<int32_t>(id_to_token.size() - 1);
          });
    }
  }
  void encode_word(std::string_view word, std::vector<int32_t>& out) const;
  void merge_word(std::string_view word, std::vector<int32_t>& out) const;
  void encode_text(std::string_view text, bool first, std::vector<int32_t>& out) const;
};

void HuggingFaceTokenizer::Impl::load_model(const json& model) {
  const std::string where = json_path + ": model";
  const std::string type = model.value("type", std::string("BPE"));
  TORCH_CHECK(type == "BPE", "[tokenizer] ", where, ": type '", type,
              "' is not supported (HuggingFaceTokenizer reads BPE models: GPT-2, Llama, Qwen, Mistral)");
  for (const char* unused : {"continuing_subword_prefix", "end_of_word_suffix"}) {
    TORCH_CHECK(!model.contains(unused) || model[unused].is_null() || model[unused] == "", "[tokenizer] ", where, ": ",
                unused, " is not supported");
  }
  TORCH_CHECK(!model.contains("dropout") || model["dropout"].is_null() || model["dropout"].get<double>() == 0.0,
              "[tokenizer] ", where, ": BPE dropout is for training a tokenizer; expected null");
  fuse_unk = model.value("fuse_unk", false);
  byte_fallback = model.value("byte_fallback", false);
  ignore_merges = model.value("ignore_merges", false);
  const json& v = model.at("vocab");
  TORCH_CHECK(v.is_object(), "[tokenizer] ", where, ": vocab: expected an object of token -> id");
  for (const auto& [token, id] : v.items()) {
    TORCH_CHECK(id.is_number_unsigned() && id.get<uint64_t>() < (1u << 30), "[tokenizer] ", where, ": vocab '",
                megatron::detail::excerpt(token), "': expected an id in [0, 2^30)");
    vocab[token] = id.get<int32_t>();
  }
  if (model.contains("unk_token") && model["unk_token"].is_string()) {
    auto it = vocab.find(model["unk_token"].get<std::string>());
    TORCH_CHECK(it != vocab.end(), "[tokenizer] ", where, ": unk_token '",
                megatron::detail::excerpt(model["unk_token"].get<std::string>()), "' is not in the vocab");
    unk_id = it->second;
  }
  for (int b = 0; b < 256; ++b) {
    char name[8];
    std::snprintf(name, sizeof(name), "<0x%02X>", b);
    auto f = vocab.find(name);
    fallback_ids[static_cast<size_t>(b)] = f == vocab.end() ? -1 : f->second;
    std::string spelled;
    detail::append_utf8(spelled, bytes_to_unicode()[static_cast<size_t>(b)]);
    auto s = vocab.find(spelled);
    byte_ids[static_cast<size_t>(b)] = s == vocab.end() ? -1 : s->second;
  }
  int32_t rank = 0;
  for (const json& m : model.at("merges")) {
    std::string left, right;
    if (m.is_array()) {  // tokenizers >= 0.20 writes [left, right]
      TORCH_CHECK(m.size() == 2, "[tokenizer] ", where, ": merge ", rank, ": expected [left, right]");
      left = m[0].get<std::string>();
      right = m[1].get<std::string>();
    } else {
      const std::string line = m.get<std::string>();
      const size_t sp = line.find(' ');
      TORCH_CHECK(sp != std::string::npos && line.find(' ', sp + 1) == std::string::npos, "[tokenizer] ", where,
                  ": merge ", rank, ": expected two tokens separated by one space, found '", line, "'");
      left = line.substr(0, sp);
      right = line.substr(sp + 1);
    }
    auto l = vocab.find(left), r = vocab.find(right), lr = vocab.find(left + right);
    TORCH_CHECK(l != vocab.end() && r != vocab.end() && lr != vocab.end(), "[tokenizer] ", where, ": merge ", rank,
                " '", left, " ", right, "' uses a token missing from the vocab");
    merges.add(l->second, r->second, rank++, lr->second);
  }
}

void HuggingFaceTokenizer::Impl::load_post_processor(const json& spec) {
  if (spec.is_null()) return;
  const std::string where = json_path + ": post_processor";
  const std::string type = spec.value("type", std::string());
  const detail::NestingGuard nesting(where);
  auto id_of = [&](const std::string& token) {
    const int32_t id = lookup(token);
    TORCH_CHECK(id >= 0, "[tokenizer] ", where, ": token '", megatron::detail::excerpt(token),
                "' is not in the vocabulary");
    return id;
  };
  if (type == "Sequence") {
    for (const json& p : spec.at("processors")) load_post_processor(p);
  } else if (type == "TemplateProcessing") {  // Llama's "<s> $A": the single-sequence template
    std::vector<int32_t> before, after;
    bool seen_a = false;
    for (const json& piece : spec.at("single")) {
      if (piece.contains("Sequence")) {
        TORCH_CHECK(piece["Sequence"].value("id", std::string("A")) == "A", "[tokenizer] ", where,
                    ": the single template may only hold sequence A");
        seen_a = true;
        continue;
      }
      const std::string name = piece.at("SpecialToken").at("id").get<std::string>();
      const json& entry = spec.at("special_tokens").at(name);
      for (const json& id : entry.at("ids")) (seen_a ? after : before).push_back(id.get<int32_t>());
    }
    prefix_ids.insert(prefix_ids.begin(), before.begin(), before.end());
    suffix_ids.insert(suffix_ids.end(), after.begin(), after.end());
  } else if (type == "BertProcessing" || type == "RobertaProcessing") {  // [CLS] A [SEP]
    prefix_ids.insert(prefix_ids.begin(), id_of(spec.at("cls").at(0).get<std::string>()));
    suffix_ids.push_back(id_of(spec.at("sep").at(0).get<std::string>()));
  } else {
    TORCH_CHECK(type == "ByteLevel", "[tokenizer] ", where, ": type '", type,
                "' is not supported (supported: TemplateProcessing, BertProcessing, RobertaProcessing, ByteLevel, "
                "Sequence)");
  }
}

void HuggingFaceTokenizer::Impl::load(const json& j) {
  TORCH_CHECK(j.is_object() && j.contains("model"), "[tokenizer] ", json_path,
              ": expected a tokenizer.json (an object with a \"model\")");
  load_model(j.at("model"));
  int64_t max_id = -1;
  for (const auto& [token, id] : vocab) max_id = std::max<int64_t>(max_id, id);
  std::vector<std::pair<detail::AddedToken, bool>> added;  // (token, normalized)
  for (const json& t : j.value("added_tokens", json::array())) {
    detail::AddedToken a;
    a.content = t.at("content").get<std::string>();
    TORCH_CHECK(t.at("id").is_number_unsigned() && t["id"].get<uint64_t>() < (1u << 30), "[tokenizer] ", json_path,
                ": added token '", megatron::detail::excerpt(a.content), "': expected an id in [0, 2^30)");
    a.id = t["id"].get<int32_t>();
    a.single_word = t.value("single_word", false);
    a.lstrip = t.value("lstrip", false);
    a.rstrip = t.value("rstrip", false);
    added_ids[a.content] = a.id;
    max_id = std::max<int64_t>(max_id, a.id);
    added.emplace_back(std::move(a), t.value("normalized", !t.value("special", false)));
  }
  normalizer = detail::build_normalizer(j.value("normalizer", json()), json_path + ": normalizer");
  pre_tokenizer =
      detail::build_pre_tokenizer(j.value("pre_tokenizer", json()), json_path + ": pre_tokenizer", byte_level);
  decoder = detail::build_decoder(j.value("decoder", json()), json_path + ": decoder");
  for (auto& [token, normalized] : added) {
    // A normalized added token is matched in normalized text, so its content is normalized too.
    if (normalized && normalizer) normalizer(token.content);
    (normalized ? normalized_added : raw_added).add(token);
  }
  load_post_processor(j.value("post_processor", json()));

  // Real vocabularies are dense; a far-off id in a corrupt file must not size a huge table.
  const size_t listed = vocab.size() + added_ids.size();
  TORCH_CHECK(max_id < static_cast<int64_t>(listed) + (1 << 20), "[tokenizer] ", json_path, ": token ids reach ",
              max_id, " but only ", listed, " tokens are listed (gaps over 2^20 ids are refused)");
  id_to_token.assign(static_cast<size_t>(max_id + 1), std::string());
  for (const auto& [token, id] : vocab) id_to_token[static_cast<size_t>(id)] = token;
  for (const auto& [token, id] : added_ids) id_to_token[static_cast<size_t>(id)] = token;
  for (const auto* ids : {&prefix_ids, &suffix_ids}) {
    for (int32_t id : *ids)
      TORCH_CHECK(id >= 0 && id <= max_id, "[tokenizer] ", json_path, ": post_processor: token id ", id,
                  " is outside the vocabulary [0, ", max_id + 1, ")");
  }
  if (byte_level) {
    std::string bytes;
    for (const auto& [token, id] : vocab) {
      if (detail::byte_level_bytes(token, bytes)) byte_vocab.emplace(bytes, id);
    }
  }
}

// One word through the model: its characters' tokens (byte fallback or unk for unknown ones),
// then the merges. Byte-level words arrive as raw bytes, each standing for its mapped character.
void HuggingFaceTokenizer::Impl::merge_word(std::string_view word, std::vector<int32_t>& out) const {
  std::vector<int32_t> ids;
  ids.reserve(word.size());
  bool pending_unk = false;
  std::string symbol;
  size_t len = 1;
  for (size_t i = 0; i < word.size(); i += len) {
    int32_t id;
    if (byte_level) {
      len = 1;
      const auto b = static_cast<unsigned char>(word[i]);
      id = byte_ids[b];
      symbol.clear();
      detail::append_utf8(symbol, bytes_to_unicode()[b]);
    } else {
      detail::decode_utf8(word, i, len);
      symbol.assign(word.substr(i, len));
      auto it = vocab.find(symbol);
      id = it == vocab.end() ? -1 : it->second;
    }
    if (id >= 0) {
      if (pending_unk) ids.push_back(unk_id);
      pending_unk = false;
      ids.push_back(id);
      continue;
    }
    if (byte_fallback && std::all_of(symbol.begin(), symbol.end(),
                                     [&](char c) { return fallback_ids[static_cast<unsigned char>(c)] >= 0; })) {
      for (char c : symbol) ids.push_back(fallback_ids[static_cast<unsigned char>(c)]);
      continue;
    }
    if (unk_id < 0) continue;  // no unk token: tokenizers drops the character
    if (pending_unk && !fuse_unk) ids.push_back(unk_id);
    pending_unk = true;
  }
  if (pending_unk) ids.push_back(unk_id);
  detail::bpe_merge(ids, merges);
  out.insert(out.end(), ids.begin(), ids.end());
}

void HuggingFaceTokenizer::Impl::encode_word(std::string_view word, std::vector<int32_t>& out) const {
  if (ignore_merges) {  // a word that is a token is that token (Llama 3)
    const auto& table = byte_level ? byte_vocab : vocab;
    auto it = table.find(std::string(word));
    if (it != table.end()) {
      out.push_back(it->second);
      return;
    }
  }
  detail::cached_encode(instance_id, word, out,
                        [this](std::string_view w, std::vector<int32_t>& o) { merge_word(w, o); });
}

// Text between added tokens: normalized, split on normalized added tokens, pre-tokenized, encoded.
void HuggingFaceTokenizer::Impl::encode_text(std::string_view text, bool first, std::vector<int32_t>& out) const {
  std::string normal(text);
  if (normalizer) normalizer(normal);
  auto words = [&](size_t b, size_t e) {
    std::vector<detail::Piece> pieces{{normal.substr(b, e - b), first && b == 0}};
    if (pre_tokenizer) pre_tokenizer(pieces);
    for (const detail::Piece& p : pieces) encode_word(p.text, out);
  };
  if (normalized_added.empty()) {
    if (!normal.empty()) words(0, normal.size());
    return;
  }
  normalized_added.split(normal, words, [&](int32_t id) { out.push_back(id); });
}

HuggingFaceTokenizer::HuggingFaceTokenizer(const std::string& model, bool include_special_tokens,
                                           const std::vector<std::string>& special_tokens)
    : impl_(std::make_unique<Impl>()) {
  std::error_code ec;  // the non-throwing forms: a filesystem error is the same missing-file message
  std::string path = model;
  if (!fs::exists(path, ec)) path = cached_hub_snapshot(model);
  TORCH_CHECK(!path.empty() && fs::exists(path, ec), "[tokenizer] --tokenizer-model ", model,
              ": no such file or folder, and no Hugging Face cache snapshot of that name (there is no network "
              "access: download the tokenizer folder, or run huggingface-cli download, and pass it)");
  const fs::path json_file = fs::is_directory(path, ec) ? fs::path(path) / "tokenizer.json" : fs::path(path);
  TORCH_CHECK(fs::is_regular_file(json_file, ec), "[tokenizer] --tokenizer-model ", path,
              ": expected a tokenizer.json in the folder (the fast tokenizer's file; a folder with only a slow "
              "tokenizer's files is not supported)");
  impl_->json_path = json_file.string();
  const fs::path config = json_file.parent_path() / "tokenizer_config.json";
  if (fs::is_regular_file(config, ec)) impl_->config_path = config.string();
  impl_->include_special_tokens = include_special_tokens;
  json j, cfg;
  try {
    for (auto [file, into] : {std::pair{&impl_->json_path, &j}, {&impl_->config_path, &cfg}})
      if (!file->empty())
        *into = megatron::detail::parse_json(detail::read_whole_file(*file, "Hugging Face tokenizer"),
                                             detail::tokenizer_file(*file, "Hugging Face tokenizer"));
    impl_->load(j);
    impl_->add_special_tokens(special_tokens);
    for (auto [key, id] : {std::pair{"eos_token", &impl_->eos}, {"bos_token", &impl_->bos}}) {
      const std::string name = cfg.is_object() && cfg.contains(key) ? token_name(cfg[key]) : "";
      if (!name.empty()) *id = impl_->lookup(name);
    }
  } catch (const json::exception& e) {  // a missing field, a wrong type, or not JSON at all
    TORCH_CHECK(false, "[tokenizer] ", impl_->json_path, " (or its tokenizer_config.json): ", e.what());
  }
  // Without a tokenizer_config.json: the end-of-text tokens the families' tokenizer.json files hold.
  for (const char* name : {"<|endoftext|>", "<|end_of_text|>", "</s>"}) {
    if (impl_->eos < 0) impl_->eos = impl_->lookup(name);
  }
  for (const char* name : {"<|begin_of_text|>", "<s>"}) {
    if (impl_->bos < 0) impl_->bos = impl_->lookup(name);
  }
}

HuggingFaceTokenizer::~HuggingFaceTokenizer() = default;

void HuggingFaceTokenizer::tokenize_into(std::string_view text, std::vector<int32_t>& out) const {
  std::string replaced;
  text = detail::as_valid_utf8(text, replaced);
  const Impl& m = *impl_;
  if (m.include_special_tokens) out.insert(out.end(), m.prefix_ids.begin(), m.prefix_ids.end());
  if (m.raw_added.empty()) {
    if (!text.empty()) m.encode_text(text, true, out);
  } else {
    m.raw_added.split(
        text, [&](size_t b, size_t e) { m.encode_text(text.substr(b, e - b), b == 0, out); },
        [&](int32_t id) { out.push_back(id); });
  }
  if (m.include_special_tokens) out.insert(out.end(), m.suffix_ids.begin(), m.suffix_ids.end());
}

std::string HuggingFaceTokenizer::detokenize(const std::vector<int32_t>& ids) const {
  std::vector<std::string> tokens;
  tokens.reserve(ids.size());
  for (int32_t id : ids) {
    TORCH_CHECK(id >= 0 && static_cast<size_t>(id) < impl_->id_to_token.size(), "[tokenizer] token id ", id,
                " outside the vocabulary [0, ", impl_->id_to_token.size(), ")");
    tokens.push_back(impl_->id_to_token[static_cast<size_t>(id)]);
  }
  impl_->decoder(tokens);
  std::string out;
  for (const std::string& t : tokens) out += t;
  return out;
}

int64_t HuggingFaceTokenizer::vocab_size() const {
  return static_cast<int64_t>(impl_->id_to_token.size());
}
int32_t HuggingFaceTokenizer::eod() const {
  return impl_->eos;
}
int32_t HuggingFaceTokenizer::bos() const {
  return impl_->bos;
}
int32_t HuggingFaceTokenizer::token_to_id(const std::string& token) const {
  return impl_->lookup(token);
}
const std::string& HuggingFaceTokenizer::id_to_token(int32_t id) const {
  TORCH_CHECK(id >= 0 && static_cast<size_t>(id) < impl_->id_to_token.size(), "[tokenizer] token id ", id,
              " outside the vocabulary [0, ", impl_->id_to_token.size(), ")");
  return impl_->id_to_token[static_cast<size_t>(id)];
}
const std::string& HuggingFaceTokenizer::tokenizer_json() const {
  return impl_->json_path;
}
const std::string& HuggingFaceTokenizer::tokenizer_config() const {
  return impl_->config_path;
}

}  // namespace megatron::tokenizer
