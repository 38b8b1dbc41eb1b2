"""pretrain_gpt with mixture-of-experts layers (docs/moe.md): data and pipeline parallelism give
the single-rank run's losses and gradient norms (which holds only if the auxiliary losses enter
the backward with the main loss's scale on every stage and micro-batch), and so do the other
layouts and the grouped GEMM; the MoE flags Megatron-LM refuses, or this build does not compute
yet, are one line each. The layer's numerics are test_gpt_parity.py's moe_* cases; the checkpoints'
test_moe_checkpoints.py."""
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


def test_interleaved_pipeline_and_recompute_give_the_single_rank_losses_and_fp16_trains(tmp_path):
    """MoE layers under the interleaved schedule (two model chunks a stage, experts over EP 2) and
    full recomputation (the router and dispatch run again in the backward; the auxiliary losses
    are logged once), and in fp16 with its loss scaler."""
    want = train(tmp_path, "single", [])
    same(train(tmp_path, "vpp2_ep2", ["--pipeline-model-parallel-size", "2", "--num-layers-per-virtual-pipeline-stage",
                                     "1", "--expert-model-parallel-size", "2"], ranks=4), want)
    same(train(tmp_path, "recompute", ["--recompute-granularity", "full", "--recompute-method", "uniform",
                                      "--recompute-num-layers", "1"]), want)
    fp16 = train(tmp_path, "fp16", ["--fp16", "--initial-loss-scale", "4096"], iters=8)
    assert all(r[1] == r[1] and r[1] < 10 for r in fp16) and fp16[-1][1] < fp16[0][1], fp16


def test_the_flex_dispatcher_is_the_alltoall_exchange_and_its_kernels_are_named(tmp_path):
    """Megatron-Core's flex dispatcher is the all-to-all exchange with DeepEP or HybridEP kernels:
    here it runs the alltoall dispatcher (the same losses) and the backend flag is named as having
    no effect, at start-up and by --check-args."""
    ep2 = ["--expert-model-parallel-size", "2"]
    flex = ep2 + ["--moe-token-dispatcher-type", "flex", "--moe-flex-dispatcher-backend", "hybridep"]
    same(train(tmp_path, "flex", flex, ranks=2),
         train(tmp_path, "alltoall", ep2 + ["--moe-token-dispatcher-type", "alltoall"], ranks=2))
    proc = check_args([*MODEL, *MOE, "--train-iters", "1", *flex], 2)
    assert proc.returncode == 0 and "no effect: --moe-flex-dispatcher-backend: DeepEP / HybridEP kernels are not in " \
        "this build; flex runs the alltoall dispatcher" in proc.stdout, proc.stdout + proc.stderr
    proc = check_args([*MODEL, *MOE, "--train-iters", "1", *ep2, "--moe-enable-deepep"], 2)
    assert proc.returncode == 0 and "no effect: --moe-enable-deepep" in proc.stdout, proc.stdout + proc.stderr
    assert "no effect: --moe-flex-dispatcher-backend" in proc.stdout, proc.stdout


def test_zero2_and_zero3_with_expert_parallelism_give_the_single_rank_losses(tmp_path):
    """Megatron-FSDP over MoE layers: each layer's experts a unit of their own, sharded and reduced
    over the expert-data-parallel ranks (the rest of the layer over the data-parallel ones), both
    gathered around the layer's forward and backward under ZeRO-3."""
    want = train(tmp_path, "single", [])
    fsdp = ["--use-megatron-fsdp", "--use-distributed-optimizer", "--expert-model-parallel-size", "2"]
    for strategy, dispatcher in (("optim_grads", "alltoall"), ("optim_grads_params", "allgather")):
        same(train(tmp_path, strategy, fsdp + ["--data-parallel-sharding-strategy", strategy,
                                               "--moe-token-dispatcher-type", dispatcher], ranks=4), want)


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


def grad_fn_names(tensor):
    """The names of every autograd node behind a tensor."""
    seen, stack, names = set(), [tensor.grad_fn], set()
    while stack:
        node = stack.pop()
        if node is None or node in seen:
            continue
        seen.add(node)
        names.add(node.name())
        stack.extend(next_node for next_node, _ in node.next_functions)
    return names


@pytest.mark.parametrize("bias", [False, True])
def test_grouped_gemm_experts_compute_what_the_loop_over_experts_does(bias):
    """moe_grouped_gemm: two at::_grouped_mm calls over the local experts (their autograd nodes
    are in the graph) give the per-expert loop's output and every gradient, expert biases (fc2's
    weighted by the probability) included; an expert with no tokens gets zero gradients."""
    import torch

    from megatron_cpp.core.transformer import TransformerConfig
    from megatron_cpp.core.transformer.moe import MoELayer

    def layer(grouped):
        return MoELayer(TransformerConfig(num_layers=1, hidden_size=16, num_attention_heads=2, add_bias_linear=bias,
                                          gated_linear_unit=True, activation="silu", num_moe_experts=4,
                                          moe_router_topk=1, moe_ffn_hidden_size=24, moe_aux_loss_coeff=0.01,
                                          moe_grouped_gemm=grouped))

    loop, grouped = layer(False), layer(True)
    weights = dict(loop.named_parameters())
    with torch.no_grad():
        for name, p in grouped.named_parameters():
            p.copy_(weights[name] + (0.1 if name.endswith("bias") else 0.0))
            weights[name].copy_(p)
        # Expert 3 chosen by no token: its router row far below the others.
        for router in (loop, grouped):
            dict(router.named_parameters())["router.weight"][3].fill_(-10.0)  # the inputs are positive
    x = torch.rand(6, 2, 16, generator=torch.Generator().manual_seed(1))
    outs = []
    for m in (loop, grouped):
        m.train()
        out = m(x.clone().requires_grad_())
        out.square().sum().backward()
        outs.append(out)
    assert "GroupedMmBackward0" in grad_fn_names(outs[1]) and "GroupedMmBackward0" not in grad_fn_names(outs[0])
    assert torch.allclose(outs[1], outs[0], atol=1e-6), (outs[1] - outs[0]).abs().max()
    got = dict(grouped.named_parameters())
    for name, p in loop.named_parameters():
        assert torch.allclose(got[name].grad, p.grad, atol=1e-6), name
    unused = got["experts.local_experts.3.linear_fc1.weight"].grad
    assert unused is not None and not unused.any()


def test_grouped_gemm_runs_give_the_single_rank_losses(tmp_path):
    """--moe-grouped-gemm in pretrain_gpt: one rank, EP 2 (two local experts a rank) and TP 2 x EP 2
    (each expert's TP shard, alltoall) give the per-expert loop's losses and gradient norms."""
    pad = ["--make-vocab-size-divisible-by", "64"]
    want = train(tmp_path, "loop", pad)
    grouped = pad + ["--moe-grouped-gemm"]
    same(train(tmp_path, "grouped", grouped), want)
    same(train(tmp_path, "grouped_ep2", grouped + ["--expert-model-parallel-size", "2"], ranks=2), want)
    same(train(tmp_path, "grouped_tp2_ep2", grouped + ["--tensor-model-parallel-size", "2", "--sequence-parallel",
                                                      "--expert-model-parallel-size", "2",
                                                      "--moe-token-dispatcher-type", "alltoall"], ranks=4), want)
