"""pretrain_gpt with mixture-of-experts layers (docs/moe.md): data and pipeline parallelism give
the single-rank run's losses and gradient norms (which holds only if the auxiliary losses enter
the backward with the main loss's scale on every stage and micro-batch), a resume continues the
run bit for bit, and the MoE flags Megatron-LM refuses, or this build does not compute yet, are
one line each. The layer's numerics are test_gpt_parity.py's moe_* cases."""
import json
import subprocess

import pytest
import torch

from data_helpers import MPIRUN, program

MODEL = ["--num-layers", "4", "--hidden-size", "32", "--num-attention-heads", "4", "--seq-length", "16",
         "--micro-batch-size", "2", "--global-batch-size", "8", "--lr", "3e-3", "--log-interval", "1",
         "--eval-iters", "0", "--attention-dropout", "0", "--hidden-dropout", "0", "--mock-data",
         "--vocab-size", "128", "--normalization", "RMSNorm", "--swiglu", "--disable-bias-linear",
         "--position-embedding-type", "rope", "--untie-embeddings-and-output-weights"]
MOE = ["--num-experts", "4", "--moe-router-topk", "2", "--moe-ffn-hidden-size", "48", "--moe-layer-freq",
       "[1,0,1,1]", "--moe-aux-loss-coeff", "1e-2", "--moe-z-loss-coeff", "1e-3",
       "--moe-shared-expert-intermediate-size", "32", "--moe-shared-expert-gate"]


def train(tmp_path, name, flags, ranks=1, iters=4):
    metrics = tmp_path / f"{name}.jsonl"
    cmd = [program("pretrain_gpt"), *MODEL, *MOE, "--train-iters", str(iters), "--metrics-file", str(metrics),
           *map(str, flags)]
    if ranks > 1:
        cmd = MPIRUN + ["-np", str(ranks)] + cmd
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    rows = [json.loads(line) for line in open(metrics)]
    # Megatron-LM's log names: each auxiliary loss over its coefficient, per MoE layer and micro-batch.
    assert all(f" load_balancing_loss: " in line and " z_loss: " in line
               for line in proc.stdout.splitlines() if " iteration " in line and " lm loss: " in line), proc.stdout[-2000:]
    return [(r["iteration"], r["lm loss"], r["grad_norm"], r["load_balancing_loss"], r["z_loss"])
            for r in rows if r["type"] == "train"]


def same(got, want):
    assert [r[0] for r in got] == [r[0] for r in want]
    assert [r[1:] for r in got] == [pytest.approx(r[1:], rel=1e-5) for r in want]


def test_data_and_pipeline_parallel_moe_runs_give_the_single_rank_losses(tmp_path):
    want = train(tmp_path, "single", [])
    assert want[-1][1] < want[0][1]  # it trains
    # Near balance the Switch loss is about 1 and the z-loss about log(experts)^2 = 1.92.
    assert all(0.5 < r[3] < 4 and 1 < r[4] < 3 for r in want), want
    same(train(tmp_path, "dp2", [], ranks=2), want)
    same(train(tmp_path, "pp2", ["--pipeline-model-parallel-size", "2"], ranks=2), want)
    same(train(tmp_path, "dp2_dist_opt", ["--use-distributed-optimizer"], ranks=2), want)


def test_a_moe_run_resumes_bit_for_bit(tmp_path):
    ckpt = tmp_path / "ckpt"
    whole = train(tmp_path, "whole", [])
    train(tmp_path, "first", ["--save", ckpt, "--save-interval", "2", "--exit-interval", "2"])
    resumed = train(tmp_path, "resumed", ["--load", ckpt])
    assert resumed == whole[2:]
    # torch.load opens it as Megatron-LM's loader does, --moe-layer-freq evaluated as Megatron-LM keeps it.
    saved = torch.load(ckpt / "iter_0000002" / "mp_rank_00" / "model_optim_rng.pt", weights_only=True)
    assert saved["args"].moe_layer_freq == [1, 0, 1, 1] and saved["args"].num_experts == 4
    # What the converters cannot write for MoE layers yet is refused, nothing written.
    for flags, message in ((["--export-hf", tmp_path / "hf"], "Hugging Face export of MoE models"),
                           (["--save", tmp_path / "tp2", "--target-tensor-parallel-size", "2"],
                            "not implemented with tensor parallelism yet")):
        proc = subprocess.run([program("convert_checkpoint"), "--load", str(ckpt), *map(str, flags)],
                              capture_output=True, text=True, timeout=120)
        assert proc.returncode == 1 and message in proc.stderr, proc.stderr[-2000:]
    assert not (tmp_path / "hf").exists() and not (tmp_path / "tp2").exists()


@pytest.mark.parametrize("flags, message", [
    (["--moe-router-topk", "5"], "--moe-router-topk (5) must not exceed --num-experts (4)"),
    (["--moe-layer-freq", "[1,0]*3"], "--moe-layer-freq '[1,0]*3' lists 6 layers, but --num-layers is 4"),
    (["--moe-layer-freq", "[1,0]*2; import os"], "--moe-layer-freq '[1,0]*2; import os': unexpected ';'"),
    (["--moe-router-group-topk", "2"], "--moe-router-group-topk needs --moe-router-num-groups"),
    (["--moe-router-num-groups", "3", "--moe-router-group-topk", "1"],
     "--num-experts (4) must be divisible by --moe-router-num-groups (3)"),
    (["--moe-pad-expert-input-to-capacity"], "--moe-pad-expert-input-to-capacity needs --moe-expert-capacity-factor"),
    (["--moe-expert-capacity-factor", "0"], "--moe-expert-capacity-factor must be positive (got 0)"),
    (["--moe-router-score-function", "relu"], "--moe-router-score-function must be one of softmax, sigmoid"),
    (["--moe-router-enable-expert-bias"], "--moe-router-enable-expert-bias needs --moe-router-score-function sigmoid"),
    (["--expert-model-parallel-size", "3"], "--num-experts (4) must be divisible by --expert-model-parallel-size (3)"),
    (["--expert-model-parallel-size", "2"], "expert parallelism is not implemented yet"),
])
def test_moe_flags_megatron_refuses_or_not_yet_here_are_one_line(flags, message):
    proc = subprocess.run([program("pretrain_gpt"), *MODEL, *MOE, "--train-iters", "1", *flags],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2, proc.stderr[-2000:]
    lines = [l for l in proc.stderr.splitlines() if l.startswith("pretrain_gpt: error: ")]
    assert len(lines) == 1 and message in lines[0], proc.stderr[-2000:]


def test_the_moe_layer_is_usable_from_python_under_megatron_cores_names():
    """megatron_cpp.core.transformer.moe's MoELayer and TopKRouter, built from a TransformerConfig
    as a custom model_builder would: Megatron-Core's parameter names, and the output and the
    gradients (load-balancing loss included) of the reference MoE loaded with its weights."""
    import torch

    from gpt_reference import Config, MoE, load_mlp
    from megatron_cpp.core.transformer import TransformerConfig
    from megatron_cpp.core.transformer.moe import MoELayer, TopKRouter

    config = TransformerConfig(num_layers=1, hidden_size=16, num_attention_heads=2, add_bias_linear=False,
                               gated_linear_unit=True, activation="silu", num_moe_experts=4, moe_router_topk=2,
                               moe_ffn_hidden_size=24, moe_shared_expert_intermediate_size=8,
                               moe_shared_expert_gate=True, moe_aux_loss_coeff=0.01)
    layer = MoELayer(config)
    weights = dict(layer.named_parameters())
    assert {"router.weight", "experts.local_experts.3.linear_fc2.weight", "shared_experts.gate_weight"} <= set(weights)
    cfg = Config(vocab_size=1, hidden_size=16, num_layers=1, num_heads=2, num_kv_heads=2, ffn_hidden_size=64,
                 mlp="swiglu", bias=False, num_experts=4, moe_ffn_hidden_size=24, shared_ffn_hidden_size=8,
                 shared_gate=True, aux_coeff=0.01)
    ref = MoE(cfg)
    with torch.no_grad():
        ref.router.weight.copy_(weights["router.weight"])
        for e, expert in enumerate(ref.experts):
            load_mlp(cfg, expert, weights, f"experts.local_experts.{e}.")
        load_mlp(cfg, ref.shared, weights, "shared_experts.")
        ref.shared_gate.weight.copy_(weights["shared_experts.gate_weight"])
    x = torch.randn(5, 3, 16, generator=torch.Generator().manual_seed(0))  # [s, b, h]
    layer.train()
    out = layer(x)
    want = ref(x.transpose(0, 1)).transpose(0, 1)
    assert torch.allclose(out, want, atol=1e-5), (out - want).abs().max()
    out.square().sum().backward()
    (want.square().sum() + sum(ref.aux_losses)).backward()
    assert torch.allclose(weights["router.weight"].grad, ref.router.weight.grad, atol=1e-5)
    probs, routing_map = TopKRouter(config)(x)
    assert probs.shape == routing_map.shape == (15, 4) and (routing_map.sum(1) == 2).all()
    assert torch.allclose(probs.sum(1), torch.ones(15), atol=1e-6)  # softmax over the top 2
