"""megatron-cpp's GPTModel against the plain PyTorch reference in gpt_reference.py: the C++ tool
gpt_parity_dump writes its weights, inputs, logits, per-token loss and gradients; the reference
is built from those weights and must agree (logits and loss within 1e-5, gradients within 1e-5,
relative to the largest entry). The MoE cases take the loss in training mode, so that the
load-balancing and z losses join the gradients (with scale 1, one micro-batch)."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from gpt_reference import Config, MoE, from_megatron_state_dict  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
BUILD = Path(os.environ.get("MEGATRON_BUILD_DIR", ROOT / "build"))
TOOL = BUILD / "bin" / "gpt_parity_dump"

# name -> (tool options, reference config fields)
CASES = {
    "gpt2": dict(
        args=dict(layers=2, hidden=64, heads=4, vocab=300, **{"max-seq": 32}, seq=16, batch=2,
                  norm="layernorm", mlp="gelu", bias=1, position="learned", tied=1),
        ref=dict(num_layers=2, hidden_size=64, num_heads=4, num_kv_heads=4, ffn_hidden_size=256,
                 max_seq_len=32, norm="layernorm", mlp="gelu", bias=True, position="learned",
                 tied=True)),
    "gpt2_tanh_untied": dict(
        args=dict(layers=2, hidden=48, heads=6, vocab=200, **{"divisible-by": 64}, seq=12,
                  batch=3, mlp="gelu_tanh", tied=0),
        ref=dict(num_layers=2, hidden_size=48, num_heads=6, num_kv_heads=6, ffn_hidden_size=192,
                 max_seq_len=32, mlp="gelu_tanh", tied=False)),
    # Nemotron's MLP: squared ReLU, no gate, biases off.
    "squared_relu": dict(
        args=dict(layers=2, hidden=48, heads=4, ffn=80, vocab=200, seq=12, batch=2, norm="rmsnorm",
                  mlp="squared_relu", bias=0, position="rope", tied=0),
        ref=dict(num_layers=2, hidden_size=48, num_heads=4, num_kv_heads=4, ffn_hidden_size=80, norm="rmsnorm",
                 mlp="squared_relu", bias=False, position="rope", tied=False)),
    "llama": dict(
        args=dict(layers=2, hidden=64, heads=8, groups=2, ffn=96, vocab=300, seq=16, batch=2,
                  norm="rmsnorm", mlp="swiglu", bias=0, position="rope", tied=0,
                  **{"rotary-base": 10000}),
        ref=dict(num_layers=2, hidden_size=64, num_heads=8, num_kv_heads=2, ffn_hidden_size=96,
                 norm="rmsnorm", mlp="swiglu", bias=False, position="rope", tied=False)),
    "llama_partial_rope": dict(
        args=dict(layers=3, hidden=64, heads=4, groups=4, ffn=128, vocab=256, seq=10, batch=2,
                  norm="rmsnorm", mlp="swiglu", bias=1, position="rope", tied=1,
                  **{"rotary-percent": 0.5, "rotary-base": 500}),
        ref=dict(num_layers=3, hidden_size=64, num_heads=4, num_kv_heads=4, ffn_hidden_size=128,
                 norm="rmsnorm", mlp="swiglu", bias=True, position="rope", tied=True,
                 rotary_percent=0.5, rotary_base=500.0)),
    # BLOOM: ALiBi over 6 heads (not a power of two), LayerNorm on the embeddings, tanh GELU,
    # the vocabulary padded to an exact size.
    "bloom": dict(
        args=dict(layers=2, hidden=48, heads=6, vocab=250, seq=16, batch=2, norm="layernorm", mlp="gelu_tanh",
                  bias=1, position="alibi", tied=1, **{"embed-ln": 1, "pad-vocab-to": 260}),
        ref=dict(num_layers=2, hidden_size=48, num_heads=6, num_kv_heads=6, ffn_hidden_size=192,
                 mlp="gelu_tanh", position="alibi", embed_ln=True)),
    "qwen2_qkv_bias": dict(
        args=dict(layers=2, hidden=64, heads=8, groups=2, ffn=96, vocab=300, seq=16, batch=2, norm="rmsnorm",
                  mlp="swiglu", bias=0, position="rope", tied=1, eps=1e-6,
                  **{"qkv-bias": 1, "rotary-base": 1000000}),
        ref=dict(num_layers=2, hidden_size=64, num_heads=8, num_kv_heads=2, ffn_hidden_size=96, norm="rmsnorm",
                 eps=1e-6, mlp="swiglu", bias=False, qkv_bias=True, position="rope", tied=True,
                 rotary_base=1e6)),
    # Llama 3 scaling with an original context of 64, so that the 8 frequencies of a 16-wide head
    # fall in all three bands (kept, blended, divided).
    "llama3_rope_scaling": dict(
        args=dict(layers=2, hidden=64, heads=4, groups=2, ffn=96, vocab=300, seq=16, batch=2, norm="rmsnorm",
                  mlp="swiglu", bias=0, position="rope", tied=0,
                  **{"rotary-base": 10000, "rope-scaling-factor": 8, "rope-low": 1, "rope-high": 4,
                     "rope-original": 64}),
        ref=dict(num_layers=2, hidden_size=64, num_heads=4, num_kv_heads=2, ffn_hidden_size=96, norm="rmsnorm",
                 mlp="swiglu", bias=False, position="rope", tied=False, rope_scaling=(8.0, 1.0, 4.0, 64))),
    "rotary_interleaved": dict(
        args=dict(layers=2, hidden=64, heads=4, groups=4, ffn=128, vocab=256, seq=10, batch=2, norm="rmsnorm",
                  mlp="swiglu", bias=0, position="rope", tied=1, **{"rotary-percent": 0.5, "rotary-interleaved": 1}),
        ref=dict(num_layers=2, hidden_size=64, num_heads=4, num_kv_heads=4, ffn_hidden_size=128, norm="rmsnorm",
                 mlp="swiglu", bias=False, position="rope", tied=True, rotary_percent=0.5, rotary_interleaved=True)),
    # Mixtral's routing (softmax over the top 2), a dense layer after an MoE one, both losses.
    "moe_mixtral": dict(
        args=dict(layers=2, hidden=32, heads=4, groups=4, ffn=64, vocab=128, seq=8, batch=3, norm="rmsnorm",
                  mlp="swiglu", bias=0, position="rope", tied=0, experts=4, **{"moe-layers": "1,0", "moe-ffn": 48},
                  topk=2, **{"aux-coeff": 0.01, "z-coeff": 0.001}, train=1),
        ref=dict(num_layers=2, hidden_size=32, num_heads=4, num_kv_heads=4, ffn_hidden_size=64, norm="rmsnorm",
                 mlp="swiglu", bias=False, position="rope", tied=False, num_experts=4, moe_layers=[1, 0],
                 moe_ffn_hidden_size=48, topk=2, aux_coeff=0.01, z_coeff=0.001)),
    # Softmax over all experts before the top-k, a gated shared expert, the per-sequence loss.
    "moe_shared_expert_seq_aux": dict(
        args=dict(layers=2, hidden=32, heads=4, vocab=128, seq=8, batch=2, norm="rmsnorm", mlp="swiglu", bias=0,
                  position="rope", tied=1, experts=4, **{"moe-ffn": 24, "pre-softmax": 1, "shared-ffn": 40,
                                                          "shared-gate": 1, "aux-coeff": 0.02},
                  balancing="seq_aux_loss", train=1),
        ref=dict(num_layers=2, hidden_size=32, num_heads=4, num_kv_heads=4, ffn_hidden_size=128, norm="rmsnorm",
                 mlp="swiglu", bias=False, position="rope", tied=True, num_experts=4, moe_ffn_hidden_size=24,
                 pre_softmax=True, shared_ffn_hidden_size=40, shared_gate=True, balancing="seq_aux_loss",
                 aux_coeff=0.02)),
    # DeepSeek-V3's routing: sigmoid scores, top 4 of 8 experts within the best 2 of 4 groups, scaled.
    "moe_sigmoid_group_limited": dict(
        args=dict(layers=2, hidden=32, heads=4, vocab=128, seq=8, batch=2, norm="rmsnorm", mlp="swiglu", bias=0,
                  position="rope", tied=1, experts=8, topk=4, score="sigmoid",
                  **{"moe-ffn": 16, "router-groups": 4, "group-topk": 2, "topk-scaling": 2.5, "aux-coeff": 0.01},
                  train=1),
        ref=dict(num_layers=2, hidden_size=32, num_heads=4, num_kv_heads=4, ffn_hidden_size=128, norm="rmsnorm",
                 mlp="swiglu", bias=False, position="rope", tied=True, num_experts=8, topk=4, score="sigmoid",
                 moe_ffn_hidden_size=16, num_groups=4, group_topk=2, topk_scaling=2.5, aux_coeff=0.01)),
    # Switch Transformer's capacity: past it the tokens of lowest probability are dropped ...
    "moe_capacity_probs": dict(
        args=dict(layers=2, hidden=32, heads=4, vocab=128, seq=8, batch=2, bias=0, mlp="gelu", experts=4,
                  capacity=0.5, **{"moe-ffn": 32, "aux-coeff": 0.01}, train=1),
        ref=dict(num_layers=2, hidden_size=32, num_heads=4, num_kv_heads=4, ffn_hidden_size=128, max_seq_len=32, bias=False,
                 num_experts=4, moe_ffn_hidden_size=32, capacity_factor=0.5, aux_coeff=0.01)),
    # ... or the latest, with every expert padded to its capacity.
    "moe_capacity_position_padded": dict(
        args=dict(layers=2, hidden=32, heads=4, vocab=128, seq=8, batch=2, bias=0, mlp="gelu", experts=4,
                  capacity=0.75, drop="position", pad=1, **{"moe-ffn": 32}, train=1),
        ref=dict(num_layers=2, hidden_size=32, num_heads=4, num_kv_heads=4, ffn_hidden_size=128, max_seq_len=32, bias=False,
                 num_experts=4, moe_ffn_hidden_size=32, capacity_factor=0.75, drop_policy="position")),
    # GPT-2-shaped experts with biases: fc2's bias weighted by the token's probability, as the
    # whole expert output is (Megatron-Core's experts), and the fused bias-GELU in each expert.
    "moe_gelu_experts_with_biases": dict(
        args=dict(layers=2, hidden=32, heads=4, vocab=128, seq=8, batch=2, bias=1, mlp="gelu", experts=4,
                  **{"moe-ffn": 40, "aux-coeff": 0.01}, train=1),
        ref=dict(num_layers=2, hidden_size=32, num_heads=4, num_kv_heads=4, ffn_hidden_size=128, max_seq_len=32,
                 bias=True, num_experts=4, moe_ffn_hidden_size=40, aux_coeff=0.01)),
    # S-BASE's routing (Megatron-LM's sinkhorn): top 2 of the Sinkhorn-balanced scores in training,
    # weighted by the softmax; top 1 weighted by the sigmoid.
    "moe_sinkhorn_top2": dict(
        args=dict(layers=2, hidden=32, heads=4, vocab=128, seq=8, batch=3, norm="rmsnorm", mlp="swiglu", bias=0,
                  position="rope", tied=1, experts=4, topk=2, balancing="sinkhorn", **{"moe-ffn": 24}, train=1),
        ref=dict(num_layers=2, hidden_size=32, num_heads=4, num_kv_heads=4, ffn_hidden_size=128, norm="rmsnorm",
                 mlp="swiglu", bias=False, position="rope", tied=True, num_experts=4, topk=2, balancing="sinkhorn",
                 moe_ffn_hidden_size=24)),
    "moe_sinkhorn_top1_eval": dict(
        args=dict(layers=2, hidden=32, heads=4, vocab=128, seq=8, batch=2, bias=0, mlp="gelu", experts=4, topk=1,
                  balancing="sinkhorn", **{"moe-ffn": 32}),
        ref=dict(num_layers=2, hidden_size=32, num_heads=4, num_kv_heads=4, ffn_hidden_size=128, max_seq_len=32,
                 bias=False, num_experts=4, topk=1, balancing="sinkhorn", moe_ffn_hidden_size=32)),
    "no_positions": dict(
        args=dict(layers=2, hidden=32, heads=4, vocab=100, seq=8, batch=2, position="none"),
        ref=dict(num_layers=2, hidden_size=32, num_heads=4, num_kv_heads=4, ffn_hidden_size=128, position="none")),
}


def rel_err(a: torch.Tensor, b: torch.Tensor) -> float:
    assert a.shape == b.shape, (a.shape, b.shape)
    return ((a.double() - b.double()).abs().max() / b.double().abs().max().clamp_min(1e-12)).item()


def megatron_grads(cfg: Config, model) -> dict[str, torch.Tensor]:
    """The reference's gradients in megatron's names and fused layouts."""
    d, ng = cfg.head_dim, cfg.num_kv_heads
    per = cfg.num_heads // ng
    out = {"embedding.word_embeddings.weight": model.wte.weight.grad,
           "decoder.final_layernorm.weight": model.ln_f.weight.grad}
    if model.wpe is not None:
        out["embedding.position_embeddings.weight"] = model.wpe.weight.grad
    if model.ln_emb is not None:
        out["embedding.word_embeddings.norm.weight"] = model.ln_emb.weight.grad
        out["embedding.word_embeddings.norm.bias"] = model.ln_emb.bias.grad
    if cfg.norm == "layernorm":
        out["decoder.final_layernorm.bias"] = model.ln_f.bias.grad
    if model.lm_head is not None:
        out["output_layer.weight"] = model.lm_head.weight.grad

    def fuse_qkv(q, k, v):
        tail = q.shape[1:]
        return torch.cat([q.reshape(ng, per * d, *tail), k.reshape(ng, d, *tail),
                          v.reshape(ng, d, *tail)], dim=1).reshape(-1, *tail)

    def mlp_grads(m, prefix):
        fc1 = [m.gate_proj, m.up_proj] if cfg.mlp == "swiglu" else [m.up_proj]
        out[prefix + "linear_fc1.weight"] = torch.cat([l.weight.grad for l in fc1])
        out[prefix + "linear_fc2.weight"] = m.down_proj.weight.grad
        if cfg.bias:
            out[prefix + "linear_fc1.bias"] = torch.cat([l.bias.grad for l in fc1])
            out[prefix + "linear_fc2.bias"] = m.down_proj.bias.grad

    for i, blk in enumerate(model.blocks):
        p = f"decoder.layers.{i}."
        a, m = blk.attn, blk.mlp
        out[p + "input_layernorm.weight"] = blk.ln_1.weight.grad
        out[p + "pre_mlp_layernorm.weight"] = blk.ln_2.weight.grad
        out[p + "self_attention.linear_qkv.weight"] = fuse_qkv(a.q_proj.weight.grad, a.k_proj.weight.grad, a.v_proj.weight.grad)
        out[p + "self_attention.linear_proj.weight"] = a.o_proj.weight.grad
        if isinstance(m, MoE):
            out[p + "mlp.router.weight"] = m.router.weight.grad
            for e, expert in enumerate(m.experts):
                mlp_grads(expert, p + f"mlp.experts.local_experts.{e}.")
            if m.shared is not None:
                mlp_grads(m.shared, p + "mlp.shared_experts.")
            if m.shared_gate is not None:
                out[p + "mlp.shared_experts.gate_weight"] = m.shared_gate.weight.grad
        else:
            mlp_grads(m, p + "mlp.")
        if cfg.norm == "layernorm":
            out[p + "input_layernorm.bias"] = blk.ln_1.bias.grad
            out[p + "pre_mlp_layernorm.bias"] = blk.ln_2.bias.grad
        if cfg.bias or cfg.qkv_bias:
            out[p + "self_attention.linear_qkv.bias"] = fuse_qkv(a.q_proj.bias.grad, a.k_proj.bias.grad, a.v_proj.bias.grad)
        if cfg.bias:
            out[p + "self_attention.linear_proj.bias"] = a.o_proj.bias.grad
    return out


@pytest.fixture(scope="module")
def tool() -> Path:
    if not TOOL.exists():
        pytest.fail(f"{TOOL} not found: build the project first (scripts/build.sh) or set MEGATRON_BUILD_DIR")
    return TOOL


@pytest.mark.parametrize("name", sorted(CASES))
def test_matches_reference(name, tool, tmp_path):
    case = CASES[name]
    out = tmp_path / f"{name}.pt"
    argv = [str(tool), "--out", str(out)]
    for k, v in case["args"].items():
        argv += [f"--{k}", str(v)]
    subprocess.run(argv, check=True)
    dump = torch.load(out, weights_only=True)  # plain dict of tensors

    vocab_padded = dump["embedding.word_embeddings.weight"].shape[0]
    cfg = Config(vocab_size=vocab_padded, **case["ref"])
    model = from_megatron_state_dict(cfg, dump)
    params = {k for k in dump if not k.startswith("grad/") and k not in ("input_ids", "labels", "logits", "loss")}
    # Every megatron parameter was consumed by the reference (same parameter count).
    assert sum(dump[k].numel() for k in params) == sum(p.numel() for p in model.parameters())

    ids, labels = dump["input_ids"], dump["labels"]
    model.eval()  # as the dump's logits (sinkhorn routes otherwise in training)
    with torch.no_grad():
        logits = model(ids)
    assert dump["logits"].shape == logits.shape == (ids.shape[0], ids.shape[1], vocab_padded)
    assert rel_err(dump["logits"], logits) <= 1e-5
    assert (dump["logits"] - logits).abs().max().item() <= 1e-5

    if case["args"].get("train"):
        model.train()  # no dropout in the reference: only the auxiliary losses differ
    loss = model(ids, labels)
    assert rel_err(dump["loss"], loss.detach()) <= 1e-5
    aux = model.aux_loss()
    if case["args"].get("train") and (case["ref"].get("aux_coeff") or case["ref"].get("z_coeff")):
        assert aux.item() > 0  # the case exercises the auxiliary losses
    (loss.mean() + aux).backward()
    grads = megatron_grads(cfg, model)
    assert set(grads) == params
    for k, g in grads.items():
        assert rel_err(dump["grad/" + k], g) <= 1e-5, k


def test_loads_weights_saved_by_torch_save(tool, tmp_path):
    """A state dict written by Python's torch.save (weights changed in Python) loads into the C++
    model, whose logits then match the reference built from the same changed weights."""
    case = CASES["llama"]
    args = []
    for k, v in case["args"].items():
        args += [f"--{k}", str(v)]
    first = tmp_path / "first.pt"
    subprocess.run([str(tool), "--out", str(first)] + args, check=True)
    dump = torch.load(first, weights_only=True)
    skip = ("input_ids", "labels", "logits", "loss")
    changed = {k: (v * 1.5 + 0.01 * torch.randn(v.shape, generator=torch.Generator().manual_seed(i)))
               for i, (k, v) in enumerate(sorted(dump.items())) if not k.startswith("grad/") and k not in skip}
    state = tmp_path / "changed_state.pt"
    torch.save(changed, state)
    second = tmp_path / "second.pt"
    subprocess.run([str(tool), "--out", str(second), "--load", str(state)] + args, check=True)
    loaded = torch.load(second, weights_only=True)
    for k, v in changed.items():
        assert torch.equal(loaded[k], v), k
    cfg = Config(vocab_size=dump["embedding.word_embeddings.weight"].shape[0], **case["ref"])
    model = from_megatron_state_dict(cfg, changed)
    with torch.no_grad():
        logits = model(loaded["input_ids"])
    assert rel_err(loaded["logits"], logits) <= 1e-5
    assert rel_err(loaded["logits"], dump["logits"]) > 1e-2  # the new weights were used
