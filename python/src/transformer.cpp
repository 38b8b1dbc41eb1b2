// TransformerConfig (Megatron's TransformerConfig): keyword construction, one property per field,
// enum fields also from Megatron's strings ("RMSNorm", "silu", "full", ...).
#include <c10/util/Exception.h>

#include <functional>
#include <map>

#include "bindings.h"
#include "megatron/tensor_parallel/random.h"
#include "megatron/transformer/moe/moe_layer.h"
#include "megatron/transformer/transformer_config.h"

namespace {

using megatron::transformer::Activation;
using megatron::transformer::Normalization;
using megatron::transformer::RecomputeGranularity;
using megatron::transformer::RecomputeMethod;
using megatron::transformer::TransformerConfig;

template <typename E>
E enum_from(py::handle value, const char* field, const std::vector<std::pair<std::string, E>>& names) {
  if (!py::isinstance<py::str>(value)) return value.cast<E>();
  const auto text = value.cast<std::string>();
  std::string expected;
  for (const auto& [name, e] : names) {
    if (name == text) return e;
    expected += (expected.empty() ? "'" : ", '") + name + "'";
  }
  TORCH_CHECK_VALUE(false, "[TransformerConfig] ", field, ": expected one of ", expected, ", found '", text, "'");
}

template <typename T>
T field_from(py::handle value, const char*) {
  return value.cast<T>();
}
template <>
Normalization field_from<Normalization>(py::handle v, const char* f) {
  return enum_from<Normalization>(v, f,
                                  {{"LayerNorm", Normalization::kLayerNorm}, {"RMSNorm", Normalization::kRMSNorm}});
}
template <>
Activation field_from<Activation>(py::handle v, const char* f) {
  return enum_from<Activation>(v, f,
                               {{"gelu", Activation::kGelu},
                                {"gelu_tanh", Activation::kGeluTanh},
                                {"silu", Activation::kSilu},
                                {"squared_relu", Activation::kSquaredRelu}});
}
template <>
RecomputeGranularity field_from<RecomputeGranularity>(py::handle v, const char* f) {
  if (v.is_none()) return RecomputeGranularity::kNone;
  return enum_from<RecomputeGranularity>(v, f,
                                         {{"", RecomputeGranularity::kNone},
                                          {"full", RecomputeGranularity::kFull},
                                          {"selective", RecomputeGranularity::kSelective}});
}
template <>
RecomputeMethod field_from<RecomputeMethod>(py::handle v, const char* f) {
  return enum_from<RecomputeMethod>(v, f, {{"uniform", RecomputeMethod::kUniform}, {"block", RecomputeMethod::kBlock}});
}

using Setter = std::function<void(TransformerConfig&, py::handle)>;
using Getter = std::function<py::object(const TransformerConfig&)>;

}  // namespace

void init_transformer(py::module_& m) {
  py::enum_<Normalization>(m, "Normalization")
      .value("LAYER_NORM", Normalization::kLayerNorm)
      .value("RMS_NORM", Normalization::kRMSNorm);
  py::enum_<Activation>(m, "Activation")
      .value("GELU", Activation::kGelu)
      .value("GELU_TANH", Activation::kGeluTanh)
      .value("SILU", Activation::kSilu)
      .value("SQUARED_RELU", Activation::kSquaredRelu);
  py::enum_<RecomputeGranularity>(m, "RecomputeGranularity")
      .value("NONE", RecomputeGranularity::kNone)
      .value("FULL", RecomputeGranularity::kFull)
      .value("SELECTIVE", RecomputeGranularity::kSelective);
  py::enum_<RecomputeMethod>(m, "RecomputeMethod")
      .value("UNIFORM", RecomputeMethod::kUniform)
      .value("BLOCK", RecomputeMethod::kBlock);

  py::class_<TransformerConfig> cls(
      m, "TransformerConfig",
      "Architecture and parallelism of a transformer stack (Megatron's TransformerConfig). Build "
      "with keywords, e.g. TransformerConfig(num_layers=2, hidden_size=64, num_attention_heads=4, "
      "normalization='RMSNorm'); finalize() returns a checked copy with derived defaults filled.");

  // Every field once: a property, a keyword of the constructor, and an entry of repr().
  auto setters = std::make_shared<std::map<std::string, Setter>>();
  auto getters = std::make_shared<std::vector<std::pair<std::string, Getter>>>();
#define MEGATRON_CONFIG_FIELD(name)                                                           \
  {                                                                                           \
    using T = std::decay_t<decltype(std::declval<const TransformerConfig&>().name())>;        \
    Getter get = [](const TransformerConfig& c) { return py::cast(c.name()); };               \
    Setter set = [](TransformerConfig& c, py::handle v) { c.name(field_from<T>(v, #name)); }; \
    cls.def_property(                                                                         \
        #name, [get](const TransformerConfig& c) { return get(c); },                          \
        [set](TransformerConfig& c, py::object v) { set(c, v); });                            \
    (*setters)[#name] = set;                                                                  \
    getters->emplace_back(#name, get);                                                        \
  }
  MEGATRON_CONFIG_FIELD(num_layers)
  MEGATRON_CONFIG_FIELD(hidden_size)
  MEGATRON_CONFIG_FIELD(num_attention_heads)
  MEGATRON_CONFIG_FIELD(num_query_groups)
  MEGATRON_CONFIG_FIELD(ffn_hidden_size)
  MEGATRON_CONFIG_FIELD(kv_channels)
  MEGATRON_CONFIG_FIELD(normalization)
  MEGATRON_CONFIG_FIELD(layernorm_epsilon)
  MEGATRON_CONFIG_FIELD(layernorm_zero_centered_gamma)
  MEGATRON_CONFIG_FIELD(add_bias_linear)
  MEGATRON_CONFIG_FIELD(add_qkv_bias)
  MEGATRON_CONFIG_FIELD(gated_linear_unit)
  MEGATRON_CONFIG_FIELD(activation)
  MEGATRON_CONFIG_FIELD(hidden_dropout)
  MEGATRON_CONFIG_FIELD(attention_dropout)
  MEGATRON_CONFIG_FIELD(rotary_interleaved)
  MEGATRON_CONFIG_FIELD(qk_layernorm)
  MEGATRON_CONFIG_FIELD(qk_layernorm_across_heads)
  MEGATRON_CONFIG_FIELD(init_method_std)
  MEGATRON_CONFIG_FIELD(use_scaled_init_method)
  MEGATRON_CONFIG_FIELD(perform_initialization)
  MEGATRON_CONFIG_FIELD(tensor_model_parallel_size)
  MEGATRON_CONFIG_FIELD(pipeline_model_parallel_size)
  MEGATRON_CONFIG_FIELD(virtual_pipeline_model_parallel_size)
  MEGATRON_CONFIG_FIELD(num_layers_in_first_pipeline_stage)
  MEGATRON_CONFIG_FIELD(num_layers_in_last_pipeline_stage)
  MEGATRON_CONFIG_FIELD(account_for_embedding_in_pipeline_split)
  MEGATRON_CONFIG_FIELD(account_for_loss_in_pipeline_split)
  MEGATRON_CONFIG_FIELD(pipeline_model_parallel_layout)
  MEGATRON_CONFIG_FIELD(tp_group)
  MEGATRON_CONFIG_FIELD(sequence_parallel)
  MEGATRON_CONFIG_FIELD(rng_tracker)
  MEGATRON_CONFIG_FIELD(recompute_granularity)
  MEGATRON_CONFIG_FIELD(recompute_method)
  MEGATRON_CONFIG_FIELD(recompute_num_layers)
  MEGATRON_CONFIG_FIELD(recompute_modules)
  MEGATRON_CONFIG_FIELD(num_moe_experts)
  MEGATRON_CONFIG_FIELD(moe_layer_pattern)
  MEGATRON_CONFIG_FIELD(moe_ffn_hidden_size)
  MEGATRON_CONFIG_FIELD(moe_router_topk)
  MEGATRON_CONFIG_FIELD(moe_router_score_function)
  MEGATRON_CONFIG_FIELD(moe_router_pre_softmax)
  MEGATRON_CONFIG_FIELD(moe_router_topk_scaling_factor)
  MEGATRON_CONFIG_FIELD(moe_router_dtype)
  MEGATRON_CONFIG_FIELD(moe_router_load_balancing_type)
  MEGATRON_CONFIG_FIELD(moe_aux_loss_coeff)
  MEGATRON_CONFIG_FIELD(moe_z_loss_coeff)
  MEGATRON_CONFIG_FIELD(moe_router_num_groups)
  MEGATRON_CONFIG_FIELD(moe_router_group_topk)
  MEGATRON_CONFIG_FIELD(moe_router_enable_expert_bias)
  MEGATRON_CONFIG_FIELD(moe_router_bias_update_rate)
  MEGATRON_CONFIG_FIELD(moe_shared_expert_intermediate_size)
  MEGATRON_CONFIG_FIELD(moe_shared_expert_gate)
  MEGATRON_CONFIG_FIELD(moe_expert_capacity_factor)
  MEGATRON_CONFIG_FIELD(moe_token_drop_policy)
  MEGATRON_CONFIG_FIELD(moe_pad_expert_input_to_capacity)
  MEGATRON_CONFIG_FIELD(moe_grouped_gemm)
#undef MEGATRON_CONFIG_FIELD

  cls.def(py::init([setters](const py::kwargs& kwargs) {
            TransformerConfig c;
            for (const auto& [key, value] : kwargs) {
              const auto name = key.cast<std::string>();
              auto it = setters->find(name);
              TORCH_CHECK_TYPE(it != setters->end(), "[TransformerConfig] no field named '", name, "'");
              it->second(c, value);
            }
            return c;
          }),
          "Keywords are the field names; the others keep Megatron's defaults.")
      .def(
          "pipeline_layers",
          [](const TransformerConfig& c, int64_t pp_rank, int64_t vp_rank) {
            const auto r = c.pipeline_split().layers(pp_rank, vp_rank);
            return std::make_pair(r.offset, r.count);
          },
          py::arg("pp_rank"), py::arg("vp_rank") = 0,
          "(first layer, layer count) of model chunk vp_rank on pipeline stage pp_rank, as Megatron-Core's "
          "get_transformer_layer_offset and get_num_layers_to_build give them")
      .def("finalize", &TransformerConfig::finalize,
           "A copy with derived defaults filled in (num_query_groups, ffn_hidden_size, "
           "kv_channels, add_qkv_bias); raises naming the field on inconsistent settings.")
      .def("__repr__", [getters](const TransformerConfig& c) {
        std::string text = "TransformerConfig(";
        for (size_t i = 0; i < getters->size(); ++i) {
          const auto& [name, get] = (*getters)[i];
          text += (i ? ", " : "") + name + "=" + py::repr(get(c)).cast<std::string>();
        }
        return text + ")";
      });

  // megatron.core.transformer.moe's router and layer, for a model_builder of one's own.
  megatron::python::ModuleClass<megatron::transformer::TopKRouterImpl>(
      m, "TopKRouter", "Megatron-Core's TopKRouter: each token's top-k experts and their probabilities.")
      .def(py::init<const TransformerConfig&>(), py::arg("config"))
      .def("forward", &megatron::transformer::TopKRouterImpl::forward, py::arg("hidden"),
           "[s, b, h] -> (probs [s*b, E], routing_map [s*b, E] bool), token s_index * b + b_index; in training the "
           "load-balancing and z losses join the gradient through them.");
  megatron::python::ModuleClass<megatron::transformer::MoELayerImpl>(
      m, "MoELayer", "Megatron-Core's MoELayer: router, experts (SequentialMLP), optional shared expert.")
      .def(py::init<const TransformerConfig&>(), py::arg("config"))
      .def("forward", &megatron::transformer::MoELayerImpl::forward, py::arg("hidden"), "[s, b, h] -> [s, b, h].");
}
