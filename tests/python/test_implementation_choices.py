"""Megatron-LM's flags that choose how a run works rather than what it trains: --dataloader-type
cyclic, --grad-reduce-in-bf16, --ddp-num-buckets, --recompute-modules, --lr-wsd-decay-samples,
--log-memory-interval; the ones that pick an implementation this build does not have are named at
start-up, and the ones that ask for something not built here are refused with the reason."""
import json
import re

import pytest
import torch

import megatron_cpp
from data_helpers import check_args
from test_checkpoint import PRETRAIN, losses, run, tiny

NO_DROPOUT = ["--hidden-dropout", "0", "--attention-dropout", "0"]


def train(tmp_path, name, ranks, *flags, iters=4):
    metrics = tmp_path / f"{name}.jsonl"
    proc = run([PRETRAIN, *tiny(iters, *NO_DROPOUT, "--metrics-file", str(metrics), *flags)], np=ranks)
    records = [r for r in map(json.loads, metrics.read_text().splitlines()) if r["type"] == "train"]
    return losses(metrics), records, proc.stdout + proc.stderr


# --- the cyclic data loader (its sampler against Megatron-LM's: test_gpt_dataset.py)


def test_cyclic_loader_shuffles_and_its_global_batches_do_not_depend_on_the_ranks(tmp_path):
    single, _, _ = train(tmp_path, "single", 1)
    one, _, _ = train(tmp_path, "cyclic1", 1, "--dataloader-type", "cyclic", "--no-data-sharding")
    two, _, _ = train(tmp_path, "cyclic2", 2, "--dataloader-type", "cyclic", "--no-data-sharding")
    # Dealt round-robin from one permutation, DP 2's global batch is DP 1's: the same losses.
    assert two == pytest.approx(one, rel=1e-5), (two, one)
    assert one[1] != pytest.approx(single[1], rel=1e-4), "the cyclic loader read the samples in order"


def test_external_loader_is_refused_naming_the_flag():
    proc = check_args(tiny(2, "--dataloader-type", "external"), 1)
    assert proc.returncode != 0 and "--dataloader-type external: pretrain_gpt builds its own data loader" in proc.stdout


# --- gradients: bf16 reduction, bucket count


def test_grad_reduce_in_bf16_trains_as_one_rank_within_bf16_rounding(tmp_path):
    one, one_records, _ = train(tmp_path, "one", 1)
    _, fp32_records, _ = train(tmp_path, "fp32", 2)
    for extra in ([], ["--use-distributed-optimizer", "--overlap-grad-reduce"]):
        bf16, records, _ = train(tmp_path, "bf16" + str(len(extra)), 2, "--grad-reduce-in-bf16", *extra)
        assert bf16 == pytest.approx(one, rel=1e-2), (bf16, one)
        norms = [r["grad_norm"] for r in records]
        assert norms == pytest.approx([r["grad_norm"] for r in one_records], rel=1e-2)
        # The reduction really travelled in bf16: the fp32 reduction's norm differs from it.
        assert norms[0] != fp32_records[0]["grad_norm"], extra


def test_ddp_num_buckets_splits_the_gradients_and_changes_nothing_else(tmp_path):
    def buckets(log):
        return int(re.search(r"Number of buckets for gradient all-reduce: (\d+)", log).group(1))

    default, _, log = train(tmp_path, "default", 2, "--overlap-grad-reduce")
    assert buckets(log) <= 2, log[-2000:]  # the tiny model fits the default size
    split, _, log = train(tmp_path, "split", 2, "--overlap-grad-reduce", "--ddp-num-buckets", "6")
    assert 6 <= buckets(log) <= 8, log[-2000:]
    assert split == pytest.approx(default, rel=1e-6)
    proc = check_args(tiny(2, "--ddp-num-buckets", "4", "--ddp-bucket-size", "1000"), 1)
    assert proc.returncode != 0 and "give only one of --ddp-num-buckets and --ddp-bucket-size" in proc.stdout


# --- selective recompute of named modules


def saved_bytes_and_grads(**config):
    """Bytes autograd keeps from one training forward of a tiny GPT, and the gradients."""
    torch.manual_seed(0)
    model = megatron_cpp.GPTModel(
        megatron_cpp.TransformerConfig(num_layers=2, hidden_size=32, num_attention_heads=4, hidden_dropout=0.0,
                                       attention_dropout=0.0, **config), 64, 16, make_vocab_size_divisible_by=64, seed=3)
    model.train()
    tokens = torch.randint(0, 64, (2, 16), generator=torch.Generator().manual_seed(0))
    saved = []

    def pack(t):
        saved.append(t.numel() * t.element_size())
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        loss = model(tokens, labels=torch.roll(tokens, -1, dims=1)).mean()
    loss.backward()
    return sum(saved), [p.grad.clone() for p in model.parameters()]


@pytest.mark.parametrize("modules,moe", [(["mlp"], False), (["core_attn", "mlp"], False), (["shared_experts"], True)])
def test_recompute_modules_keep_less_and_give_the_same_gradients(modules, moe):
    extra = dict(num_moe_experts=2, moe_shared_expert_intermediate_size=64, add_bias_linear=False) if moe else {}
    base_bytes, base_grads = saved_bytes_and_grads(**extra)
    got_bytes, got_grads = saved_bytes_and_grads(recompute_granularity="selective", recompute_modules=modules, **extra)
    assert got_bytes < base_bytes, (got_bytes, base_bytes)
    for g, b in zip(got_grads, base_grads):
        assert torch.equal(g, b)


def test_recompute_modules_train_as_without(tmp_path):
    plain, _, _ = train(tmp_path, "plain", 2, "--tensor-model-parallel-size", "2", "--sequence-parallel")
    got, _, _ = train(tmp_path, "recompute", 2, "--tensor-model-parallel-size", "2", "--sequence-parallel",
                      "--recompute-granularity", "selective", "--recompute-modules", "core_attn", "mlp")
    assert got == pytest.approx(plain, rel=1e-6)


@pytest.mark.parametrize("module,reason", [
    ("moe_act", "output-discarding checkpoint) is not implemented"),
    ("mla_up_proj", "multi-latent attention is not implemented"),
    ("moe", "recomputing a whole MoE layer"),
])
def test_recompute_modules_not_built_here_are_refused_with_the_reason(module, reason):
    proc = check_args(tiny(2, "--recompute-granularity", "selective", "--recompute-modules", "core_attn", module), 1)
    assert proc.returncode != 0 and f"--recompute-modules {module}: " in proc.stdout and reason in proc.stdout


# --- schedules and logging


def test_wsd_decay_in_samples_is_the_decay_in_iterations_times_the_batch(tmp_path):
    wsd = ["--lr-decay-style", "WSD", "--lr-wsd-decay-style", "linear"]
    _, iters, _ = train(tmp_path, "iters", 1, *wsd, "--lr-wsd-decay-iters", "4", iters=12)
    _, samples, _ = train(tmp_path, "samples", 1, *wsd, "--lr-wsd-decay-samples", "32", iters=12)
    lrs = [r["learning_rate"] for r in samples]
    assert lrs == [r["learning_rate"] for r in iters]
    assert lrs[-1] < lrs[7]  # it decays over the last 4 of --lr-decay-iters 12


def test_log_memory_interval_repeats_the_memory_report(tmp_path):
    _, _, log = train(tmp_path, "memory", 1, "--log-memory-interval", "2", iters=6)
    assert re.findall(r"\(after (\d+) iterations\) host memory \(MB\)", log) == ["1", "2", "4", "6"], log[-3000:]
    proc = check_args(tiny(2, "--log-memory-interval", "3", "--log-interval", "2"), 1)
    assert proc.returncode != 0 and "--log-memory-interval (3) must be a multiple of --log-interval (2)" in proc.stdout


# --- what is named rather than done


def test_implementation_switches_are_named_as_having_no_effect():
    flags = ["--enable-experimental", "--overlap-moe-expert-parallel-comm", "--delay-wgrad-compute",
             "--use-fused-weighted-squared-relu", "--use-nccl-ub", "--use-precision-aware-optimizer",
             "--high-priority-stream-groups", "dp_cp", "ep_dp", "--spec", "local"]
    proc = check_args(tiny(2, *flags), 1)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    named = set(re.findall(r"no effect: (--[a-z0-9-]+)", proc.stdout + proc.stderr))
    assert named == {f for f in flags if f.startswith("--")}, named


@pytest.mark.parametrize("flags,reason", [
    (["--spec", "megatron.core.models.hybrid.hybrid_layer_specs", "hybrid_stack_spec"],
     "Mamba and hybrid models are not built by pretrain_gpt"),
    (["--exp-avg-dtype", "bf16"], "--exp-avg-dtype bf16: the optimizer keeps its main parameters"),
    (["--grad-reduce-in-bf16", "--use-megatron-fsdp", "--data-parallel-sharding-strategy", "optim_grads"],
     "--grad-reduce-in-bf16 is not implemented with --data-parallel-sharding-strategy optim_grads"),
    (["--window-size", "128", "0"], "GPT-OSS's layers"),
    (["--log-energy"], "NVML"),
    (["--fine-grained-activation-offloading"], "offloading activations or the optimizer to host memory"),
])
def test_what_is_not_built_here_is_refused_with_the_reason(flags, reason):
    proc = check_args(tiny(2, *flags), 2)
    assert proc.returncode != 0 and reason in proc.stdout + proc.stderr, proc.stdout + proc.stderr
    assert "unknown flag" not in proc.stdout + proc.stderr
