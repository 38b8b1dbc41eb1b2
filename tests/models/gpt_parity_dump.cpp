// Builds a GPTModel (TP = 1) from command-line options and writes, in one torch.save-compatible
// file: its state dict, input_ids, labels, logits [b, s, V], the per-token loss [b, s] and the
// gradient of loss.mean() for every parameter ("grad/<name>"). tests/python/test_gpt_parity.py
// loads the weights into an independent PyTorch GPT and compares.
//   gpt_parity_dump --out FILE [--layers 2 --hidden 64 --heads 4 --groups 4 --ffn 256
//     --vocab 300 --divisible-by 128 --max-seq 32 --seq 16 --batch 2 --norm layernorm|rmsnorm
//     --mlp gelu|gelu_tanh|squared_relu|swiglu --bias 1 --qkv-bias 0 --qk-layernorm 0 --position
//     learned|rope|alibi|none
//     --rotary-percent 1 --rotary-base 10000 --rotary-interleaved 0 --rope-scaling-factor 0
//     (> 0: Llama 3 scaling with --rope-low 1 --rope-high 4 --rope-original 8192) --embed-ln 0
//     --pad-vocab-to 0 --eps 1e-5 --tied 1 --seed 1234 --load STATE_DICT_FILE
//     --inputs FILE (a dict whose "input_ids" [b, s] replace the random ones)
//     MoE: --experts E --moe-layers 1,0,... --moe-ffn F --topk 2 --score softmax|sigmoid
//     --pre-softmax 0 --topk-scaling 0 --router-groups 0 --group-topk 0 --shared-ffn 0
//     --shared-gate 0 --capacity 0 --drop probs|position --pad 0 --balancing aux_loss|seq_aux_loss|sinkhorn|none
//     --aux-coeff 0 --z-coeff -1 (unset) --train 0 (1: the loss in training mode, auxiliary losses
//     joined to the gradient with scale 1)]
#include <ATen/CPUGeneratorImpl.h>
#include <torch/nn/module.h>

#include <cstdio>
#include <iostream>
#include <map>
#include <string>

#include "megatron/models/common/serialization.h"
#include "megatron/models/gpt/gpt_model.h"

namespace tr = megatron::transformer;
using megatron::models::gpt::GPTModel;
using megatron::models::gpt::GPTModelOptions;
using megatron::models::gpt::PositionEmbeddingType;

int main(int argc, char** argv) {
  try {
    std::map<std::string, std::string> a{
        {"layers", "2"},
        {"hidden", "64"},
        {"heads", "4"},
        {"groups", "0"},
        {"ffn", "0"},
        {"vocab", "300"},
        {"divisible-by", "128"},
        {"max-seq", "32"},
        {"seq", "16"},
        {"batch", "2"},
        {"norm", "layernorm"},
        {"mlp", "gelu"},
        {"bias", "1"},
        {"position", "learned"},
        {"rotary-percent", "1"},
        {"rotary-base", "10000"},
        {"rotary-interleaved", "0"},
        {"rope-scaling-factor", "0"},
        {"rope-low", "1"},
        {"rope-high", "4"},
        {"rope-original", "8192"},
        {"qkv-bias", "0"},
        {"qk-layernorm", "0"},
        {"qk-across-heads", "0"},
        {"kv-channels", "0"},  // 0: hidden / heads
        {"embed-ln", "0"},
        {"pad-vocab-to", "0"},
        {"eps", "1e-5"},
        {"tied", "1"},
        {"seed", "1234"},
        {"out", ""},
        {"load", ""},
        {"inputs", ""},
        // Mixture of experts (experts 0: dense), as TransformerConfig's moe_* fields.
        {"experts", "0"},
        {"moe-layers", ""},  // "1,0,...": one per layer
        {"moe-ffn", "0"},
        {"topk", "2"},
        {"score", "softmax"},
        {"pre-softmax", "0"},
        {"topk-scaling", "0"},
        {"router-groups", "0"},
        {"group-topk", "0"},
        {"shared-ffn", "0"},
        {"shared-gate", "0"},
        {"capacity", "0"},
        {"drop", "probs"},
        {"pad", "0"},
        {"balancing", "aux_loss"},
        {"aux-coeff", "0"},
        {"z-coeff", "-1"},
        // 1: the loss (and its gradients) in training mode, where the auxiliary losses apply.
        {"train", "0"}};
    for (int i = 1; i + 1 < argc; i += 2) {
      std::string key = argv[i];
      TORCH_CHECK(key.rfind("--", 0) == 0 && a.count(key.substr(2)), "[gpt_parity_dump] unknown option ", key);
      a[key.substr(2)] = argv[i + 1];
    }
    TORCH_CHECK(!a["out"].empty(), "[gpt_parity_dump] --out FILE is required");
    auto i64 = [&](const char* k) { return std::stoll(a[k]); };

    tr::TransformerConfig cfg(i64("layers"), i64("hidden"), i64("heads"));
    cfg.hidden_dropout(0.0).attention_dropout(0.0).add_bias_linear(i64("bias") != 0);
    cfg.add_qkv_bias(i64("bias") != 0 || i64("qkv-bias") != 0).rotary_interleaved(i64("rotary-interleaved") != 0);
    cfg.layernorm_epsilon(std::stod(a["eps"])).qk_layernorm(i64("qk-layernorm") != 0);
    cfg.qk_layernorm_across_heads(i64("qk-across-heads") != 0);
    if (i64("groups") > 0) cfg.num_query_groups(i64("groups"));
    if (i64("kv-channels") > 0) cfg.kv_channels(i64("kv-channels"));
    if (i64("ffn") > 0) cfg.ffn_hidden_size(i64("ffn"));
    TORCH_CHECK(a["norm"] == "layernorm" || a["norm"] == "rmsnorm", "[gpt_parity_dump] --norm: layernorm or rmsnorm");
    cfg.normalization(a["norm"] == "rmsnorm" ? tr::Normalization::kRMSNorm : tr::Normalization::kLayerNorm);
    if (a["mlp"] == "swiglu")
      cfg.gated_linear_unit(true).activation(tr::Activation::kSilu);
    else if (a["mlp"] == "gelu_tanh")
      cfg.activation(tr::Activation::kGeluTanh);
    else if (a["mlp"] == "squared_relu")
      cfg.activation(tr::Activation::kSquaredRelu);
    else
      TORCH_CHECK(a["mlp"] == "gelu", "[gpt_parity_dump] --mlp: gelu, gelu_tanh, squared_relu or swiglu");

    if (i64("experts") > 0) {
      std::vector<int64_t> pattern;
      for (size_t at = 0; at < a["moe-layers"].size(); at += 2) pattern.push_back(a["moe-layers"][at] - '0');
      cfg.num_moe_experts(i64("experts"))
          .moe_layer_pattern(pattern)
          .moe_router_topk(i64("topk"))
          .moe_router_score_function(a["score"])
          .moe_router_pre_softmax(i64("pre-softmax") != 0)
          .moe_shared_expert_gate(i64("shared-gate") != 0)
          .moe_token_drop_policy(a["drop"])
          .moe_pad_expert_input_to_capacity(i64("pad") != 0)
          .moe_router_load_balancing_type(a["balancing"])
          .moe_aux_loss_coeff(std::stod(a["aux-coeff"]));
      if (i64("moe-ffn") > 0) cfg.moe_ffn_hidden_size(i64("moe-ffn"));
      if (std::stod(a["topk-scaling"]) > 0) cfg.moe_router_topk_scaling_factor(std::stod(a["topk-scaling"]));
      if (i64("group-topk") > 0)
        cfg.moe_router_num_groups(i64("router-groups")).moe_router_group_topk(i64("group-topk"));
      if (i64("shared-ffn") > 0) cfg.moe_shared_expert_intermediate_size(i64("shared-ffn"));
      if (std::stod(a["capacity"]) > 0) cfg.moe_expert_capacity_factor(std::stod(a["capacity"]));
      if (std::stod(a["z-coeff"]) >= 0) cfg.moe_z_loss_coeff(std::stod(a["z-coeff"]));
    }
    GPTModelOptions opts(cfg, i64("vocab"), i64("max-seq"));
    opts.make_vocab_size_divisible_by(i64("divisible-by"))
        .share_embeddings_and_output_weights(i64("tied") != 0)
        .position_embedding_type(megatron::models::common::parse_position_embedding_type(
            a["position"] == "learned" ? "learned_absolute" : a["position"], "[gpt_parity_dump] --position"))
        .embed_layernorm(i64("embed-ln") != 0)
        .rotary_percent(std::stod(a["rotary-percent"]))
        .rotary_base(std::stod(a["rotary-base"]))
        .seed(static_cast<uint64_t>(i64("seed")));
    if (i64("pad-vocab-to") > 0) opts.pad_vocab_size_to(i64("pad-vocab-to"));
    if (std::stod(a["rope-scaling-factor"]) > 0)
      opts.rope_scaling(megatron::models::gpt::RopeScaling{std::stod(a["rope-scaling-factor"]),
                                                           std::stod(a["rope-low"]), std::stod(a["rope-high"]),
                                                           i64("rope-original")});
    GPTModel model(opts);
    if (!a["load"].empty()) model->load_state_dict_file(a["load"]);  // e.g. written by torch.save
    model->eval();

    const int64_t b = i64("batch"), s = i64("seq");
    auto gen = at::make_generator<at::CPUGeneratorImpl>(i64("seed") + 1);
    at::Tensor ids = at::randint(i64("vocab"), {b, s + 1}, gen, at::kLong);
    at::Tensor input_ids = ids.narrow(1, 0, s).contiguous();
    at::Tensor labels = ids.narrow(1, 1, s).contiguous();
    if (!a["inputs"].empty()) {
      input_ids = megatron::models::common::load_tensor_dict(a["inputs"]).at("input_ids").to(at::kLong).contiguous();
      labels = input_ids.roll(-1, 1).contiguous();
    }
    at::Tensor logits;
    {
      at::NoGradGuard no_grad;
      logits = model->forward(input_ids);
    }
    if (i64("train") != 0) model->train();  // dropout is 0: only the auxiliary losses differ
    at::Tensor loss = model->forward(input_ids, {}, {}, labels);
    loss.mean().backward();

    std::map<std::string, at::Tensor> out = model->state_dict();
    for (const auto& item : model->named_parameters()) out["grad/" + item.key()] = item.value().grad();
    out["input_ids"] = input_ids;
    out["labels"] = labels;
    out["logits"] = logits;
    out["loss"] = loss.detach();
    megatron::models::common::save_tensor_dict(a["out"], out);
    return 0;
  } catch (const c10::Error& e) {
    std::fprintf(stderr, "%s\n", e.what_without_backtrace());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s\n", e.what());
  }
  return 1;
}
