"""--num-distributed-optimizer-instances N: the data-parallel ranks in N blocks, each with a whole
distributed-optimizer state sharded over its ranks, gradients reduced in each block and averaged
across blocks. Every layout against the single-rank run; checkpoints across instance counts."""
import json

import pytest

from data_helpers import check_args
from test_checkpoint import PRETRAIN, losses, run, tiny


def train(tmp_path, name, ranks, *flags, iters=6):
    metrics = tmp_path / f"{name}.jsonl"
    run([PRETRAIN, *tiny(iters, "--hidden-dropout", "0", "--attention-dropout", "0", "--metrics-file", str(metrics),
                         *flags)], np=ranks)
    return losses(metrics), [r["grad_norm"] for r in map(json.loads, metrics.read_text().splitlines())
                             if r["type"] == "train"]


DIST = ["--use-distributed-optimizer", "--num-distributed-optimizer-instances"]
LAYOUTS = {
    # DP 4 in 2 blocks of 2: shards within a block, an all-reduce of each shard across blocks.
    "dp4_x2": (4, DIST + ["2"]),
    "dp4_x2_overlap": (4, DIST + ["2", "--overlap-grad-reduce", "--overlap-param-gather"]),
    # Blocks of one rank: each rank keeps the whole state; the gradient is all-reduced across.
    "dp4_x4": (4, DIST + ["4"]),
    "tp2_dp2_x2": (4, DIST + ["2", "--tensor-model-parallel-size", "2"]),
    "pp2_dp2_x2": (4, DIST + ["2", "--pipeline-model-parallel-size", "2"]),
}


@pytest.mark.parametrize("name", LAYOUTS)
def test_instances_train_as_one_rank(tmp_path, name):
    ranks, flags = LAYOUTS[name]
    one, one_norms = train(tmp_path, "one", 1)
    got, norms = train(tmp_path, name, ranks, *flags)
    assert got == pytest.approx(one, rel=1e-5), (got, one)
    assert norms == pytest.approx(one_norms, rel=1e-4), (norms, one_norms)


MOE = ["--num-experts", "4", "--moe-router-topk", "2", "--moe-aux-loss-coeff", "0.01", "--disable-bias-linear"]


def test_instances_with_expert_parallelism_train_as_one_rank(tmp_path):
    one, _ = train(tmp_path, "one", 1, *MOE)
    got, _ = train(tmp_path, "ep2", 4, *MOE, "--expert-model-parallel-size", "2", *DIST, "2")
    assert got == pytest.approx(one, rel=1e-5), (got, one)


@pytest.mark.parametrize("fmt", ["torch", "torch_dist"])
def test_a_checkpoint_resumes_with_another_number_of_instances(tmp_path, fmt):
    whole, _ = train(tmp_path, "whole", 1)
    ck = tmp_path / "ck"
    train(tmp_path, "first", 4, *DIST, "2", "--ckpt-format", fmt, "--save", str(ck), iters=3)
    for instances in ("1", "4"):
        resumed, _ = train(tmp_path, "resumed" + instances, 4, *DIST, instances, "--load", str(ck))
        assert resumed == pytest.approx({i: whole[i] for i in (4, 5, 6)}, rel=1e-5), (instances, resumed)


def test_instances_that_do_not_fit_are_refused_naming_the_flag():
    base = tiny(1)
    cases = [(["--num-distributed-optimizer-instances", "2"], 4, "needs --use-distributed-optimizer"),
             (DIST + ["3"], 4, "--num-distributed-optimizer-instances (3) does not divide the 4 data-parallel"),
             (DIST + ["2", "--use-megatron-fsdp", "--data-parallel-sharding-strategy", "optim_grads"], 4,
              "(and not --use-megatron-fsdp)"),
             (DIST + ["4"] + MOE + ["--expert-model-parallel-size", "2"], 4,
              "--num-distributed-optimizer-instances (4) must divide the expert-data-parallel size (2)")]
    for flags, world, message in cases:
        proc = check_args(base + flags, world)
        assert proc.returncode == 2 and message in proc.stdout, (flags, proc.stdout[-1500:])
