"""Sharded data parallelism (--data-parallel-sharding-strategy, --zero-stage): every strategy
against the unsharded data-parallel run of the same layout, its memory against the unsharded
bytes, its checkpoints against the continuous run."""
import json
import re
import subprocess

import pytest
from data_helpers import MPIRUN, check_args, program

# Four layers (two chunks per stage under the interleaved schedule), micro-batches of 1 so that
# every data-parallel rank accumulates two or more of them.
MODEL = ["--num-layers", "4", "--hidden-size", "32", "--num-attention-heads", "4", "--seq-length", "16",
         "--micro-batch-size", "1", "--global-batch-size", "8", "--lr", "2e-3", "--min-lr", "2e-4",
         "--lr-warmup-iters", "1", "--lr-decay-style", "cosine", "--attention-dropout", "0", "--hidden-dropout", "0",
         "--log-interval", "1", "--eval-interval", "4", "--eval-iters", "1", "--mock-data", "--vocab-size", "256",
         "--make-vocab-size-divisible-by", "64", "--seed", "5"]
STRATEGY = {
    "no_shard": [],
    "optim": ["--use-distributed-optimizer"],
    "optim_grads": ["--use-megatron-fsdp", "--data-parallel-sharding-strategy", "optim_grads"],
    "optim_grads_params": ["--zero-stage", "3"],
}
TP2 = ["--tensor-model-parallel-size", "2"]
PP2 = ["--pipeline-model-parallel-size", "2"]
LAYOUTS = {
    "dp2": (2, []),
    "dp4": (4, []),
    "tp2_dp2": (4, TP2),
    "tp2_sp_dp2": (4, TP2 + ["--sequence-parallel"]),
    "pp2_dp2": (4, PP2),
    "pp2_vp_dp2": (4, PP2 + ["--num-layers-per-virtual-pipeline-stage", "1"]),
    "dp2_recompute": (2, ["--recompute-granularity", "full", "--recompute-method", "uniform",
                          "--recompute-num-layers", "2"]),
}


def train(tmp_path, name, ranks, *flags, iters=12):
    """(train losses, grad norms, evaluation losses), and the output of every rank."""
    metrics = tmp_path / f"{name}.jsonl"
    length = [] if "--train-iters" in map(str, flags) else ["--train-iters", str(iters)]
    cmd = MPIRUN + ["-np", str(ranks), program("pretrain_gpt"), *MODEL, *length, "--metrics-file", str(metrics),
                    *map(str, flags)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    records = [json.loads(line) for line in metrics.read_text().splitlines()]
    train_records = [r for r in records if r["type"] == "train"]
    evals = [r["lm loss"] for r in records if r["type"] not in ("train",)]
    return ([r["lm loss"] for r in train_records], [r["grad_norm"] for r in train_records], evals), proc.stdout


def close(a, b, rel=1e-5):
    return len(a) == len(b) and all(abs(x - y) <= rel * abs(y) for x, y in zip(a, b))


@pytest.mark.parametrize("layout", LAYOUTS)
def test_sharded_strategies_reproduce_unsharded_data_parallelism(tmp_path, layout):
    ranks, flags = LAYOUTS[layout]
    plain, _ = train(tmp_path, "plain", ranks, *flags)
    for strategy in ("optim_grads", "optim_grads_params"):
        got, log = train(tmp_path, strategy, ranks, *flags, *STRATEGY[strategy])
        assert f"after optimizer setup ({strategy})" in log
        for what, a, b in zip(("losses", "grad norms", "evaluation losses"), got, plain):
            assert close(a, b), (strategy, what, a, b)


@pytest.mark.parametrize("layout", ["dp2", "pp2_dp2"])
def test_optim_grads_overlapped_param_gather_trains_identically(tmp_path, layout):
    """ZeRO-2 with --overlap-grad-reduce --overlap-param-gather: each layer's parameters are gathered
    under the next forward (its unit's all-gather waited for by the layer) and the losses, grad
    norms and evaluation losses are exactly those of the gather at the end of the step."""
    ranks, flags = LAYOUTS[layout]
    serial, _ = train(tmp_path, "serial", ranks, *flags, *STRATEGY["optim_grads"])
    overlapped, log = train(tmp_path, "overlapped", ranks, *flags, *STRATEGY["optim_grads"], "--overlap-grad-reduce",
                            "--overlap-param-gather", "--ddp-bucket-size", "2000")
    assert "Parameter all-gather overlapped with the next forward pass" in log  # the buckets outside the layers
    stage_layers = 2 if layout == "pp2_dp2" else 4  # MODEL's 4 layers over rank 0's stage
    assert f"Parameter all-gather of {stage_layers} layer unit(s) overlapped" in log, log[-3000:]  # and every unit
    assert "were not waited for" not in log
    assert overlapped == serial


def memory(log, peak=False):
    """Per rank: bytes of params, grads, main params and optimizer state at start-up (and the most
    allocated by then)."""
    out = {}
    for m in re.finditer(r"\[Rank (\d+)\] memory \(MB\) after optimizer setup \((\w+)\) \| params: ([\d.]+) \| "
                         r"grads: ([\d.]+) \| main params: ([\d.]+) \| optimizer state: ([\d.]+) \| "
                         r"max allocated building the model: ([\d.]+)", log):
        out[int(m.group(1))] = [float(v) * (1 << 20) for v in m.groups()[2:(7 if peak else 6)]]
    return out


def test_each_strategy_holds_less_per_rank_as_it_says(tmp_path):
    """At DP 4 (fp32, bf16): optim shards the optimizer state, optim_grads the gradients as well,
    optim_grads_params also the parameters, counted from the tensors each rank holds."""
    for dtype in ([], ["--bf16"]):
        held = {}
        for strategy, flags in STRATEGY.items():
            _, log = train(tmp_path, strategy, 4, *dtype, *flags, "--train-iters", "2", "--eval-iters", "0")
            held[strategy] = memory(log)
            assert sorted(held[strategy]) == [0, 1, 2, 3], log[-2000:]
        near = lambda a, b: abs(a - b) <= 0.02 * b  # noqa: E731 (each unit pads to a multiple of DP)
        for rank in range(4):
            params, grads, main, state = held["no_shard"][rank]
            o = held["optim"][rank]
            assert o[3] <= 0.3 * state and near(o[1], grads) and near(o[0], params), (dtype, rank, o)
            g = held["optim_grads"][rank]
            assert g[1] <= 0.3 * grads and near(g[0], params) and near(g[3], o[3]), (dtype, rank, g)
            p = held["optim_grads_params"][rank]
            assert p[0] == 0 and p[1] <= 0.3 * grads and near(p[3], o[3]), (dtype, rank, p)
            assert sum(p) <= 0.3 * sum(held["no_shard"][rank]), (dtype, rank, p, held["no_shard"][rank])


def test_zero3_never_holds_the_whole_model(tmp_path):
    """Under optim_grads_params the model is built without the layers' memory, which is
    initialised unit by unit into the shards: building it allocates a fraction of the whole
    model (the embedding and norms), from the same initial weights (the losses agree)."""
    big = ["--num-layers", "8", "--hidden-size", "256", "--train-iters", "2", "--eval-iters", "0"]
    plain, log = train(tmp_path, "plain", 4, *big)
    whole = memory(log, peak=True)
    sharded, log = train(tmp_path, "sharded", 4, *big, *STRATEGY["optim_grads_params"])
    held = memory(log, peak=True)
    assert sorted(held) == [0, 1, 2, 3]
    for rank, (params, grads, main, state, built) in held.items():
        model = whole[rank][0]
        assert whole[rank][4] >= model and built < 0.1 * model, (rank, built, whole[rank][4], model)
    assert close(sharded[0], plain[0]), (sharded[0], plain[0])


@pytest.mark.parametrize("strategy", ["optim_grads", "optim_grads_params"])
def test_sharded_checkpoints_resume_exactly_and_at_another_data_parallel_size(tmp_path, strategy):
    flags = STRATEGY[strategy]
    whole, _ = train(tmp_path, "whole", 4, *flags)
    ck = tmp_path / "ck"
    head, _ = train(tmp_path, "head", 4, *flags, "--save", ck, "--save-interval", "6", "--exit-interval", "6")
    tail, _ = train(tmp_path, "tail", 4, *flags, "--load", ck)
    assert head[0] + tail[0] == whole[0] and head[1] + tail[1] == whole[1]
    # At DP 2 it goes on as the unsharded run from the same checkpoint does.
    dp2, _ = train(tmp_path, "dp2", 2, *flags, "--load", ck)
    plain, _ = train(tmp_path, "plain", 2, "--load", ck)
    for a, b in zip(dp2, plain):
        assert close(a, b), (a, b)
    assert close(dp2[0], whole[0][6:]), (dp2[0], whole[0][6:])
    if strategy != "optim_grads_params":
        return
    # convert_checkpoint reads it as any other: to TP 2, resumed there under ZeRO-3 at DP 2; to
    # Hugging Face, the same weights.
    subprocess.run([program("convert_checkpoint"), "--load", str(ck), "--save", str(tmp_path / "tp2"),
                    "--target-tensor-parallel-size", "2"], check=True, capture_output=True, timeout=120)
    tp2, _ = train(tmp_path, "tp2", 4, *flags, *TP2, "--load", tmp_path / "tp2")
    assert close(tp2[0], whole[0][6:]), (tp2[0], whole[0][6:])
    subprocess.run([program("convert_checkpoint"), "--load", str(ck), "--export-hf", str(tmp_path / "hf")],
                   check=True, capture_output=True, timeout=120)
    import torch
    from safetensors import safe_open
    model = torch.load(ck / "iter_0000006" / "mp_rank_00" / "model_optim_rng.pt", weights_only=False)["model"]
    with safe_open(str(tmp_path / "hf" / "model.safetensors"), framework="pt") as f:
        assert torch.equal(f.get_tensor("transformer.h.1.mlp.c_proj.weight").t(),
                           model["decoder.layers.1.mlp.linear_fc2.weight"])


def test_mixed_precision_trains_as_the_distributed_optimizer_does(tmp_path):
    for dtype, rel in ((["--bf16"], 2e-3), (["--fp16"], 1e-3)):
        ref, _ = train(tmp_path, "ref", 2, *dtype, *STRATEGY["optim"])
        for strategy in ("optim_grads", "optim_grads_params"):
            got, _ = train(tmp_path, strategy, 2, *dtype, *STRATEGY[strategy])
            assert close(got[0], ref[0], rel=rel) and close(got[2], ref[2], rel=rel), (dtype, strategy, got, ref)


@pytest.mark.parametrize("flags,message", [
    (["--data-parallel-sharding-strategy", "optim_grads"],
     "--data-parallel-sharding-strategy optim_grads needs --use-megatron-fsdp (or --zero-stage 2)"),
    (["--zero-stage", "2", "--data-parallel-sharding-strategy", "optim"],
     "--zero-stage 2 means --data-parallel-sharding-strategy optim_grads, but it is optim"),
    (["--zero-stage", "3", "--domino", "--tensor-model-parallel-size", "2", "--micro-batch-size", "2"],
     "--data-parallel-sharding-strategy optim_grads_params does not support --domino yet"),
    (["--zero-stage", "2", "--domino", "--tensor-model-parallel-size", "2", "--micro-batch-size", "2"],
     "--data-parallel-sharding-strategy optim_grads does not support --domino yet"),
    (["--use-megatron-fsdp", "--data-parallel-sharding-strategy", "optim_grad"],
     "optim_grad"),
])
def test_bad_sharding_flags_are_refused(tmp_path, flags, message):
    proc = subprocess.run(MPIRUN + ["-np", "2", program("pretrain_gpt"), *MODEL, "--train-iters", "1", *flags],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode != 0 and message in proc.stdout + proc.stderr, proc.stdout[-2000:] + proc.stderr[-2000:]


def test_torch_fsdp2_and_megatron_fsdps_fp32_precisions_run_as_zero3(tmp_path):
    """Megatron-LM's FSDP test configs: --use-torch-fsdp2 is the one FSDP here at ZeRO-3, and the
    fp32 precisions they name are what it keeps; other precisions and HSDP are refused by name."""
    plain, _ = train(tmp_path, "plain", 2, iters=4)
    got, log = train(tmp_path, "fsdp2", 2, "--use-torch-fsdp2", "--megatron-fsdp-main-params-dtype", "fp32",
                     "--megatron-fsdp-main-grads-dtype", "fp32", "--megatron-fsdp-grad-comm-dtype", "fp32",
                     "--outer-dp-sharding-strategy", "no_shard", iters=4)
    assert "after optimizer setup (optim_grads_params)" in log
    for a, b in zip(got, plain):
        assert close(a, b), (a, b)
    for flags, message in ((["--use-megatron-fsdp", "--megatron-fsdp-main-grads-dtype", "bf16"],
                            "--megatron-fsdp-main-grads-dtype bf16: Megatron-FSDP keeps"),
                           (["--use-megatron-fsdp", "--outer-dp-sharding-strategy", "optim"],
                            "--outer-dp-sharding-strategy optim: hybrid sharding (HSDP) is not implemented"),
                           (["--use-torch-fsdp2", "--data-parallel-sharding-strategy", "optim_grads"],
                            "--use-torch-fsdp2 shards the parameters (optim_grads_params)")):
        proc = check_args([*MODEL, "--train-iters", "1", *flags], 2)
        assert proc.returncode == 2 and message in proc.stdout, (flags, proc.stdout[-1500:])
