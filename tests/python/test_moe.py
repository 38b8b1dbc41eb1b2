"""pretrain_gpt with mixture-of-experts layers (docs/moe.md): data and pipeline parallelism give
the single-rank run's losses and gradient norms (which holds only if the auxiliary losses enter
the backward with the main loss's scale on every stage and micro-batch), a resume continues the
run bit for bit, and the MoE flags Megatron-LM refuses, or this build does not compute yet, are
one line each. The layer's numerics are test_gpt_parity.py's moe_* cases."""
import json
import subprocess

import pytest
import torch

from data_helpers import MPIRUN, check_args, program

MODEL = ["--num-layers", "4", "--hidden-size", "32", "--num-attention-heads", "4", "--seq-length", "16",
         "--micro-batch-size", "2", "--global-batch-size", "8", "--lr", "3e-3", "--log-interval", "1",
         "--eval-iters", "0", "--attention-dropout", "0", "--hidden-dropout", "0", "--mock-data",
         "--vocab-size", "128", "--normalization", "RMSNorm", "--swiglu", "--disable-bias-linear",
         "--position-embedding-type", "rope", "--untie-embeddings-and-output-weights"]
MOE = ["--num-experts", "4", "--moe-router-topk", "2", "--moe-ffn-hidden-size", "48", "--moe-layer-freq",
       "[1,0,1,1]", "--moe-aux-loss-coeff", "1e-2", "--moe-z-loss-coeff", "1e-3",
       "--moe-shared-expert-intermediate-size", "32", "--moe-shared-expert-gate"]


def train(tmp_path, name, flags, ranks=1, iters=4, losses=("load_balancing_loss", "z_loss")):
    metrics = tmp_path / f"{name}.jsonl"
    cmd = [program("pretrain_gpt"), *MODEL, *MOE, "--train-iters", str(iters), "--metrics-file", str(metrics),
           *map(str, flags)]
    if ranks > 1:
        cmd = MPIRUN + ["-np", str(ranks)] + cmd
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    rows = [json.loads(line) for line in open(metrics)]
    # Megatron-LM's log names: each auxiliary loss over its coefficient, per MoE layer and micro-batch.
    assert all(all(f" {loss}: " in line for loss in losses)
               for line in proc.stdout.splitlines() if " iteration " in line and " lm loss: " in line), proc.stdout[-2000:]
    return [(r["iteration"], r["lm loss"], r["grad_norm"], *(r[loss] for loss in losses))
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


def test_expert_parallel_runs_give_the_single_rank_losses(tmp_path):
    """The experts split over 2 or 4 ranks, tokens exchanged all-to-all or all-gathered, the
    experts' gradients averaged over their expert-data-parallel replicas (sharded there with the
    distributed optimizer) and their norm summed over the expert-parallel ranks."""
    want = train(tmp_path, "single", [])
    ep = ["--expert-model-parallel-size"]
    same(train(tmp_path, "ep2_a2a", ep + ["2", "--moe-token-dispatcher-type", "alltoall"], ranks=2), want)
    same(train(tmp_path, "ep2_dp4_ag_dist", ep + ["2", "--moe-token-dispatcher-type", "allgather",
                                                  "--use-distributed-optimizer", "--overlap-grad-reduce"], ranks=4), want)
    same(train(tmp_path, "ep4_a2a_dist", ep + ["4", "--moe-token-dispatcher-type", "alltoall",
                                               "--use-distributed-optimizer"], ranks=4), want)
    same(train(tmp_path, "ep2_pp2", ep + ["2", "--moe-token-dispatcher-type", "alltoall",
                                          "--pipeline-model-parallel-size", "2"], ranks=4), want)


def test_tensor_parallel_moe_runs_give_the_single_rank_losses(tmp_path):
    """With sequence parallelism, each expert split over the tensor-parallel ranks (expert TP =
    TP) or whole with the tensor-parallel ranks holding other experts (expert TP 1): the
    dispatchers move tokens over the ETP x EP ranks and sum the experts' partial outputs, the
    router's gradient is summed over TP and the auxiliary losses count the tokens of every TP rank,
    the experts' gradient norm summed over their shards and holders once each; an expert TP 1 run
    saves and resumes bit for bit."""
    # The vocabulary padded alike at TP 1 and 2 (to 128, not 128 x TP).
    want = train(tmp_path, "single", ["--make-vocab-size-divisible-by", "64"])
    tp = ["--tensor-model-parallel-size", "2", "--sequence-parallel", "--make-vocab-size-divisible-by", "64"]
    same(train(tmp_path, "tp2_ag", tp, ranks=2), want)
    same(train(tmp_path, "tp2_ep2_a2a_dist", tp + ["--expert-model-parallel-size", "2", "--moe-token-dispatcher-type",
                                                   "alltoall", "--use-distributed-optimizer"], ranks=4), want)
    same(train(tmp_path, "tp2_ep2_ag", tp + ["--expert-model-parallel-size", "2", "--moe-token-dispatcher-type",
                                                "allgather"], ranks=4), want)
    etp1 = tp + ["--expert-tensor-parallel-size", "1", "--expert-model-parallel-size", "2"]
    whole = train(tmp_path, "tp2_etp1_ep2_a2a", etp1 + ["--moe-token-dispatcher-type", "alltoall"], ranks=2)
    same(whole, want)
    same(train(tmp_path, "tp2_etp1_ep4_ag_dist", tp + ["--expert-tensor-parallel-size", "1",
                                                      "--expert-model-parallel-size", "4", "--use-distributed-optimizer"],
               ranks=4), want)
    ckpt = tmp_path / "ckpt"
    train(tmp_path, "first", etp1 + ["--moe-token-dispatcher-type", "alltoall", "--save", ckpt, "--save-interval", "2",
                                     "--exit-interval", "2"], ranks=2)
    assert train(tmp_path, "resumed", etp1 + ["--moe-token-dispatcher-type", "alltoall", "--load", ckpt],
                 ranks=2) == whole[2:]


@pytest.mark.parametrize("flags, message", [
    (["--tensor-model-parallel-size", "2"], "MoE layers with tensor parallelism need --sequence-parallel"),
    (["--tensor-model-parallel-size", "2", "--sequence-parallel", "--expert-tensor-parallel-size", "1",
      "--expert-model-parallel-size", "4"],
     "--expert-tensor-parallel-size (1) x --expert-model-parallel-size (4) must divide the tensor-, context- and "
     "data-parallel ranks (2)"),
    (["--moe-router-load-balancing-type", "sinkhorn"],
     "sinkhorn takes no auxiliary loss: --moe-aux-loss-coeff must be 0 (got 0.01)"),
])
def test_moe_layouts_this_build_does_not_compute_are_refused_at_check_args(flags, message):
    proc = check_args([*MODEL, *MOE, "--train-iters", "1", *flags], 2)
    assert proc.returncode != 0 and message in proc.stdout + proc.stderr, proc.stdout + proc.stderr


def test_sinkhorn_routing_gives_the_single_rank_losses_over_data_and_expert_parallel_ranks(tmp_path):
    """S-BASE routing balances each micro-batch's tokens on the rank that routes them: data- and
    expert-parallel runs route the same micro-batches as one rank does, so they give its losses
    (under sequence parallelism each rank balances its share of a sequence, as in Megatron-LM)."""
    flags = ["--moe-router-load-balancing-type", "sinkhorn", "--moe-aux-loss-coeff", "0"]
    want = train(tmp_path, "single", flags, iters=6, losses=("z_loss",))
    assert want[-1][1] < want[0][1], want
    same(train(tmp_path, "ep2_a2a", flags + ["--expert-model-parallel-size", "2", "--moe-token-dispatcher-type",
                                             "alltoall"], ranks=2, iters=6, losses=("z_loss",)), want)


def test_expert_bias_balances_alike_at_every_layout_and_is_saved(tmp_path):
    """--moe-router-enable-expert-bias (sigmoid scores): each iteration every bias moves by the
    update rate against its expert's load over all the ranks' tokens, so data-, tensor- and
    expert-parallel runs give one rank's losses; the biases are saved in both formats (a resume
    continues the run), float32, and after n iterations each is a multiple of the rate within n
    of them, not all zero."""
    bias = ["--moe-router-score-function", "sigmoid", "--moe-router-enable-expert-bias",
            "--moe-router-bias-update-rate", "1e-2", "--make-vocab-size-divisible-by", "64"]
    want = train(tmp_path, "single", bias)
    same(train(tmp_path, "dp2", bias, ranks=2), want)
    dist = tmp_path / "dist"
    same(train(tmp_path, "tp2_ep2", bias + ["--tensor-model-parallel-size", "2", "--sequence-parallel",
                                            "--expert-model-parallel-size", "2", "--moe-token-dispatcher-type",
                                            "alltoall", "--save", dist, "--save-interval", "2", "--ckpt-format",
                                            "torch_dist"], ranks=4), want)
    same(train(tmp_path, "from_dist", bias + ["--load", dist, "--ckpt-step", "2"]), want[2:])
    ckpt = tmp_path / "ckpt"
    train(tmp_path, "first", bias + ["--save", ckpt, "--save-interval", "2", "--exit-interval", "2"])
    assert train(tmp_path, "resumed", bias + ["--load", ckpt]) == want[2:]
    saved = torch.load(ckpt / "iter_0000002" / "mp_rank_00" / "model_optim_rng.pt", weights_only=True)["model"]
    biases = [saved[f"decoder.layers.{i}.mlp.router.expert_bias"] for i in (0, 2, 3)]
    for b in biases:
        assert b.dtype == torch.float32 and b.shape == (4,)
        steps = b / 1e-2
        assert torch.allclose(steps, steps.round(), atol=1e-4) and steps.abs().max() <= 2, b
    assert any(b.abs().sum() > 0 for b in biases), biases


def test_an_expert_parallel_run_saves_megatron_lms_rank_files_and_resumes_bit_for_bit(tmp_path):
    ckpt = tmp_path / "ckpt"
    flags = ["--expert-model-parallel-size", "2", "--moe-token-dispatcher-type", "alltoall"]
    whole = train(tmp_path, "whole", flags, ranks=2)
    train(tmp_path, "first", flags + ["--save", ckpt, "--save-interval", "2", "--exit-interval", "2"], ranks=2)
    resumed = train(tmp_path, "resumed", flags + ["--load", ckpt], ranks=2)
    assert resumed == whole[2:]
    # One folder per expert-parallel rank (mp_rank_TT_EEE), each with its two experts under their
    # local indices, as Megatron-LM's legacy checkpoints keep them.
    iter_dir = ckpt / "iter_0000002"
    assert sorted(p.name for p in iter_dir.iterdir()) == ["mp_rank_00_000", "mp_rank_00_001"]
    halves = [torch.load(iter_dir / d / "model_optim_rng.pt", weights_only=True)["model"]
              for d in ("mp_rank_00_000", "mp_rank_00_001")]
    for model in halves:
        experts = {k.split(".")[6] for k in model if ".mlp.experts.local_experts." in k}
        assert experts == {"0", "1"}, sorted(model)
    expert = "decoder.layers.0.mlp.experts.local_experts.0.linear_fc1.weight"
    assert not torch.equal(halves[0][expert], halves[1][expert])  # experts 0 and 2
    assert torch.equal(halves[0]["decoder.layers.0.mlp.router.weight"], halves[1]["decoder.layers.0.mlp.router.weight"])
    # Another expert-parallel size cannot read these files, and says so.
    proc = subprocess.run([program("pretrain_gpt"), *MODEL, *MOE, "--train-iters", "4", "--load", str(ckpt)],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode != 0 and "this run has TP 1, PP 1, EP 1" in proc.stderr, proc.stderr[-2000:]


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
    for flags, message in ((["--export-hf", tmp_path / "hf"], "no Hugging Face architecture fits this checkpoint"),
                           (["--save", tmp_path / "tp2", "--target-tensor-parallel-size", "2"],
                            "not implemented with tensor parallelism yet")):
        proc = subprocess.run([program("convert_checkpoint"), "--load", str(ckpt), *map(str, flags)],
                              capture_output=True, text=True, timeout=120)
        assert proc.returncode == 1 and message in proc.stderr, proc.stderr[-2000:]
    assert not (tmp_path / "hf").exists() and not (tmp_path / "tp2").exists()


# Hugging Face's MoE members of the Llama family, small: their config, then what our dump tool
# takes for the same model. Qwen2-MoE with a dense layer between MoE ones (mlp_only_layers) and
# the top-k probabilities left unnormalised (norm_topk_prob false: --moe-router-pre-softmax).
HF_MOE = {
    "mixtral": ("MixtralConfig", "MixtralForCausalLM",
                dict(hidden_size=32, intermediate_size=24, num_hidden_layers=2, num_attention_heads=4,
                     num_key_value_heads=2, max_position_embeddings=16, vocab_size=250, num_local_experts=4,
                     num_experts_per_tok=2, sliding_window=None),
                dict(layers=2, norm="rmsnorm", eps=1e-5, mlp="swiglu", bias=0, position="rope", tied=0, groups=2,
                     ffn=24, rotary_base=1000000, experts=4, moe_layers="1,1", moe_ffn=24, topk=2)),
    "qwen2_moe": ("Qwen2MoeConfig", "Qwen2MoeForCausalLM",
                  dict(hidden_size=32, intermediate_size=40, moe_intermediate_size=24,
                       shared_expert_intermediate_size=20, num_hidden_layers=3, num_attention_heads=4,
                       num_key_value_heads=2, max_position_embeddings=16, vocab_size=250, num_experts=4,
                       num_experts_per_tok=2, mlp_only_layers=[1], norm_topk_prob=False),
                  dict(layers=3, norm="rmsnorm", eps=1e-6, mlp="swiglu", bias=0, qkv_bias=1, position="rope", tied=0,
                       groups=2, ffn=40, experts=4, moe_layers="1,0,1", moe_ffn=24, topk=2, pre_softmax=1,
                       shared_ffn=20, shared_gate=1)),
}


@pytest.mark.parametrize("family", sorted(HF_MOE))
def test_hugging_face_moe_import_gives_their_logits_and_exports_back_bit_identical(tmp_path, family):
    import transformers

    from test_checkpoint import CONVERT, assert_exported_back, our_logits, run, saved_hf_model

    config_class, model_class, kwargs, dump_opts = HF_MOE[family]
    theirs = saved_hf_model(tmp_path, config_class, model_class, kwargs)
    run([CONVERT, "--import-hf", str(tmp_path / "hf"), "--save", str(tmp_path / "ck"),
         "--make-vocab-size-divisible-by", "8"])
    state = torch.load(tmp_path / "ck" / "release" / "mp_rank_00" / "model_optim_rng.pt", weights_only=True)["model"]
    assert "decoder.layers.0.mlp.experts.local_experts.3.linear_fc2.weight" in state
    dump = our_logits(state, tmp_path, hidden=32, heads=4, vocab=250, divisible_by=8, max_seq=16, seq=16, batch=2,
                      **dump_opts)
    with torch.no_grad():
        expected = theirs(dump["input_ids"]).logits
    assert (dump["logits"][..., :250] - expected).abs().max().item() <= 1e-4

    assert_exported_back(tmp_path, theirs)
    config = transformers.AutoConfig.from_pretrained(str(tmp_path / "back"))
    assert type(config).__name__ == config_class
    for key, value in kwargs.items():
        assert getattr(config, key) == value, key


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
    (["--expert-model-parallel-size", "2"], "--expert-model-parallel-size (2) must divide the data-parallel size (1)"),
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
