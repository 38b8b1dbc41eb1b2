#include "megatron/models/gpt/gpt_model.h"

#include <torch/nn/module.h>

#include <limits>
#include <optional>
#include <set>

#include "megatron/cpu_math.h"
#include "megatron/models/common/serialization.h"
#include "megatron/tensor_parallel/cross_entropy.h"
#include "megatron/tensor_parallel/mappings.h"
#include "megatron/transformer/context_parallel.h"
#include "megatron/transformer/domino.h"
#include "megatron/transformer/moe/moe_utils.h"

namespace megatron::models::gpt {

namespace tp = megatron::tensor_parallel;

GPTModelOptions gpt_model_options_for_rank(const ParallelState& ps, transformer::TransformerConfig config,
                                           int64_t vocab_size, int64_t max_sequence_length,
                                           std::optional<int> virtual_rank) {
  const auto vpp = ps.get_virtual_pipeline_model_parallel_world_size();
  config.tensor_model_parallel_size(ps.get_tensor_model_parallel_world_size())
      .tp_group(ps.tensor_model_parallel_group_ptr())
      .pipeline_model_parallel_size(ps.get_pipeline_model_parallel_world_size())
      .virtual_pipeline_model_parallel_size(vpp ? std::optional<int64_t>(*vpp) : std::nullopt);
  return GPTModelOptions(std::move(config), vocab_size, max_sequence_length)
      .pre_process(ps.is_pipeline_first_stage(virtual_rank))
      .post_process(ps.is_pipeline_last_stage(virtual_rank))
      .pipeline_model_parallel_rank(ps.get_pipeline_model_parallel_rank())
      .virtual_pipeline_model_parallel_rank(virtual_rank.value_or(0));
}

GPTModelImpl::GPTModelImpl(GPTModelOptions options_)
    : options(std::move(options_)), config(options.config().finalize()) {
  warm_up_cpu_math();
  reset();
}

void GPTModelImpl::reset() {
  const int64_t pp = config.pipeline_model_parallel_size();
  const int64_t pp_rank = options.pipeline_model_parallel_rank();
  const int64_t vpp = config.virtual_pipeline_model_parallel_size().value_or(1);
  const int64_t vp_rank = options.virtual_pipeline_model_parallel_rank();
  TORCH_CHECK(pp_rank >= 0 && pp_rank < pp, "[gpt_model] pipeline_model_parallel_rank (", pp_rank,
              ") must be in [0, pipeline_model_parallel_size (", pp, "))");
  TORCH_CHECK(vp_rank >= 0 && vp_rank < vpp, "[gpt_model] virtual_pipeline_model_parallel_rank (", vp_rank,
              ") must be in [0, virtual_pipeline_model_parallel_size (", vpp, "))");
  // The config has checked that the layers divide as its pipeline split asks.
  const auto chunk = config.pipeline_split().layers(pp_rank, vp_rank);
  num_local_layers = chunk.count;
  layer_offset = chunk.offset;
  padded_vocab_size_ =
      common::vocab_size_with_padding(options.vocab_size(), options.make_vocab_size_divisible_by(),
                                      config.tensor_model_parallel_size(), options.pad_vocab_size_to());
  const auto pos_type = options.position_embedding_type();
  // Submodules allocate only; the pass below initialises every parameter by its global name.
  auto layer_config = config;
  layer_config.perform_initialization(false);
  // With the output layer on the same stage sharing the weight, the lookup's gradient can be
  // sparse: autograd adds it into the output layer's dense gradient.
  const bool tied_here =
      options.share_embeddings_and_output_weights() && options.pre_process() && options.post_process();
  if (options.pre_process())
    embedding = register_module(
        "embedding", common::LanguageModelEmbedding(layer_config, padded_vocab_size_, options.max_sequence_length(),
                                                    pos_type, tied_here, options.embed_layernorm()));
  if (pos_type == PositionEmbeddingType::kRope)
    rotary_pos_emb.emplace(config.head_dim(), options.rotary_percent(), options.rotary_base(),
                           config.rotary_interleaved(), options.rope_scaling());
  decoder =
      register_module("decoder", transformer::TransformerBlock(layer_config, options.pre_process(),
                                                               options.post_process(), num_local_layers, layer_offset));
  if (options.post_process()) {
    const bool tied = options.share_embeddings_and_output_weights();
    output_layer = register_module(
        "output_layer",
        tp::ColumnParallelLinear(tp::ColumnParallelLinearOptions(config.hidden_size(), padded_vocab_size_)
                                     .bias(false)
                                     .gather_output(false)
                                     .sequence_parallel(config.sequence_parallel())
                                     .skip_weight_param_allocation(tied && options.pre_process())
                                     .init_method_std(config.init_method_std())
                                     .perform_initialization(false)
                                     .tp_group(config.tp_group())));
  }
  if (config.perform_initialization()) initialize_parameters(options.seed());
}

at::Tensor GPTModelImpl::shared_embedding_or_output_weight() const {
  if (options.pre_process()) return embedding->word_embeddings->weight;
  if (options.post_process()) return output_layer->weight;
  return {};
}

std::vector<ShardedParameter> GPTModelImpl::sharded_parameters() const {
  std::map<std::string, ShardedParameter> found;
  for (const auto& item : named_modules(std::string(), /*include_self=*/false)) {
    const auto* sharded = dynamic_cast<const tp::ShardedModule*>(item.value().get());
    if (!sharded) continue;
    auto params = item.value()->named_parameters(true);
    for (const auto& [local, init] : sharded->param_inits()) {
      const std::string name = item.key().empty() ? local : item.key() + "." + local;
      const at::Tensor* p = params.find(local);
      TORCH_INTERNAL_ASSERT(p, "parameter ", name, " declared but not registered");
      // Layers and local experts are seeded by their global index, so that any pipeline or
      // expert-parallel layout starts from the same model.
      std::string init_name = common::shift_index(common::shift_index(name, common::kLayersPart, layer_offset),
                                                  common::kLocalExpertsPart, config.local_expert_offset());
      // The last stage's copy of the tied embedding starts equal to the first stage's.
      if (name == "output_layer.weight" && options.share_embeddings_and_output_weights())
        init_name = "embedding.word_embeddings.weight";
      const bool expert = name.find(common::kLocalExpertsPart) != std::string::npos;
      found[name] = ShardedParameter{name, init_name, *p, init, expert};
    }
  }
  std::vector<ShardedParameter> out;
  for (const auto& item : named_parameters(true)) {
    auto it = found.find(item.key());
    TORCH_INTERNAL_ASSERT(it != found.end(), "parameter ", item.key(), " has no sharding spec");
    out.push_back(it->second);
  }
  // Buffers (the routers' expert bias) are whole on every rank and start at zero.
  for (const auto& item : named_buffers(true)) {
    const std::string& name = item.key();
    out.push_back(ShardedParameter{name, common::shift_index(name, common::kLayersPart, layer_offset), item.value(),
                                   tp::ParamInit{tp::ParamInit::kZeros, 0.0, {}}, false, true});
  }
  return out;
}

void GPTModelImpl::set_moe_aux_loss_scale(const at::Tensor& scale) {
  if (const auto& state = config.moe_aux_loss_state()) state->set_loss_scale(scale);
}

std::map<std::string, at::Tensor> GPTModelImpl::take_moe_aux_losses() {
  return config.moe_aux_loss_state() ? config.moe_aux_loss_state()->take() : std::map<std::string, at::Tensor>();
}

void GPTModelImpl::initialize_parameters(uint64_t seed) {
  for (auto& sp : sharded_parameters())  // deferred ones are initialised where they land
    if (!tp::DeferredParameterInit::deferred(sp.param)) tp::init_sharded_param(sp.param, sp.init, seed, sp.init_name);
}

namespace {
const std::string kLayers = common::kLayersPart;
}  // namespace

std::string GPTModelImpl::param_unit(const std::string& name) const {
  if (name.compare(0, kLayers.size(), kLayers) != 0) return "";
  return name.substr(0, name.find('.', kLayers.size()));
}

std::string GPTModelImpl::gather_wait_unit(const std::string& name) const {
  const bool tail = name.rfind("decoder.final_layernorm.", 0) == 0 || name.rfind("output_layer.", 0) == 0;
  const int64_t layers = static_cast<int64_t>(decoder->layers->size());
  return tail && layers > 0 ? kLayers + std::to_string(layers - 1) : param_unit(name);
}

void GPTModelImpl::set_param_gather(const ParamGatherHooks& hooks) {
  param_gather = hooks ? hooks("") : nullptr;
  for (size_t i = 0; i < decoder->layers->size(); ++i)
    decoder->layers->ptr<transformer::TransformerLayerImpl>(i)->param_gather =
        hooks ? hooks(kLayers + std::to_string(i)) : nullptr;
}

void GPTModelImpl::initialize_parameter(const common::ShardedParameter& p, at::Tensor& view) const {
  tp::init_sharded_param(view, p.init, options.seed(), p.init_name);
}

void GPTModelImpl::allreduce_word_embedding_grads(const std::shared_ptr<comm::ProcessGroup>& embedding_group) {
  if (!options.share_embeddings_and_output_weights() || !embedding_group || embedding_group->size() == 1 ||
      !(options.pre_process() || options.post_process()))
    return;
  at::Tensor weight = shared_embedding_or_output_weight();
  if (!weight.grad().defined()) weight.mutable_grad() = at::zeros_like(weight);
  embedding_group->all_reduce(weight.mutable_grad());
}

bool GPTModelImpl::has_sequence_parallel_grad(const common::ShardedParameter& p) const {
  // Experts' gradients are whole on each rank (their dispatcher gathers the tokens over TP).
  if (tp::group_size(config.tp_group()) == 1 || p.name.rfind("decoder.", 0) != 0 || p.init.layout.is_sharded() ||
      p.expert_parallel)
    return false;
  // The q/k norms see only this rank's heads (Megatron-LM sums their gradients over TP too).
  const bool qk_norm =
      p.name.find(".q_layernorm.") != std::string::npos || p.name.find(".k_layernorm.") != std::string::npos;
  return config.sequence_parallel() || qk_norm;
}

void GPTModelImpl::allreduce_sequence_parallel_grads() {
  std::vector<at::Tensor> grads;
  for (const auto& sp : sharded_parameters()) {
    if (!has_sequence_parallel_grad(sp)) continue;
    // A released gradient is a sharded unit's (distributed/fsdp.h), summed on its shard.
    if (sp.param.grad().defined() && sp.param.grad().storage().nbytes() > 0) grads.push_back(sp.param.mutable_grad());
  }
  if (!grads.empty()) config.tp_group()->all_reduce_coalesced(grads);
}

at::Tensor GPTModelImpl::forward(const at::Tensor& input_ids, const at::Tensor& position_ids_in,
                                 const at::Tensor& attention_mask, const at::Tensor& labels) {
  if (param_gather) param_gather->before_forward();
  const int cp = config.context_parallel_size(), cp_rank = config.context_parallel_rank();
  at::Tensor decoder_input;
  std::optional<transformer::DominoHalves> domino_input;  // --domino: the embedding's halves, reduces in flight
  if (options.pre_process()) {
    TORCH_CHECK(input_ids.defined() && input_ids.dim() == 2, "[gpt_model] input_ids must be [b, s], got ",
                input_ids.defined() ? input_ids.sizes() : at::IntArrayRef{});
    at::Tensor position_ids = position_ids_in;
    if (!position_ids.defined())  // this context-parallel rank's positions
      position_ids = transformer::slice_for_context_parallel_rank(
                         at::arange(input_ids.size(1) * cp, input_ids.options()), 0, cp, cp_rank)
                         .unsqueeze(0)
                         .expand_as(input_ids);
    if (config.domino())
      domino_input = common::domino_embedding_forward(*embedding, input_ids, position_ids);
    else
      decoder_input = embedding(input_ids, position_ids);
  }
  at::Tensor rope;
  if (rotary_pos_emb) {
    TORCH_CHECK(input_ids.defined(),
                "[gpt_model] rotary embeddings need input_ids (for the "
                "sequence length) on every stage");
    // The whole sequence's angles, cut to this context-parallel rank's chunks.
    rope = transformer::slice_for_context_parallel_rank(
        rotary_pos_emb->forward(input_ids.size(1) * cp, input_ids.device()), 0, cp, cp_rank);
  }
  at::Tensor mask = attention_mask;
  if (options.position_embedding_type() == PositionEmbeddingType::kAlibi) {
    TORCH_CHECK(input_ids.defined(), "[gpt_model] ALiBi needs input_ids (for the sequence length) on every stage");
    mask = attention_bias(attention_mask, input_ids.size(1), input_ids.device());
  }
  at::Tensor hidden = domino_input ? transformer::domino_block_forward(*decoder, *domino_input, mask, rope)
                                   : decoder(decoder_input, mask, rope);  // [s, b, h]
  if (!options.post_process()) return hidden;

  at::Tensor weight;
  if (options.share_embeddings_and_output_weights()) weight = shared_embedding_or_output_weight();
  at::Tensor logits = output_layer(hidden, weight);  // [s, b, V/tp]
  if (labels.defined()) {
    at::Tensor loss = tp::vocab_parallel_cross_entropy(logits, labels.transpose(0, 1).contiguous(), config.tp_group(),
                                                       options.label_smoothing());
    return loss.transpose(0, 1).contiguous();  // [b, s]
  }
  if (!options.parallel_output()) logits = tp::gather_from_tensor_model_parallel_region(logits, config.tp_group());
  return logits.transpose(0, 1).contiguous();  // [b, s, V]
}

at::Tensor GPTModelImpl::attention_bias(const at::Tensor& mask, int64_t seq_len, c10::Device device) const {
  const int64_t heads = config.num_attention_heads(), local = heads / config.tensor_model_parallel_size();
  at::Tensor bias = common::alibi_causal_bias(heads, tp::group_rank(config.tp_group()) * local, local, seq_len, device);
  if (!mask.defined()) return bias;
  return bias.masked_fill(mask, -std::numeric_limits<float>::infinity());  // [b or 1, heads / tp, s, s]
}

std::map<std::string, at::Tensor> GPTModelImpl::state_dict() const {
  std::map<std::string, at::Tensor> out;
  for (const auto& item : named_parameters(true)) out[item.key()] = item.value().detach();
  for (const auto& item : named_buffers(true)) out[item.key()] = item.value().detach();
  return out;
}

void GPTModelImpl::load_state_dict(const std::map<std::string, at::Tensor>& state, bool strict) {
  auto params = named_parameters(true);
  for (const auto& item : named_buffers(true)) params.insert(item.key(), item.value());
  std::set<std::string> missing;
  for (const auto& item : params) missing.insert(item.key());
  at::NoGradGuard no_grad;
  for (const auto& [name, tensor] : state) {
    at::Tensor* p = params.find(name);
    if (!p) {
      TORCH_CHECK(!strict, "[gpt_model] load_state_dict: unexpected key '", name, "'");
      continue;
    }
    TORCH_CHECK(p->sizes() == tensor.sizes(), "[gpt_model] load_state_dict: '", name, "' has shape ", tensor.sizes(),
                " but this rank's parameter is ", p->sizes(), " (was it saved with another TP size?)");
    p->copy_(tensor);
    missing.erase(name);
  }
  if (strict && !missing.empty())
    TORCH_CHECK(false, "[gpt_model] load_state_dict: missing key '", *missing.begin(), "' (and ", missing.size() - 1,
                " more)");
}

std::map<std::string, at::Tensor> GPTModelImpl::full_state_dict() const {
  const auto& g = config.tp_group();
  std::map<std::string, at::Tensor> out;
  for (const auto& sp : sharded_parameters()) {
    at::Tensor shard = sp.param.detach();
    if (!sp.init.layout.is_sharded()) {
      out[sp.name] = shard;
      continue;
    }
    // [tp, *shard] -> per-rank shards -> full tensor in the layout's order.
    at::Tensor all = tp::all_gather_along_dim(shard.contiguous().unsqueeze(0), g, 0);
    out[sp.name] = sp.init.layout.unshard(all.unbind(0));
  }
  return out;
}

void GPTModelImpl::load_full_state_dict(const std::map<std::string, at::Tensor>& full, bool strict) {
  std::map<std::string, at::Tensor> shards;
  std::map<std::string, tp::ShardLayout> layouts;
  for (const auto& sp : sharded_parameters()) layouts[sp.name] = sp.init.layout;
  for (const auto& [name, tensor] : full) {
    auto it = layouts.find(name);
    if (it == layouts.end()) {
      TORCH_CHECK(!strict, "[gpt_model] load_full_state_dict: unexpected key '", name, "'");
      continue;
    }
    shards[name] = it->second.shard(tensor);
  }
  load_state_dict(shards, strict);
}

void GPTModelImpl::save_state_dict_file(const std::string& path) const {
  common::save_tensor_dict(path, state_dict());
}

void GPTModelImpl::load_state_dict_file(const std::string& path, bool strict) {
  load_state_dict(common::load_tensor_dict(path), strict);
}

}  // namespace megatron::models::gpt
