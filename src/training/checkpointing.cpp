// Saving and loading Megatron-LM's legacy checkpoints; the protocol is in docs/checkpoints.md.
#include "megatron/training/checkpointing.h"

#include <ATen/ATen.h>
#include <ATen/core/Generator.h>
#include <c10/util/Exception.h>
#include <torch/nn/module.h>
#include <torch/optim/optimizer.h>

#include <fcntl.h>
#include <ftw.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <regex>
#include <set>
#include <sstream>

#include "crc32.h"
#include "megatron/comm/launcher_env.h"
#include "megatron/logging.h"
#include "megatron/models/common/serialization.h"
#include "megatron/models/gpt/gpt_model.h"
#include "megatron/optimizer/optimizer.h"
#include "megatron/optimizer/param_scheduler.h"
#include "megatron/tensor_parallel/random.h"

namespace megatron::training {
namespace fs = std::filesystem;
namespace {

using GenericDict = c10::impl::GenericDict;
using GenericList = c10::impl::GenericList;

GenericDict new_dict() { return GenericDict(c10::StringType::get(), c10::AnyType::get()); }
GenericList new_list() { return GenericList(c10::AnyType::get()); }

std::string errno_text() { return std::strerror(errno); }

// fsync of a folder makes the names created or renamed in it durable.
void fsync_dir(const std::string& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  TORCH_CHECK(fd >= 0, "[checkpointing] cannot open folder ", dir, ": ", errno_text());
  const int rc = ::fsync(fd);
  const std::string err = errno_text();
  ::close(fd);
  TORCH_CHECK(rc == 0, "[checkpointing] fsync of folder ", dir, " failed: ", err);
}

// A file written through a descriptor: every write checked, fsync'ed before close.
class FileWriter {
 public:
  explicit FileWriter(std::string path) : path_(std::move(path)) {
    fd_ = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    TORCH_CHECK(fd_ >= 0, "[checkpointing] cannot create ", path_, ": ", errno_text());
  }
  ~FileWriter() {
    if (fd_ >= 0) {
      ::close(fd_);
      ::unlink(path_.c_str());  // failed midway: free the space, the name was temporary anyway
    }
  }
  void write(const void* data, size_t size) {
    const char* p = static_cast<const char*>(data);
    crc_ = crc32_update(crc_, p, size);
    while (size > 0) {
      const ssize_t n = ::write(fd_, p, size);
      if (n < 0 && errno == EINTR) continue;
      TORCH_CHECK(n > 0, "[checkpointing] writing ", path_, " failed after ", bytes_, " bytes: ", errno_text());
      p += n;
      size -= static_cast<size_t>(n);
      bytes_ += static_cast<uint64_t>(n);
    }
  }
  WrittenFile close() {
    TORCH_CHECK(::fsync(fd_) == 0, "[checkpointing] fsync of ", path_, " failed: ", errno_text());
    const int rc = ::close(fd_);
    fd_ = -1;
    TORCH_CHECK(rc == 0, "[checkpointing] closing ", path_, " failed: ", errno_text());
    return {path_, bytes_, crc_};
  }
  uint64_t bytes() const { return bytes_; }

 private:
  std::string path_;
  int fd_ = -1;
  uint64_t bytes_ = 0;
  uint32_t crc_ = 0;
};

void write_text_file(const std::string& path, const std::string& text) {
  FileWriter w(path);
  w.write(text.data(), text.size());
  w.close();
}

// name -> (bytes, crc32) from a rank folder's checksums.txt; empty when there is none.
std::map<std::string, std::pair<uint64_t, uint32_t>> read_checksums(const std::string& dir) {
  std::map<std::string, std::pair<uint64_t, uint32_t>> out;
  const std::string path = dir + "/" + kChecksumFileName;
  std::ifstream in(path);
  if (!in) return out;
  std::string name, crc;
  uint64_t bytes = 0;
  while (in >> name >> bytes >> crc) out[name] = {bytes, static_cast<uint32_t>(std::stoul(crc, nullptr, 16))};
  TORCH_CHECK(in.eof(), "[checkpointing] ", path, " is malformed; expected lines '<file> <bytes> <crc32 hex>'");
  return out;
}

uint32_t file_crc32(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  TORCH_CHECK(in, "[checkpointing] cannot read ", path);
  std::vector<char> buffer(8 << 20);
  uint32_t crc = 0;
  while (in) {
    in.read(buffer.data(), static_cast<std::streamsize>(buffer.size()));
    crc = crc32_update(crc, buffer.data(), static_cast<size_t>(in.gcount()));
  }
  return crc;
}

// Runs fn; returns its error message ("" when it succeeded).
template <typename F>
std::string capture(F&& fn) {
  try {
    fn();
  } catch (const c10::Error& e) {
    return e.what_without_backtrace();
  } catch (const std::exception& e) {
    return std::string("[checkpointing] ") + e.what();
  }
  return "";
}

// Every rank learns whether any failed; all throw then, the failing one with its own message.
void agree(comm::ProcessGroup& world, const std::string& error, const std::string& what) {
  auto flag = at::full({1}, error.empty() ? 0.0 : static_cast<double>(world.rank() + 1), at::kDouble);
  world.all_reduce(flag, comm::ReduceOp::kMax);
  const int failed = static_cast<int>(flag.item<double>());
  if (failed == 0) return;
  TORCH_CHECK(error.empty(), error);
  TORCH_CHECK(false, "[checkpointing] ", what, " failed on rank ", failed - 1, " (see its message)");
}

std::string join(const std::string& a, const std::string& b) { return (fs::path(a) / b).string(); }

// --- Arguments <-> dict

struct ToDict {
  GenericDict& d;
  void operator()(const char* k, const int64_t& v) const { d.insert(k, v); }
  void operator()(const char* k, const uint64_t& v) const { d.insert(k, static_cast<int64_t>(v)); }
  void operator()(const char* k, const double& v) const { d.insert(k, v); }
  void operator()(const char* k, const bool& v) const { d.insert(k, v); }
  void operator()(const char* k, const std::string& v) const { d.insert(k, v); }
  void operator()(const char* k, const std::vector<std::string>& v) const {
    auto l = new_list();
    for (const auto& s : v) l.push_back(s);
    d.insert(k, l);
  }
  template <typename T>
  void operator()(const char* k, const std::optional<T>& v) const {
    if (v) (*this)(k, *v);
    else d.insert(k, c10::IValue());
  }
};

struct FromDict {
  const GenericDict& d;
  const c10::IValue* find(const char* k) const {
    auto it = d.find(k);
    return it == d.end() ? nullptr : &it->value();
  }
  [[noreturn]] static void bad(const char* k, const c10::IValue& v, const char* want) {
    TORCH_CHECK(false, "[checkpointing] the saved argument '", k, "' is a ", v.tagKind(), ", expected ", want);
  }
  static void set(const char* k, const c10::IValue& v, int64_t& out) {
    if (!v.isInt()) bad(k, v, "int");
    out = v.toInt();
  }
  static void set(const char* k, const c10::IValue& v, uint64_t& out) {
    if (!v.isInt()) bad(k, v, "int");
    out = static_cast<uint64_t>(v.toInt());
  }
  static void set(const char* k, const c10::IValue& v, double& out) {
    if (!v.isDouble() && !v.isInt()) bad(k, v, "float");
    out = v.isDouble() ? v.toDouble() : static_cast<double>(v.toInt());
  }
  static void set(const char* k, const c10::IValue& v, bool& out) {
    if (!v.isBool()) bad(k, v, "bool");
    out = v.toBool();
  }
  static void set(const char* k, const c10::IValue& v, std::string& out) {
    if (!v.isString()) bad(k, v, "str");
    out = v.toStringRef();
  }
  static void set(const char* k, const c10::IValue& v, std::vector<std::string>& out) {
    if (!v.isList()) bad(k, v, "list");
    out.clear();
    for (const auto& s : v.toListRef()) {
      if (!s.isString()) bad(k, s, "str");
      out.push_back(s.toStringRef());
    }
  }
  template <typename T>
  static void set(const char* k, const c10::IValue& v, std::optional<T>& out) {
    if (v.isNone()) {
      out.reset();
      return;
    }
    T value{};
    set(k, v, value);
    out = value;
  }
  template <typename T>
  void operator()(const char* k, T& out) const {
    if (const auto* v = find(k)) set(k, *v, out);
  }
};

// Every field of Arguments under its own name (the flag without dashes, '_' for '-').
template <typename A, typename F>
void visit_arguments(A& a, F&& f) {
  f("num_layers", a.num_layers);
  f("hidden_size", a.hidden_size);
  f("ffn_hidden_size", a.ffn_hidden_size);
  f("num_attention_heads", a.num_attention_heads);
  f("group_query_attention", a.group_query_attention);
  f("num_query_groups", a.num_query_groups);
  f("kv_channels", a.kv_channels);
  f("seq_length", a.seq_length);
  f("max_position_embeddings", a.max_position_embeddings);
  f("position_embedding_type", a.position_embedding_type);
  f("rotary_percent", a.rotary_percent);
  f("rotary_base", a.rotary_base);
  f("normalization", a.normalization);
  f("norm_epsilon", a.norm_epsilon);
  f("swiglu", a.swiglu);
  f("openai_gelu", a.openai_gelu);
  f("disable_bias_linear", a.disable_bias_linear);
  f("untie_embeddings_and_output_weights", a.untie_embeddings_and_output_weights);
  f("attention_dropout", a.attention_dropout);
  f("hidden_dropout", a.hidden_dropout);
  f("init_method_std", a.init_method_std);
  f("make_vocab_size_divisible_by", a.make_vocab_size_divisible_by);
  f("recompute_granularity", a.recompute_granularity);
  f("recompute_method", a.recompute_method);
  f("recompute_num_layers", a.recompute_num_layers);
  f("tensor_model_parallel_size", a.tensor_model_parallel_size);
  f("pipeline_model_parallel_size", a.pipeline_model_parallel_size);
  f("num_layers_per_virtual_pipeline_stage", a.num_layers_per_virtual_pipeline_stage);
  f("num_virtual_stages_per_pipeline_rank", a.num_virtual_stages_per_pipeline_rank);
  f("sequence_parallel", a.sequence_parallel);
  f("use_distributed_optimizer", a.use_distributed_optimizer);
  f("data_path", a.data_path);
  f("split", a.split);
  f("mock_data", a.mock_data);
  f("tokenizer_type", a.tokenizer_type);
  f("vocab_file", a.vocab_file);
  f("merge_file", a.merge_file);
  f("vocab_size", a.vocab_size);
  f("reset_position_ids", a.reset_position_ids);
  f("reset_attention_mask", a.reset_attention_mask);
  f("eod_mask_loss", a.eod_mask_loss);
  f("micro_batch_size", a.micro_batch_size);
  f("global_batch_size", a.global_batch_size);
  f("train_iters", a.train_iters);
  f("train_samples", a.train_samples);
  f("seed", a.seed);
  f("optimizer", a.optimizer);
  f("lr", a.lr);
  f("min_lr", a.min_lr);
  f("lr_decay_style", a.lr_decay_style);
  f("lr_decay_iters", a.lr_decay_iters);
  f("lr_decay_samples", a.lr_decay_samples);
  f("lr_warmup_iters", a.lr_warmup_iters);
  f("lr_warmup_fraction", a.lr_warmup_fraction);
  f("lr_warmup_samples", a.lr_warmup_samples);
  f("lr_warmup_init", a.lr_warmup_init);
  f("lr_wsd_decay_style", a.lr_wsd_decay_style);
  f("lr_wsd_decay_iters", a.lr_wsd_decay_iters);
  f("weight_decay", a.weight_decay);
  f("adam_beta1", a.adam_beta1);
  f("adam_beta2", a.adam_beta2);
  f("adam_eps", a.adam_eps);
  f("sgd_momentum", a.sgd_momentum);
  f("clip_grad", a.clip_grad);
  f("bf16", a.bf16);
  f("fp16", a.fp16);
  f("loss_scale", a.loss_scale);
  f("initial_loss_scale", a.initial_loss_scale);
  f("min_loss_scale", a.min_loss_scale);
  f("loss_scale_window", a.loss_scale_window);
  f("hysteresis", a.hysteresis);
  f("log_interval", a.log_interval);
  f("eval_interval", a.eval_interval);
  f("eval_iters", a.eval_iters);
  f("save", a.save);
  f("save_interval", a.save_interval);
  f("world_size", a.world_size);
  f("data_parallel_size", a.data_parallel_size);
  f("virtual_pipeline_model_parallel_size", a.virtual_pipeline_model_parallel_size);
}

// --- model and RNG state

std::map<std::string, at::Tensor> module_state(torch::nn::Module& m) {
  if (auto* gpt = dynamic_cast<models::gpt::GPTModelImpl*>(&m)) return gpt->state_dict();
  std::map<std::string, at::Tensor> out;
  for (const auto& p : m.named_parameters()) out[p.key()] = p.value().detach();
  for (const auto& b : m.named_buffers()) out[b.key()] = b.value();
  return out;
}

void load_module_state(torch::nn::Module& m, const std::map<std::string, at::Tensor>& state) {
  if (auto* gpt = dynamic_cast<models::gpt::GPTModelImpl*>(&m)) {
    gpt->load_state_dict(state, /*strict=*/true);
    return;
  }
  at::NoGradGuard no_grad;
  auto copy = [&](const std::string& name, at::Tensor t) {
    auto it = state.find(name);
    TORCH_CHECK(it != state.end(), "[checkpointing] missing key '", name, "'");
    TORCH_CHECK(it->second.sizes() == t.sizes(), "[checkpointing] '", name, "' has shape ", it->second.sizes(),
                ", the model ", t.sizes());
    t.copy_(it->second);
  };
  for (const auto& p : m.named_parameters()) copy(p.key(), p.value());
  for (const auto& b : m.named_buffers()) copy(b.key(), b.value());
}

GenericDict tensor_dict(const std::map<std::string, at::Tensor>& tensors) {
  GenericDict d(c10::StringType::get(), c10::TensorType::get());
  for (const auto& [k, v] : tensors) d.insert(k, v.detach());
  return d;
}

std::map<std::string, at::Tensor> to_tensor_map(const c10::IValue& v, const std::string& what) {
  TORCH_CHECK(v.isGenericDict(), "[checkpointing] ", what, " is not a dict of tensors");
  std::map<std::string, at::Tensor> out;
  for (const auto& e : v.toGenericDict()) {
    TORCH_CHECK(e.key().isString() && e.value().isTensor(), "[checkpointing] ", what, " holds a non-tensor entry");
    out[e.key().toStringRef()] = e.value().toTensor();
  }
  return out;
}

GenericDict param_state_dict(const std::map<std::string, optimizer::MegatronOptimizer::ParamState>& state) {
  auto d = new_dict();
  for (const auto& [name, s] : state) d.insert(name, tensor_dict(s));
  return d;
}

std::map<std::string, optimizer::MegatronOptimizer::ParamState> param_state_from(const c10::IValue& v,
                                                                                 const std::string& what) {
  TORCH_CHECK(v.isGenericDict(), "[checkpointing] ", what, " is not a dict");
  std::map<std::string, optimizer::MegatronOptimizer::ParamState> out;
  for (const auto& e : v.toGenericDict()) out[e.key().toStringRef()] = to_tensor_map(e.value(), what);
  return out;
}

at::Generator default_generator(c10::Device device) { return at::globalContext().defaultGenerator(device); }

GenericDict rng_state(const TrainingState& state) {
  auto d = new_dict();
  {
    auto gen = default_generator(c10::Device(c10::kCPU));
    std::lock_guard<std::mutex> lock(gen.mutex());
    d.insert("torch_rng_state", gen.get_state());
  }
  if (state.device.is_cuda()) {
    auto gen = default_generator(state.device);
    std::lock_guard<std::mutex> lock(gen.mutex());
    d.insert("cuda_rng_state", gen.get_state());
  }
  std::map<std::string, at::Tensor> tracker;
  if (state.rng_tracker) tracker = state.rng_tracker->get_states();
  d.insert("rng_tracker_states", tensor_dict(tracker));
  return d;
}

void set_rng_state(const GenericDict& d, TrainingState& state, const std::string& file) {
  auto get = [&](const char* key) -> const c10::IValue& {
    auto it = d.find(key);
    TORCH_CHECK(it != d.end(), "[checkpointing] ", file, ": rng_state has no '", key, "'");
    return it->value();
  };
  {
    auto gen = default_generator(c10::Device(c10::kCPU));
    std::lock_guard<std::mutex> lock(gen.mutex());
    gen.set_state(get("torch_rng_state").toTensor());
  }
  if (state.device.is_cuda()) {
    auto gen = default_generator(state.device);
    std::lock_guard<std::mutex> lock(gen.mutex());
    gen.set_state(get("cuda_rng_state").toTensor());
  }
  if (state.rng_tracker) {
    auto saved = to_tensor_map(get("rng_tracker_states"), file + " rng_tracker_states");
    for (auto& [k, v] : saved) v = v.clone();
    state.rng_tracker->set_states(saved);
  }
}

const c10::IValue& get(const GenericDict& d, const char* key, const std::string& file) {
  auto it = d.find(key);
  TORCH_CHECK(it != d.end(), "[checkpointing] ", file, " has no '", key, "' entry");
  return it->value();
}

// The checkpoint's layout as its rank folders show it, for error messages.
std::string describe_layout(const std::string& iter_dir) {
  std::set<std::string> names;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(iter_dir, ec))
    if (e.path().filename().string().rfind("mp_rank_", 0) == 0) names.insert(e.path().filename().string());
  if (names.empty()) return "no mp_rank_* folders";
  std::set<std::string> tp, pp;
  for (const auto& n : names) {
    tp.insert(n.substr(8, 2));
    if (n.size() > 10) pp.insert(n.substr(11));
  }
  return "TP " + std::to_string(tp.size()) + ", PP " + std::to_string(std::max<size_t>(1, pp.size())) + " (" +
         *names.begin() + (names.size() > 1 ? " ... " + *names.rbegin() : "") + ")";
}

struct RankFiles {
  std::string main_path;
  GenericDict main = new_dict();
  std::optional<GenericDict> distrib;
};

RankFiles read_rank_files(const Arguments& args, const ParallelState& ps, const std::string& iter_dir,
                          bool want_optimizer) {
  TORCH_CHECK(fs::is_directory(iter_dir), "[checkpointing] ", iter_dir, " does not exist");
  const std::string rank_dir = join(iter_dir, rank_dir_name(ps.get_tensor_model_parallel_rank(),
                                                            ps.get_pipeline_model_parallel_rank(),
                                                            ps.get_pipeline_model_parallel_world_size()));
  TORCH_CHECK(fs::is_directory(rank_dir), "[checkpointing] ", rank_dir, " does not exist: ", iter_dir,
              " was saved with ", describe_layout(iter_dir), ", this run has TP ", args.tensor_model_parallel_size,
              ", PP ", args.pipeline_model_parallel_size, "; reshard it with convert_checkpoint");
  RankFiles files;
  files.main_path = join(rank_dir, kModelFileName);
  auto main = read_checkpoint_file(files.main_path);
  TORCH_CHECK(main.isGenericDict(), "[checkpointing] ", files.main_path, " does not hold a dict");
  files.main = main.toGenericDict();
  if (want_optimizer) {
    auto opt = files.main.find("optimizer");
    if (opt != files.main.end() && opt->value().isGenericDict()) {
      auto dist = opt->value().toGenericDict().find("distributed");
      if (dist != opt->value().toGenericDict().end() && dist->value().toBool()) {
        auto d = read_checkpoint_file(join(rank_dir, kDistribOptimFileName));
        TORCH_CHECK(d.isGenericDict(), "[checkpointing] ", join(rank_dir, kDistribOptimFileName),
                    " does not hold a dict");
        files.distrib = d.toGenericDict();
      }
    }
  }
  return files;
}

// Settings that decide the shapes and the layout of the saved tensors.
void check_arguments(const Arguments& args, const TrainingState& state, const GenericDict& saved_dict,
                     const std::string& file) {
  Arguments saved = arguments_from_dict(saved_dict);
  auto same = [&](const char* flag, const auto& mine, const auto& theirs) {
    TORCH_CHECK(mine == theirs, "[checkpointing] ", file, " was saved with ", flag, " ", c10::IValue(theirs),
                ", this run has ", c10::IValue(mine));
  };
  same("--num-layers", args.num_layers, saved.num_layers);
  same("--hidden-size", args.hidden_size, saved.hidden_size);
  same("--num-attention-heads", args.num_attention_heads, saved.num_attention_heads);
  same("--num-query-groups", args.num_query_groups, saved.num_query_groups);
  same("--position-embedding-type", args.position_embedding_type, saved.position_embedding_type);
  if (args.position_embedding_type == "learned_absolute")
    same("--max-position-embeddings", args.max_position_embeddings, saved.max_position_embeddings);
  same("--normalization", args.normalization, saved.normalization);
  same("--swiglu", args.swiglu, saved.swiglu);
  same("--disable-bias-linear", args.disable_bias_linear, saved.disable_bias_linear);
  same("--untie-embeddings-and-output-weights", args.untie_embeddings_and_output_weights,
       saved.untie_embeddings_and_output_weights);
  same("--tensor-model-parallel-size", args.tensor_model_parallel_size, saved.tensor_model_parallel_size);
  same("--pipeline-model-parallel-size", args.pipeline_model_parallel_size, saved.pipeline_model_parallel_size);
  same("virtual pipeline stages (--num-layers-per-virtual-pipeline-stage)",
       args.virtual_pipeline_model_parallel_size.value_or(1), saved.virtual_pipeline_model_parallel_size.value_or(1));
  if (auto it = saved_dict.find("padded_vocab_size"); it != saved_dict.end() && state.padded_vocab_size > 0)
    same("a padded vocabulary of", state.padded_vocab_size, it->value().toInt());
}

}  // namespace

// --- layout

std::string iteration_dir_name(std::optional<int64_t> iteration) {
  if (!iteration) return "release";
  char buf[32];
  std::snprintf(buf, sizeof(buf), "iter_%07lld", static_cast<long long>(*iteration));
  return buf;
}

std::string rank_dir_name(int tp_rank, int pp_rank, int pp_size) {
  char buf[32];
  if (pp_size == 1) std::snprintf(buf, sizeof(buf), "mp_rank_%02d", tp_rank);
  else std::snprintf(buf, sizeof(buf), "mp_rank_%02d_%03d", tp_rank, pp_rank);
  return buf;
}

std::optional<TrackerEntry> read_tracker(const std::string& dir) {
  const std::string path = join(dir, kTrackerFileName);
  std::ifstream in(path);
  if (!in) return std::nullopt;
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  text.erase(text.find_last_not_of(" \n\r\t") + 1);
  if (text == "release") return TrackerEntry{std::nullopt};
  TORCH_CHECK(!text.empty() && std::all_of(text.begin(), text.end(), ::isdigit), "[checkpointing] ", path,
              " should hold an iteration number or 'release', found '", text, "'");
  return TrackerEntry{std::stoll(text)};
}

std::vector<int64_t> list_iterations(const std::string& dir) {
  std::vector<int64_t> out;
  static const std::regex pattern("iter_([0-9]{7,})");
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    std::smatch m;
    const std::string name = e.path().filename().string();
    if (e.is_directory() && std::regex_match(name, m, pattern)) out.push_back(std::stoll(m[1]));
  }
  std::sort(out.begin(), out.end());
  return out;
}

// --- files

void fault_point(const std::string& point, int rank, int signal) {
  const char* spec = std::getenv("MEGATRON_FAULT_INJECTION");
  if (!spec) return;
  std::string s(spec), name = s;
  int only_rank = -1;
  if (auto at = s.find('@'); at != std::string::npos) {
    name = s.substr(0, at);
    only_rank = std::stoi(s.substr(at + 1));
  }
  if (name != point || (only_rank >= 0 && only_rank != rank)) return;
  std::fprintf(stderr, "[fault injection] rank %d gets signal %d at %s\n", rank, signal, point.c_str());
  std::fflush(stderr);
  std::raise(signal);
}

WrittenFile write_checkpoint_file(const std::string& path, const c10::IValue& value) {
  FileWriter out(path);
  const int rank = comm::LauncherEnv::from_environment().rank;
  int chunks = 0;
  models::common::write_archive(value, [&](const void* data, size_t size) {
    out.write(data, size);
    if (++chunks == 3) fault_point("save:mid_file", rank);  // a file cut short
  });
  return out.close();
}

c10::IValue read_checkpoint_file(const std::string& path) {
  TORCH_CHECK(fs::is_regular_file(path), "[checkpointing] ", path, " does not exist");
  const auto parent = fs::path(path).parent_path().string();
  const auto sums = read_checksums(parent);
  if (auto it = sums.find(fs::path(path).filename().string()); it != sums.end()) {
    const uint64_t size = fs::file_size(path);
    TORCH_CHECK(size == it->second.first, "[checkpointing] ", path, " is truncated or overwritten: ", size,
                " bytes, ", kChecksumFileName, " says ", it->second.first);
    const uint32_t crc = file_crc32(path);
    char want[16], got[16];
    std::snprintf(want, sizeof(want), "%08x", it->second.second);
    std::snprintf(got, sizeof(got), "%08x", crc);
    TORCH_CHECK(crc == it->second.second, "[checkpointing] ", path, " is corrupt: CRC32 ", got, ", ",
                kChecksumFileName, " says ", want);
  }
  try {
    return models::common::read_archive(path);
  } catch (const c10::Error& e) {
    TORCH_CHECK(false, "[checkpointing] ", path, " cannot be read: ", e.what_without_backtrace());
  }
}

std::vector<WrittenFile> write_rank_dir(const std::string& parent, const std::string& name,
                                        const std::map<std::string, c10::IValue>& files) {
  const std::string final_dir = join(parent, name), tmp = final_dir + ".tmp";
  remove_tree(tmp);
  fs::create_directories(tmp);
  std::vector<WrittenFile> written;
  std::ostringstream sums;
  for (const auto& [file, value] : files) {
    written.push_back(write_checkpoint_file(join(tmp, file), value));
    char crc[16];
    std::snprintf(crc, sizeof(crc), "%08x", written.back().crc32);
    sums << file << " " << written.back().bytes << " " << crc << "\n";
  }
  write_text_file(join(tmp, kChecksumFileName), sums.str());
  fsync_dir(tmp);
  fault_point("save:before_rank_rename", comm::LauncherEnv::from_environment().rank);
  remove_tree(final_dir);
  fs::rename(tmp, final_dir);
  fsync_dir(parent);
  for (auto& w : written) w.path = join(final_dir, fs::path(w.path).filename().string());
  return written;
}

void remove_tree(const std::string& path) {
  struct stat st;
  if (::lstat(path.c_str(), &st) != 0) return;
  const int rc = ::nftw(
      path.c_str(), [](const char* p, const struct stat*, int, struct FTW*) { return ::remove(p); }, 16,
      FTW_DEPTH | FTW_PHYS);
  TORCH_CHECK(rc == 0, "[checkpointing] cannot delete ", path, ": ", errno_text());
}

void write_tracker(const std::string& dir, std::optional<int64_t> iteration) {
  const std::string path = join(dir, kTrackerFileName), tmp = path + ".tmp";
  write_text_file(tmp, iteration ? std::to_string(*iteration) : "release");
  fault_point("save:tracker_tmp", comm::LauncherEnv::from_environment().rank);
  TORCH_CHECK(std::rename(tmp.c_str(), path.c_str()) == 0, "[checkpointing] cannot rename ", tmp, " to ", path, ": ",
              errno_text());
  fsync_dir(dir);
}

void publish_checkpoint(const std::string& dir, std::optional<int64_t> iteration, int64_t keep_last) {
  const int rank = comm::LauncherEnv::from_environment().rank;
  const std::string final_dir = join(dir, iteration_dir_name(iteration)), staging = final_dir + ".tmp";
  fsync_dir(staging);
  fault_point("save:before_publish", rank);
  if (fs::exists(final_dir)) {
    // Re-saving an iteration: swap the folders atomically, so one complete copy always has the name.
    if (::renameat2(AT_FDCWD, staging.c_str(), AT_FDCWD, final_dir.c_str(), RENAME_EXCHANGE) != 0) {
      TORCH_CHECK(errno == EINVAL || errno == ENOSYS, "[checkpointing] cannot replace ", final_dir, " with ",
                  staging, ": ", errno_text());
      const std::string old = final_dir + ".old";  // a file system without RENAME_EXCHANGE
      remove_tree(old);
      fs::rename(final_dir, old);
      fs::rename(staging, final_dir);
      fs::rename(old, staging);
    }
    remove_tree(staging);  // the previous copy
  } else {
    fs::rename(staging, final_dir);
  }
  fsync_dir(dir);
  fault_point("save:before_tracker", rank);
  write_tracker(dir, iteration);
  if (keep_last <= 0 || !iteration) return;
  // Older checkpoints beyond the newest keep_last; later iterations (another history) stay.
  std::vector<int64_t> older;
  for (int64_t it : list_iterations(dir))
    if (it < *iteration) older.push_back(it);
  const int64_t remove = static_cast<int64_t>(older.size()) - (keep_last - 1);
  for (int64_t i = 0; i < remove; ++i) {
    const std::string victim = join(dir, iteration_dir_name(older[i]));
    const std::string doomed = victim + ".deleting";  // never a half-deleted folder under a valid name
    remove_tree(doomed);
    fs::rename(victim, doomed);
    remove_tree(doomed);
  }
}

// --- arguments

c10::impl::GenericDict arguments_to_dict(const Arguments& args) {
  auto d = new_dict();
  visit_arguments(args, ToDict{d});
  return d;
}

Arguments arguments_from_dict(const c10::IValue& value) {
  TORCH_CHECK(value.isGenericDict(), "[checkpointing] the saved 'args' is a ", value.tagKind(), ", expected a dict");
  Arguments a;
  const auto d = value.toGenericDict();
  visit_arguments(a, FromDict{d});
  return a;
}

// --- save and load

SaveResult save_checkpoint(const Arguments& args, const ParallelState& ps, const TrainingState& state) {
  const auto start = std::chrono::steady_clock::now();
  auto& world = ps.get_world_group();
  const std::string final_dir = join(args.save, iteration_dir_name(state.iteration));
  const std::string staging = final_dir + ".tmp";
  log_rank_0(LogLevel::kInfo, "saving checkpoint at iteration " + std::to_string(state.iteration) + " to " + args.save);
  std::string error;
  if (world.rank() == 0) {
    error = capture([&] {
      fs::create_directories(args.save);
      for (const auto& e : fs::directory_iterator(args.save)) {  // leftovers of interrupted saves
        const std::string name = e.path().filename().string();
        const bool stale = name.size() > 4 && (name.compare(name.size() - 4, 4, ".tmp") == 0 ||
                                               (name.size() > 9 && name.compare(name.size() - 9, 9, ".deleting") == 0));
        if (e.is_directory() && name.rfind("iter_", 0) == 0 && stale) remove_tree(e.path());
      }
      fs::create_directory(staging);
    });
  }
  agree(world, error, "preparing " + staging);

  // Collective first: the distributed optimizer gathers its shards over data-parallel ranks.
  std::map<std::string, optimizer::MegatronOptimizer::ParamState> param_state;
  if (!args.no_save_optim) param_state = state.optimizer->param_state();
  uint64_t bytes = 0;
  if (ps.get_data_parallel_rank() == 0) {
    error = capture([&] {
      auto d = new_dict();
      auto saved_args = arguments_to_dict(args);
      saved_args.insert("padded_vocab_size", state.padded_vocab_size);
      saved_args.insert("true_vocab_size", state.vocab_size);
      saved_args.insert("consumed_train_samples", state.consumed_train_samples);
      saved_args.insert("consumed_valid_samples", state.consumed_valid_samples);
      d.insert("args", saved_args);
      d.insert("checkpoint_version", kCheckpointVersion);
      d.insert("iteration", state.iteration);
      const auto& model = *state.model;
      for (size_t v = 0; v < model.size(); ++v)
        d.insert(model.size() > 1 ? "model" + std::to_string(v) : std::string("model"),
                 tensor_dict(module_state(*model[v])));
      std::map<std::string, c10::IValue> files;
      if (!args.no_save_optim) {
        auto opt = new_dict();
        const bool distributed = state.optimizer->is_distributed();
        opt.insert("distributed", distributed);
        if (distributed) {
          auto dist = new_dict();
          dist.insert("param_state", param_state_dict(param_state));
          files[kDistribOptimFileName] = dist;
        } else {
          opt.insert("param_state", param_state_dict(param_state));
        }
        auto groups = new_list();
        for (const auto& g : state.optimizer->inner().param_groups()) {
          auto gd = new_dict();
          gd.insert("lr", g.options().get_lr());
          gd.insert("num_params", static_cast<int64_t>(g.params().size()));
          groups.push_back(gd);
        }
        opt.insert("param_groups", groups);
        if (auto* scaler = state.optimizer->grad_scaler()) {
          auto s = scaler->state();
          auto sd = new_dict();
          sd.insert("scale", s.scale);
          sd.insert("growth_tracker", s.growth_tracker);
          sd.insert("hysteresis_tracker", s.hysteresis_tracker);
          opt.insert("grad_scaler", sd);
        } else {
          opt.insert("grad_scaler", c10::IValue());
        }
        d.insert("optimizer", opt);
        const auto& c = state.scheduler->config();
        auto sched = new_dict();
        sched.insert("max_lr", c.max_lr);
        sched.insert("min_lr", c.min_lr);
        sched.insert("lr_warmup_steps", c.lr_warmup_steps);
        sched.insert("lr_decay_steps", c.lr_decay_steps);
        sched.insert("lr_decay_style", c.lr_decay_style);
        sched.insert("num_steps", state.scheduler->num_steps());
        d.insert("opt_param_scheduler", sched);
      }
      if (!args.no_save_rng) {
        auto list = new_list();
        list.push_back(rng_state(state));
        d.insert("rng_state", list);
      }
      d.insert("consumed_train_samples", state.consumed_train_samples);
      d.insert("consumed_valid_samples", state.consumed_valid_samples);
      files[kModelFileName] = d;
      const auto name = rank_dir_name(ps.get_tensor_model_parallel_rank(), ps.get_pipeline_model_parallel_rank(),
                                      ps.get_pipeline_model_parallel_world_size());
      for (const auto& w : write_rank_dir(staging, name, files)) bytes += w.bytes;
    });
  }
  param_state.clear();
  agree(world, error, "saving iteration " + std::to_string(state.iteration) + " to " + staging);
  if (world.rank() == 0)
    error = capture([&] { publish_checkpoint(args.save, state.iteration, args.keep_last_checkpoints); });
  agree(world, error, "publishing " + final_dir);

  auto total = at::full({1}, static_cast<double>(bytes), at::kDouble);
  world.all_reduce(total);
  SaveResult result;
  result.path = final_dir;
  result.bytes = static_cast<uint64_t>(total.item<double>());
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  char line[256];
  std::snprintf(line, sizeof(line), "  successfully saved checkpoint from iteration %7lld to %s [ %.3f s, %.1f MB ]",
                static_cast<long long>(state.iteration), args.save.c_str(), result.seconds, result.bytes / 1e6);
  log_rank_0(LogLevel::kInfo, line);
  return result;
}

bool load_checkpoint(const Arguments& args, const ParallelState& ps, TrainingState& state) {
  const auto start = std::chrono::steady_clock::now();
  auto& world = ps.get_world_group();
  const auto tracker = read_tracker(args.load);
  std::vector<std::optional<int64_t>> candidates;
  if (args.ckpt_step) {
    candidates.push_back(*args.ckpt_step);
  } else if (tracker) {
    candidates.push_back(tracker->iteration);
  } else {
    log_rank_0(LogLevel::kWarn, "WARNING: could not find " + join(args.load, kTrackerFileName) +
                                    "; no checkpoint to load, training starts from random weights");
    return false;
  }
  if (args.load_fallback) {
    const auto all = list_iterations(args.load);
    for (auto it = all.rbegin(); it != all.rend(); ++it)
      if (!candidates.front() || *it < *candidates.front()) candidates.push_back(*it);
  }
  const bool want_optimizer = !args.finetune && !args.no_load_optim;
  RankFiles files;
  std::optional<int64_t> iteration;
  for (size_t c = 0; c < candidates.size(); ++c) {
    const std::string iter_dir = join(args.load, iteration_dir_name(candidates[c]));
    const std::string error = capture([&] { files = read_rank_files(args, ps, iter_dir, want_optimizer); });
    auto flag = at::full({1}, error.empty() ? 0.0 : 1.0, at::kDouble);
    world.all_reduce(flag, comm::ReduceOp::kMax);
    if (flag.item<double>() == 0) {
      iteration = candidates[c];
      break;
    }
    if (c + 1 < candidates.size()) {
      if (!error.empty()) log(LogLevel::kWarn, error);
      log_rank_0(LogLevel::kWarn, "WARNING: " + iter_dir + " cannot be loaded on every rank; --load-fallback tries " +
                                      join(args.load, iteration_dir_name(candidates[c + 1])));
      continue;
    }
    agree(world, error, "loading " + iter_dir);
  }
  const std::string& file = files.main_path;
  const auto& d = files.main;
  check_arguments(args, state, get(d, "args", file).toGenericDict(), file);
  const bool release = !iteration;

  const auto& model = *state.model;
  for (size_t v = 0; v < model.size(); ++v) {
    const std::string key = model.size() > 1 ? "model" + std::to_string(v) : "model";
    auto tensors = to_tensor_map(get(d, key.c_str(), file), file + " '" + key + "'");
    try {
      load_module_state(*model[v], tensors);
    } catch (const c10::Error& e) {
      TORCH_CHECK(false, "[checkpointing] ", file, " '", key, "': ", e.what_without_backtrace());
    }
  }
  if (args.finetune || release) {
    state.iteration = 0;
    state.consumed_train_samples = state.consumed_valid_samples = 0;
  } else {
    state.iteration = get(d, "iteration", file).toInt();
    state.consumed_train_samples = get(d, "consumed_train_samples", file).toInt();
    state.consumed_valid_samples = get(d, "consumed_valid_samples", file).toInt();
  }
  if (want_optimizer && !release) {
    auto opt_it = d.find("optimizer");
    TORCH_CHECK(opt_it != d.end(), "[checkpointing] ", file,
                " has no optimizer state (saved with --no-save-optim?); pass --no-load-optim or --finetune");
    const auto opt = opt_it->value().toGenericDict();
    const auto& ps_value = files.distrib ? get(*files.distrib, "param_state", file) : get(opt, "param_state", file);
    try {
      state.optimizer->load_param_state(param_state_from(ps_value, file + " optimizer state"));
    } catch (const c10::Error& e) {
      TORCH_CHECK(false, "[checkpointing] ", file, ": ", e.what_without_backtrace());
    }
    if (auto* scaler = state.optimizer->grad_scaler()) {
      const auto& s = get(opt, "grad_scaler", file);
      if (s.isGenericDict()) {
        const auto sd = s.toGenericDict();
        scaler->load_state({get(sd, "scale", file).toDouble(), get(sd, "growth_tracker", file).toInt(),
                            get(sd, "hysteresis_tracker", file).toInt()});
      }
    }
    const auto sched = get(d, "opt_param_scheduler", file).toGenericDict();
    state.scheduler->set_num_steps(get(sched, "num_steps", file).toInt());
  }
  if (!args.finetune && !args.no_load_rng && !release) {
    auto rng_it = d.find("rng_state");
    if (rng_it == d.end() || !rng_it->value().isList()) {
      log_rank_0(LogLevel::kWarn, "WARNING: " + file + " has no RNG state (resharded or --no-save-rng); "
                                  "the RNG continues from its seed");
    } else {
      const auto list = rng_it->value().toList();
      const auto dp_rank = static_cast<size_t>(ps.get_data_parallel_rank());
      const auto entry = list.size() == static_cast<size_t>(ps.get_data_parallel_world_size()) ? list.get(dp_rank)
                                                                                             : list.get(0);
      set_rng_state(entry.toGenericDict(), state, file);
    }
  }
  char seconds[32];
  std::snprintf(seconds, sizeof(seconds), "%.3f",
                std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  log_rank_0(LogLevel::kInfo, "  successfully loaded checkpoint from " + args.load + " [ " +
                                  iteration_dir_name(iteration) + " ] at iteration " +
                                  std::to_string(state.iteration) + " [ " + seconds + " s ]");
  return true;
}

}  // namespace megatron::training
