// Arguments: Megatron-LM's flags in one validated structure, parsed from a list of strings (as on
// the command line, --config TOML included) or a dict {flag name: value}.
#include <c10/util/Exception.h>

#include "bindings.h"
#include "megatron/comm/launcher_env.h"
#include "megatron/training/arguments.h"

// Every field of training::Arguments, in the header's order.
#define MEGATRON_ARGUMENT_FIELDS(X)                                                              \
  X(num_layers) X(hidden_size) X(ffn_hidden_size) X(num_attention_heads)                         \
  X(group_query_attention) X(num_query_groups) X(kv_channels) X(seq_length)                      \
  X(max_position_embeddings) X(position_embedding_type) X(rotary_percent) X(rotary_base)         \
  X(normalization) X(norm_epsilon) X(swiglu) X(openai_gelu) X(disable_bias_linear)               \
  X(untie_embeddings_and_output_weights) X(attention_dropout) X(hidden_dropout)                  \
  X(init_method_std) X(make_vocab_size_divisible_by) X(recompute_granularity)                    \
  X(recompute_method) X(recompute_num_layers) X(tensor_model_parallel_size)                      \
  X(pipeline_model_parallel_size) X(num_layers_per_virtual_pipeline_stage)                       \
  X(num_virtual_stages_per_pipeline_rank) X(sequence_parallel) X(use_distributed_optimizer)      \
  X(distributed_timeout_minutes) X(data_path) X(split) X(mock_data) X(tokenizer_type)            \
  X(vocab_file) X(merge_file) X(vocab_size) X(data_cache_path) X(reset_position_ids)             \
  X(reset_attention_mask) X(eod_mask_loss) X(num_workers) X(micro_batch_size)                    \
  X(global_batch_size) X(train_iters) X(train_samples) X(seed) X(optimizer) X(lr) X(min_lr)      \
  X(lr_decay_style) X(lr_decay_iters) X(lr_decay_samples) X(lr_warmup_iters)                     \
  X(lr_warmup_fraction) X(lr_warmup_samples) X(lr_warmup_init) X(lr_wsd_decay_style)             \
  X(lr_wsd_decay_iters) X(weight_decay) X(adam_beta1) X(adam_beta2) X(adam_eps) X(sgd_momentum)  \
  X(clip_grad) X(bf16) X(fp16) X(loss_scale) X(initial_loss_scale) X(min_loss_scale)             \
  X(loss_scale_window) X(hysteresis) X(log_interval) X(eval_interval) X(eval_iters)              \
  X(metrics_file) X(skip_nan_iterations) X(save) X(save_interval) X(no_save_optim)               \
  X(no_save_rng) X(load) X(no_load_optim) X(no_load_rng) X(finetune) X(ckpt_step)                \
  X(load_fallback) X(keep_last_checkpoints) X(exit_signal_handler) X(device) X(tf32) X(no_cpu_allocator_cache) \
  X(exit_interval) X(exit_duration_in_mins) X(recompute_activations)                             \
  X(use_rotary_position_embeddings) X(use_mcore_models) X(transformer_impl) X(use_flash_attn)    \
  X(attention_backend) X(no_masked_softmax_fusion) X(attention_softmax_in_fp32)                  \
  X(apply_query_key_layer_scaling) X(no_bias_gelu_fusion) X(no_bias_dropout_fusion)              \
  X(no_bias_swiglu_fusion) X(no_rope_fusion) X(no_gradient_accumulation_fusion)                  \
  X(no_persist_layer_norm) X(overlap_grad_reduce) X(overlap_param_gather) X(distributed_backend) \
  X(no_create_attention_mask_in_dataloader) X(manual_gc) X(manual_gc_interval) X(log_throughput) \
  X(timing_log_level) \
  X(world_size) X(data_parallel_size) X(num_microbatches)                                        \
  X(virtual_pipeline_model_parallel_size) X(config_file)

namespace megatron::python {

std::string flag_name(std::string key) {
  if (key.rfind("--", 0) == 0) return key;
  for (auto& c : key) c = c == '_' ? '-' : c;
  return "--" + key;
}

}  // namespace megatron::python

namespace {

using megatron::training::Arguments;

// {"num_layers": 2, "mock_data": True, "data_path": ["1", "a"], "lr": None} -> the command line
// ["--num-layers", "2", "--mock-data", "--data-path", "1", "a"]; False gives --flag=false and None
// leaves the flag out.
std::vector<std::string> command_line_of(const py::dict& settings) {
  std::vector<std::string> words;
  for (const auto& [key, value] : settings) {
    TORCH_CHECK_TYPE(py::isinstance<py::str>(key), "[arguments] keys: expected flag names (str), found ",
                     py::repr(key).cast<std::string>());
    const std::string flag = megatron::python::flag_name(key.cast<std::string>());
    if (value.is_none()) continue;
    if (py::isinstance<py::bool_>(value)) {
      words.push_back(value.cast<bool>() ? flag : flag + "=false");
    } else if (py::isinstance<py::list>(value) || py::isinstance<py::tuple>(value)) {
      words.push_back(flag);
      for (const auto& item : value) words.push_back(py::str(item).cast<std::string>());
    } else {
      words.push_back(flag);
      words.push_back(py::str(value).cast<std::string>());
    }
  }
  return words;
}

std::vector<std::string> command_line_from(const py::object& args) {
  if (py::isinstance<py::dict>(args)) return command_line_of(args.cast<py::dict>());
  TORCH_CHECK_TYPE(!py::isinstance<py::str>(args),
                   "[arguments] expected a list of strings or a dict, found one string; split it into words");
  return args.cast<std::vector<std::string>>();
}

}  // namespace

void init_arguments(py::module_& m) {
  py::class_<Arguments> cls(
      m, "Arguments",
      "Every setting of a training run, with Megatron-LM's flag names as attributes "
      "(--num-layers -> num_layers). Usually from parse_arguments(); a default-constructed one "
      "holds the defaults and must pass validate() before pretrain() uses it.");
  cls.def(py::init<>())
      .def("validate", &Arguments::validate, py::arg("world_size"),
           "Checks every combination against world_size and fills the derived values "
           "(data_parallel_size, num_microbatches, ...); raises naming the flags.");
#define MEGATRON_BIND_FIELD(name) cls.def_readwrite(#name, &Arguments::name);
  MEGATRON_ARGUMENT_FIELDS(MEGATRON_BIND_FIELD)
#undef MEGATRON_BIND_FIELD
  cls.def(
         "to_dict",
         [](const Arguments& a) {
           py::dict d;
#define MEGATRON_FIELD_TO_DICT(name) d[#name] = py::cast(a.name);
           MEGATRON_ARGUMENT_FIELDS(MEGATRON_FIELD_TO_DICT)
#undef MEGATRON_FIELD_TO_DICT
           return d;
         },
         "Every field by attribute name.")
      .def("__copy__", [](const Arguments& a) { return Arguments(a); })
      .def("__deepcopy__", [](const Arguments& a, const py::dict&) { return Arguments(a); }, py::arg("memo"))
      .def("__repr__", [](const py::object& self) {
        return "Arguments(" + py::str(self.attr("to_dict")()).cast<std::string>() + ")";
      });

  m.def(
      "parse_arguments",
      [](const py::object& args, std::optional<int64_t> world_size, const std::string& program) -> std::optional<Arguments> {
        const auto words = command_line_from(args);
        const int64_t world = world_size.value_or(megatron::comm::LauncherEnv::from_environment().world_size);
        return megatron::training::parse_arguments(words, world, program);
      },
      py::arg("args"), py::arg("world_size") = py::none(), py::arg("program") = "pretrain_gpt",
      "Parses Megatron-LM flags from a list of strings (['--num-layers', '2', '--config', "
      "'gpt.toml', ...]) or a dict ({'num_layers': 2, 'mock_data': True, 'data_path': [...]}: "
      "keys are flag names with - or _, True/False switch flags, None leaves a flag out) and "
      "validates them for world_size (default: the launcher's). Returns None for --help (the "
      "help is printed); bad flags raise RuntimeError with one line naming them.");
  m.def("arguments_help", &megatron::training::arguments_help, py::arg("program") = "pretrain_gpt",
        "The flag list --help prints.");
}
