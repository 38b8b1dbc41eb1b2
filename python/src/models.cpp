// GPTModel (Megatron's models/gpt/gpt_model.py) as a C++ module; megatron_cpp.GPTModel wraps it
// as a torch.nn.Module whose parameters are these very tensors.
#include <c10/util/Exception.h>

#include "bindings.h"
#include "megatron/models/gpt/gpt_model.h"

void init_models(py::module_& m) {
  namespace gpt = megatron::models::gpt;
  using megatron::python::ModuleClass;

  m.def("vocab_size_with_padding", &megatron::models::common::vocab_size_with_padding, py::arg("vocab_size"),
        py::arg("make_vocab_size_divisible_by"), py::arg("tensor_model_parallel_size"),
        py::arg("pad_vocab_size_to") = py::none(),
        "ceil(vocab / (divisible_by x tp)) x divisible_by x tp, as Megatron-LM pads it; or pad_vocab_size_to.");

  py::class_<gpt::ShardedParameter>(m, "ShardedParameter",
                                    "One parameter of this rank with how its full tensor is sharded and initialised.")
      .def_readonly("name", &gpt::ShardedParameter::name)
      .def_readonly("init_name", &gpt::ShardedParameter::init_name)
      .def_readonly("param", &gpt::ShardedParameter::param)
      .def_readonly("init", &gpt::ShardedParameter::init);

  ModuleClass<gpt::GPTModelImpl>(
      m, "GPTModel",
      "Megatron's GPTModel: embedding (first stage), transformer block, final norm and output "
      "layer (last stage), with megatron/core's state-dict names.")
      .def(py::init([](const megatron::transformer::TransformerConfig& config, int64_t vocab_size,
                       int64_t max_sequence_length, int64_t make_vocab_size_divisible_by, bool pre_process,
                       bool post_process, int64_t pipeline_model_parallel_rank,
                       int64_t virtual_pipeline_model_parallel_rank, bool share_embeddings_and_output_weights,
                       const std::string& position_embedding_type, double rotary_percent, double rotary_base,
                       std::optional<py::dict> rope_scaling, bool embed_layernorm,
                       std::optional<int64_t> pad_vocab_size_to, bool parallel_output, double label_smoothing,
                       uint64_t seed) {
             gpt::GPTModelOptions o(config, vocab_size, max_sequence_length);
             if (rope_scaling) {  // Hugging Face's rope_scaling dict of the "llama3" type
               gpt::RopeScaling s;
               for (const auto& [key, value] : *rope_scaling) {
                 const auto k = key.cast<std::string>();
                 if (k == "factor")
                   s.factor = value.cast<double>();
                 else if (k == "low_freq_factor")
                   s.low_freq_factor = value.cast<double>();
                 else if (k == "high_freq_factor")
                   s.high_freq_factor = value.cast<double>();
                 else if (k == "original_max_position_embeddings")
                   s.original_max_position_embeddings = value.cast<int64_t>();
                 else
                   TORCH_CHECK_VALUE(k == "rope_type" && value.cast<std::string>() == "llama3",
                                     "[GPTModel] rope_scaling: unknown key '", k,
                                     "' (or a rope_type other than llama3)");
               }
               o.rope_scaling(s);
             }
             o.make_vocab_size_divisible_by(make_vocab_size_divisible_by)
                 .pad_vocab_size_to(pad_vocab_size_to)
                 .embed_layernorm(embed_layernorm)
                 .pre_process(pre_process)
                 .post_process(post_process)
                 .pipeline_model_parallel_rank(pipeline_model_parallel_rank)
                 .virtual_pipeline_model_parallel_rank(virtual_pipeline_model_parallel_rank)
                 .share_embeddings_and_output_weights(share_embeddings_and_output_weights)
                 .position_embedding_type(megatron::models::common::parse_position_embedding_type(
                     position_embedding_type, "[GPTModel] position_embedding_type"))
                 .rotary_percent(rotary_percent)
                 .rotary_base(rotary_base)
                 .parallel_output(parallel_output)
                 .label_smoothing(label_smoothing)
                 .seed(seed);
             py::gil_scoped_release release;  // initialisation draws every full tensor
             return std::make_shared<gpt::GPTModelImpl>(o);
           }),
           py::arg("config"), py::arg("vocab_size"), py::arg("max_sequence_length"), py::kw_only(),
           py::arg("make_vocab_size_divisible_by") = 128, py::arg("pre_process") = true, py::arg("post_process") = true,
           py::arg("pipeline_model_parallel_rank") = 0, py::arg("virtual_pipeline_model_parallel_rank") = 0,
           py::arg("share_embeddings_and_output_weights") = true,
           py::arg("position_embedding_type") = "learned_absolute", py::arg("rotary_percent") = 1.0,
           py::arg("rotary_base") = 10000.0, py::arg("rope_scaling") = py::none(), py::arg("embed_layernorm") = false,
           py::arg("pad_vocab_size_to") = py::none(), py::arg("parallel_output") = false,
           py::arg("label_smoothing") = 0.0, py::arg("seed") = 1234)
      .def(
          "forward",
          [](gpt::GPTModelImpl& self, const at::Tensor& input_ids, std::optional<at::Tensor> position_ids,
             std::optional<at::Tensor> attention_mask, std::optional<at::Tensor> labels) {
            return self.forward(input_ids, position_ids.value_or(at::Tensor()), attention_mask.value_or(at::Tensor()),
                                labels.value_or(at::Tensor()));
          },
          py::arg("input_ids"), py::arg("position_ids") = py::none(), py::arg("attention_mask") = py::none(),
          py::arg("labels") = py::none(),
          "input_ids, position_ids, labels [b, s] int64; attention_mask None (causal) or bool "
          "[b or 1, 1, s, s], True = masked out. Returns the per-token loss [b, s] (fp32) with "
          "labels on the last stage, else logits [b, s, V] there, else hidden states [s, b, h].")
      .def("set_input_tensor", &gpt::GPTModelImpl::set_input_tensor, py::arg("input"),
           "The hidden states from the previous pipeline stage.")
      .def("shared_embedding_or_output_weight", &gpt::GPTModelImpl::shared_embedding_or_output_weight)
      .def("allreduce_word_embedding_grads", &gpt::GPTModelImpl::allreduce_word_embedding_grads,
           py::arg("embedding_group"), py::call_guard<py::gil_scoped_release>())
      .def("allreduce_sequence_parallel_grads", &gpt::GPTModelImpl::allreduce_sequence_parallel_grads,
           py::call_guard<py::gil_scoped_release>())
      .def("sharded_parameters", &gpt::GPTModelImpl::sharded_parameters)
      .def("initialize_parameters", &gpt::GPTModelImpl::initialize_parameters, py::arg("seed"),
           py::call_guard<py::gil_scoped_release>())
      .def("full_state_dict", &gpt::GPTModelImpl::full_state_dict, py::call_guard<py::gil_scoped_release>(),
           "Full (TP = 1) tensors under the same names, all-gathered over the TP group (collective).")
      .def("load_full_state_dict", &gpt::GPTModelImpl::load_full_state_dict, py::arg("state_dict"),
           py::arg("strict") = true, "Keeps this rank's shard of each full tensor.")
      .def("save_state_dict_file", &gpt::GPTModelImpl::save_state_dict_file, py::arg("path"),
           py::call_guard<py::gil_scoped_release>(), "A torch.save-compatible file of this rank's state dict.")
      .def("load_state_dict_file", &gpt::GPTModelImpl::load_state_dict_file, py::arg("path"), py::arg("strict") = true,
           py::call_guard<py::gil_scoped_release>())
      .def_property_readonly("config", [](const gpt::GPTModelImpl& s) { return s.config; })
      .def_property_readonly("padded_vocab_size", [](const gpt::GPTModelImpl& s) { return s.padded_vocab_size(); })
      .def_property_readonly("pre_process", [](const gpt::GPTModelImpl& s) { return s.options.pre_process(); })
      .def_property_readonly("post_process", [](const gpt::GPTModelImpl& s) { return s.options.post_process(); });
}
