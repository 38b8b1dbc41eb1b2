// JSONL -> Megatron .bin/.idx, one document per line, as Megatron-LM's tools/preprocess_data.py:
// {output_prefix}_{key}_document.bin/.idx per --json-keys key (_sentence with --split-sentences,
// each sentence a sequence). Worker threads tokenize batches of lines; documents are written in
// input order, or with --partitions N in the order Megatron-LM's merge of its N partitions gives
// (partition p holds lines p, p + N, ...).
#include "cli.h"
#include "json_lines.h"
#include "megatron/datasets/indexed_dataset.h"
#include "megatron/tokenizer/punkt.h"
#include "megatron/tokenizer/tokenizer.h"

#include <c10/util/Exception.h>

#include <sys/stat.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace {

using megatron::datasets::DType;
using megatron::datasets::IndexedDatasetBuilder;
using nlohmann::json;

struct Args {
  std::string input, output_prefix;
  std::vector<std::string> json_keys{"text"};
  megatron::tokenizer::TokenizerOptions tokenizer;
  bool tokenizer_hf_no_include_special_tokens = false;
  bool append_eod = false;
  bool skip_malformed = false;
  int workers = 1;
  int64_t log_interval = 1000;
  int64_t batch_lines = 4096;
  int64_t partitions = 1;
  bool keep_sequential_samples = false;
  bool split_sentences = false;
  bool keep_newlines = false;
  std::string lang = "english";
};

struct Encoded {
  bool ok = true;
  bool blank = false;
  std::string error;
  // Per key: the document's tokens and its sentence lengths.
  std::vector<std::vector<int32_t>> tokens;
  std::vector<std::vector<int64_t>> lengths;
};

// One JSONL line, as Megatron's Encoder.encode: a string is one sentence (or, with a splitter,
// the sentences punkt finds in it), a list of strings several; empty sentences vanish; EOD goes
// after the last one when asked.
Encoded encode_line(const std::string& line, const Args& args, const megatron::tokenizer::Tokenizer& tok,
                    const megatron::tokenizer::PunktSentenceSplitter* splitter) {
  Encoded e;
  if (line.find_first_not_of(" \t\r") == std::string::npos) {
    e.blank = true;
    return e;
  }
  json doc;
  try {
    doc = json::parse(line);
  } catch (const json::exception& err) {  // parse errors, and numbers out of range
    e.ok = false;
    e.error = "malformed JSON: " + json_error_text(err);
    return e;
  }
  if (!doc.is_object()) {
    e.ok = false;
    e.error = "expected a JSON object per line";
    return e;
  }
  for (const auto& key : args.json_keys) {
    auto found = doc.find(key);
    const json* v = found == doc.end() ? nullptr : &*found;
    std::vector<std::string_view> sentences;
    auto add = [&](const std::string& text) {
      if (!splitter) {
        sentences.push_back(text);
        return;
      }
      for (std::string_view s : splitter->split(text)) sentences.push_back(s);
    };
    if (v != nullptr && v->is_string()) {
      add(v->get_ref<const std::string&>());
    } else if (v != nullptr && v->is_array()) {
      for (const auto& s : *v) {
        if (!s.is_string()) {
          sentences.clear();
          v = nullptr;
          break;
        }
        add(s.get_ref<const std::string&>());
      }
    } else {
      v = nullptr;
    }
    if (v == nullptr) {
      e.ok = false;
      e.error = "key '" + key + "' missing or not a string / list of strings";
      return e;
    }
    std::vector<int32_t> ids;
    std::vector<int64_t> lens;
    for (std::string_view s : sentences) {
      const size_t before = ids.size();
      tok.tokenize_into(s, ids);
      if (ids.size() > before) lens.push_back(static_cast<int64_t>(ids.size() - before));
    }
    if (!ids.empty() && args.append_eod) {
      ids.push_back(tok.eod());
      lens.back() += 1;
    }
    e.tokens.push_back(std::move(ids));
    e.lengths.push_back(std::move(lens));
  }
  return e;
}

// Persistent workers (their per-thread BPE caches stay warm) splitting each batch of lines.
class Pool {
 public:
  Pool(int n, const Args& args, const megatron::tokenizer::Tokenizer& tok,
       const megatron::tokenizer::PunktSentenceSplitter* splitter)
      : args_(args), tok_(tok), splitter_(splitter) {
    for (int w = 0; w < n; ++w) threads_.emplace_back([this, w, n] { run(w, n); });
  }
  ~Pool() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stop_ = true;
    }
    cv_.notify_all();
    for (auto& t : threads_) t.join();
  }
  // Starts encoding lines into out; the caller may read the next batch meanwhile.
  void submit(const std::vector<std::string>& lines, std::vector<Encoded>& out) {
    std::lock_guard<std::mutex> lock(mutex_);
    lines_ = &lines;
    out_ = &out;
    out.assign(lines.size(), Encoded());
    next_.store(0);
    pending_ = static_cast<int>(threads_.size());
    ++generation_;
    cv_.notify_all();
  }
  void wait() {
    std::unique_lock<std::mutex> lock(mutex_);
    done_cv_.wait(lock, [this] { return pending_ == 0; });
  }

 private:
  void run(int, int) {
    uint64_t seen = 0;
    while (true) {
      {
        std::unique_lock<std::mutex> lock(mutex_);
        cv_.wait(lock, [&] { return stop_ || generation_ != seen; });
        if (stop_) return;
        seen = generation_;
      }
      // Lines are claimed in small chunks so uneven documents balance out.
      const size_t n = lines_->size();
      while (true) {
        const size_t begin = next_.fetch_add(16);
        if (begin >= n) break;
        for (size_t i = begin; i < std::min(n, begin + 16); ++i) {
          try {
            (*out_)[i] = encode_line((*lines_)[i], args_, tok_, splitter_);
          } catch (const c10::Error& err) {
            (*out_)[i].ok = false;
            (*out_)[i].error = err.what_without_backtrace();
          }
        }
      }
      std::lock_guard<std::mutex> lock(mutex_);
      if (--pending_ == 0) done_cv_.notify_all();
    }
  }

  const Args& args_;
  const megatron::tokenizer::Tokenizer& tok_;
  const megatron::tokenizer::PunktSentenceSplitter* splitter_;
  std::vector<std::thread> threads_;
  std::mutex mutex_;
  std::condition_variable cv_, done_cv_;
  const std::vector<std::string>* lines_ = nullptr;
  std::vector<Encoded>* out_ = nullptr;
  std::atomic<size_t> next_{0};
  int pending_ = 0;
  uint64_t generation_ = 0;
  bool stop_ = false;
};

int run(const Args& args) {
  // Megatron-LM ignores it without --split-sentences; so do we, saying so.
  if (args.keep_newlines && !args.split_sentences)
    std::fprintf(stderr, "[preprocess_data] warning: --keep-newlines has no effect without --split-sentences\n");
  std::unique_ptr<megatron::tokenizer::PunktSentenceSplitter> splitter;
  if (args.split_sentences)
    splitter = std::make_unique<megatron::tokenizer::PunktSentenceSplitter>(
        megatron::tokenizer::PunktSentenceSplitter::find_model(args.lang), args.keep_newlines);
  megatron::tokenizer::TokenizerOptions options = args.tokenizer;
  options.include_special_tokens = !args.tokenizer_hf_no_include_special_tokens;
  auto tok = megatron::tokenizer::build_tokenizer(options);
  const DType dtype = megatron::datasets::optimal_dtype(tok->vocab_size());
  TORCH_CHECK(!args.append_eod || tok->eod() >= 0,
              "[preprocess_data] --append-eod: the tokenizer has no end-of-document token (GPT-2's <|endoftext|>, "
              "or the eos_token of the tokenizer_config.json beside a tokenizer.json)");
  struct stat st {};
  TORCH_CHECK(::stat(args.input.c_str(), &st) == 0, "[preprocess_data] --input ", args.input, ": ",
              std::strerror(errno));
  TORCH_CHECK(!S_ISDIR(st.st_mode), "[preprocess_data] --input ", args.input,
              ": is a directory; expected a JSONL file, one document per line");
  std::ifstream in(args.input, std::ios::binary);
  TORCH_CHECK(in, "[preprocess_data] --input ", args.input, ": cannot open for reading");
  // Megatron-LM deals the lines out to its partitions in turn and merges the partitions' outputs
  // in order: one pass over the file per partition gives that order without partition files.
  // With --keep-sequential-samples its partitions are consecutive runs of lines: input order.
  const int64_t passes = args.keep_sequential_samples ? 1 : args.partitions;
  int64_t pass = 0, file_line = 0;  // file_line: lines read in this pass

  std::vector<std::unique_ptr<IndexedDatasetBuilder>> builders;
  std::vector<std::string> idx_paths;
  for (const auto& key : args.json_keys) {
    const std::string prefix = args.output_prefix + "_" + key + (splitter ? "_sentence" : "_document");
    builders.push_back(std::make_unique<IndexedDatasetBuilder>(prefix + ".bin", dtype));
    idx_paths.push_back(prefix + ".idx");
  }
  Pool pool(args.workers, args, *tok, splitter.get());
  const auto start = std::chrono::steady_clock::now();
  int64_t line_no = 0, docs = 0, bytes = 0, malformed = 0, blank = 0, tokens = 0;
  int64_t next_log = args.log_interval;
  // Two batches in flight: workers encode one while this thread reads the next and writes the
  // previous one, in input order.
  std::vector<std::string> lines[2];
  std::vector<int64_t> numbers[2];  // each line's number in the file, for messages
  std::vector<Encoded> encoded[2];
  auto read_batch = [&](std::vector<std::string>& batch, std::vector<int64_t>& batch_numbers) {
    batch.clear();
    batch_numbers.clear();
    std::string line;
    while (static_cast<int64_t>(batch.size()) < args.batch_lines) {
      if (!std::getline(in, line)) {
        TORCH_CHECK(!in.bad(), "[preprocess_data] --input ", args.input, ": read failed after ", file_line, " lines");
        if (++pass >= passes) break;
        in.clear();
        in.seekg(0);
        file_line = 0;
        continue;
      }
      if (file_line++ % passes != pass) continue;
      bytes += static_cast<int64_t>(line.size()) + 1;
      batch.push_back(std::move(line));
      batch_numbers.push_back(file_line);
    }
    return !batch.empty();
  };
  auto elapsed = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(); };
  auto write_batch = [&](const std::vector<Encoded>& batch, const std::vector<int64_t>& batch_numbers) {
    for (size_t i = 0; i < batch.size(); ++i) {
      const Encoded& e = batch[i];
      line_no = batch_numbers[i];
      if (e.blank) {
        ++blank;
        continue;
      }
      if (!e.ok) {
        ++malformed;
        TORCH_CHECK(args.skip_malformed, "[preprocess_data] ", args.input, ":", line_no, ": ", e.error,
                    " (pass --skip-malformed to skip such lines and count them)");
        if (malformed <= 10) {
          std::cerr << "[preprocess_data] " << args.input << ":" << line_no << ": skipped: " << e.error << "\n";
        }
        continue;
      }
      for (size_t k = 0; k < builders.size(); ++k) {
        builders[k]->add_document(e.tokens[k], e.lengths[k]);
        tokens += static_cast<int64_t>(e.tokens[k].size());
      }
      if (++docs >= next_log) {
        next_log += args.log_interval;
        const double t = elapsed();
        std::fprintf(stderr, "Processed %lld documents (%.1f docs/s, %.2f MB/s).\n", static_cast<long long>(docs),
                     docs / t, bytes / t / 1024 / 1024);
      }
    }
  };
  int cur = 0;
  bool more = read_batch(lines[cur], numbers[cur]);
  while (more) {
    pool.submit(lines[cur], encoded[cur]);
    more = read_batch(lines[1 - cur], numbers[1 - cur]);
    pool.wait();
    write_batch(encoded[cur], numbers[cur]);
    cur = 1 - cur;
  }
  for (size_t k = 0; k < builders.size(); ++k) builders[k]->finalize(idx_paths[k]);
  if (docs == 0)
    std::fprintf(stderr, "[preprocess_data] warning: --input %s holds no documents; the dataset written is empty\n",
                 args.input.c_str());
  const double t = elapsed();
  std::fprintf(stderr,
               "Done: %lld documents, %lld tokens, %lld malformed lines skipped, %lld blank "
               "lines in %.2f s (%.1f docs/s, %.2f MB/s).\n",
               static_cast<long long>(docs), static_cast<long long>(tokens), static_cast<long long>(malformed),
               static_cast<long long>(blank), t, docs / t, bytes / t / 1024 / 1024);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Args args;
  CLI::App app{"Tokenize a JSONL corpus into Megatron .bin/.idx files"};
  app.add_option("--input", args.input, "JSONL file, one document per line")->required();
  app.add_option("--json-keys", args.json_keys, "keys to extract (default: text)");
  app.add_option("--output-prefix", args.output_prefix,
                 "writes {prefix}_{key}_document.bin/.idx ({prefix}_{key}_sentence with --split-sentences)")
      ->required();
  app.add_option("--tokenizer-type", args.tokenizer.tokenizer_type,
                 "GPT2BPETokenizer | HuggingFaceTokenizer | TikTokenizer | SentencePieceTokenizer | "
                 "GPTSentencePieceTokenizer | Llama2Tokenizer | NullTokenizer")
      ->required();
  app.add_option("--vocab-file", args.tokenizer.vocab_file, "vocab.json (GPT2BPETokenizer)");
  app.add_option("--merge-file", args.tokenizer.merge_file, "merges.txt (GPT2BPETokenizer)");
  app.add_option("--tokenizer-model", args.tokenizer.tokenizer_model,
                 "a tokenizer.json or the folder holding it (HuggingFaceTokenizer); Megatron-LM's tiktoken JSON "
                 "(TikTokenizer); a .model file (the SentencePiece types)");
  app.add_flag("--tokenizer-hf-no-include-special-tokens", args.tokenizer_hf_no_include_special_tokens,
               "leave out the post-processor's tokens (BOS/EOS) (HuggingFaceTokenizer)");
  app.add_option("--vocab-size", args.tokenizer.vocab_size,
                 "vocabulary size (NullTokenizer; TikTokenizer with its special tokens, default 131072)");
  app.add_option("--tiktoken-pattern", args.tokenizer.tiktoken_pattern, "v1 | v2 (TikTokenizer)")
      ->check(CLI::IsMember({"v1", "v2"}));
  app.add_option("--tiktoken-num-special-tokens", args.tokenizer.tiktoken_num_special_tokens,
                 "special tokens before the vocabulary (TikTokenizer)");
  app.add_option("--tokenizer-special-tokens", args.tokenizer.special_tokens,
                 "TikTokenizer: its special tokens in id order (the seven defaults among them); HuggingFaceTokenizer, "
                 "GPT2BPETokenizer: tokens added after the vocabulary, matched whole in the text");
  app.add_flag("--append-eod", args.append_eod, "append the EOD token to every document");
  app.add_option("--workers", args.workers, "tokenizer threads")->check(CLI::Range(1, 1024));
  app.add_option("--log-interval", args.log_interval, "documents between progress lines")->check(CLI::PositiveNumber);
  app.add_option("--batch-lines", args.batch_lines, "lines read per batch")->check(CLI::PositiveNumber);
  app.add_flag("--skip-malformed", args.skip_malformed,
               "skip and count malformed lines instead of stopping at the first");
  app.add_option("--partitions", args.partitions,
                 "write documents in the order Megatron-LM's N merged partitions give (line p, p + N, ... first)")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 20));
  app.add_flag("--keep-sequential-samples", args.keep_sequential_samples,
               "with --partitions: partitions of consecutive lines, so documents stay in input order");
  app.add_flag("--split-sentences", args.split_sentences,
               "split each text into sentences with NLTK's punkt model (punkt_tab, found as NLTK finds it: "
               "NLTK_DATA, ~/nltk_data, /usr/share/nltk_data, ...), one sequence each");
  app.add_flag("--keep-newlines", args.keep_newlines,
               "with --split-sentences: keep the whitespace after each sentence (newlines included) in it");
  app.add_option("--lang", args.lang, "punkt model for --split-sentences (default english)");
  return run_tool(app, "preprocess_data", argc, argv, [&] { return run(args); });
}
