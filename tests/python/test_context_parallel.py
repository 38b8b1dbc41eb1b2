"""pretrain_gpt with the sequence split over context-parallel ranks (docs/context_parallel.md):
every --cp-comm-type, alone and with tensor (and sequence), pipeline and data parallelism, gives
the single-rank run's losses and gradient norms; a checkpoint saved at CP 2 resumes at CP 1 and
CP 4 with the uninterrupted run's losses; what does not compose is one line. The attention
itself is tests/transformer/context_parallel_test.cpp's."""
import json
import re
import subprocess

import pytest

from data_helpers import MPIRUN, check_args, program

MODEL = ["--num-layers", "2", "--hidden-size", "32", "--num-attention-heads", "4", "--seq-length", "16",
         "--micro-batch-size", "2", "--global-batch-size", "8", "--lr", "3e-3", "--log-interval", "1",
         "--eval-iters", "0", "--attention-dropout", "0", "--hidden-dropout", "0", "--mock-data",
         "--vocab-size", "128", "--make-vocab-size-divisible-by", "32",  # padded alike at TP 1 and 2
         "--position-embedding-type", "rope", "--seed", "5"]


def train(tmp_path, name, flags, ranks=1, iters=4, model=MODEL, extra=()):
    metrics = tmp_path / f"{name}.jsonl"
    cmd = [program("pretrain_gpt"), *model, "--train-iters", str(iters), "--metrics-file", str(metrics),
           *map(str, flags)]
    if ranks > 1:
        cmd = MPIRUN + ["-np", str(ranks)] + cmd
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    rows = [json.loads(line) for line in open(metrics)]
    return [(r["iteration"], r["lm loss"], r["grad_norm"], *(r[k] for k in extra)) for r in rows if r["type"] == "train"]


def same(got, want, name=""):
    assert [r[0] for r in got] == [r[0] for r in want], name
    assert [r[1:] for r in got] == [pytest.approx(r[1:], rel=1e-5) for r in want], name


CP = ["--context-parallel-size"]
LAYOUTS = {  # name: (ranks, flags)
    "cp2_p2p": (2, CP + ["2"]),
    "cp2_all_gather": (2, CP + ["2", "--cp-comm-type", "all_gather"]),
    "cp2_a2a": (2, CP + ["2", "--cp-comm-type", "a2a"]),
    "cp4_p2p": (4, CP + ["4"]),
    # a2a over pairs of consecutive CP ranks, their chunks one ring position each of a p2p ring of 2.
    "cp4_a2a_p2p": (4, CP + ["4", "--cp-comm-type", "a2a+p2p", "--hierarchical-context-parallel-sizes", "2", "2"]),
    "cp4_a2a4_p2p1": (4, CP + ["4", "--cp-comm-type", "a2a+p2p", "--hierarchical-context-parallel-sizes", "4", "1"]),
    "cp2_per_layer": (2, CP + ["2", "--cp-comm-type", "a2a", "p2p"]),
    "cp2_tp2_sp": (4, CP + ["2", "--tensor-model-parallel-size", "2", "--sequence-parallel"]),
    "cp2_pp2": (4, CP + ["2", "--pipeline-model-parallel-size", "2"]),
    "cp2_dp2_dist_opt": (4, CP + ["2", "--use-distributed-optimizer", "--overlap-grad-reduce"]),
    "cp2_dp2_zero3": (4, CP + ["2", "--use-megatron-fsdp", "--data-parallel-sharding-strategy", "optim_grads_params"]),
    "cp2_full_recompute": (2, CP + ["2", "--recompute-granularity", "full", "--recompute-method", "uniform"]),
    "cp2_selective_recompute": (2, CP + ["2", "--cp-comm-type", "all_gather", "--recompute-granularity", "selective"]),
}


@pytest.mark.parametrize("positions", ["rope", "learned_absolute"])
def test_each_layout_gives_the_single_rank_losses(tmp_path, positions):
    model = [*MODEL[:-4], "--position-embedding-type", positions, "--seed", "5"]
    want = train(tmp_path, "single", [], model=model)
    assert want[-1][1] < want[0][1]  # it trains
    layouts = LAYOUTS if positions == "rope" else {"cp2_p2p": LAYOUTS["cp2_p2p"]}
    for name, (ranks, flags) in layouts.items():
        got = train(tmp_path, name, flags, ranks=ranks, model=model)
        assert len(got) == len(want), name
        same(got, want, name)


def test_the_interleaved_schedule_at_cp2_gives_the_single_rank_losses(tmp_path):
    four = [*MODEL[:1], "4", *MODEL[2:]]  # --num-layers 4: two stages of two one-layer chunks
    want = train(tmp_path, "single4", [], model=four)
    same(train(tmp_path, "cp2_pp2_vp", CP + ["2", "--pipeline-model-parallel-size", "2",
                                             "--num-layers-per-virtual-pipeline-stage", "1"], ranks=4, model=four),
         want, "cp2_pp2_vp")


MOE = ["--num-experts", "4", "--moe-router-topk", "2", "--moe-ffn-hidden-size", "48", "--moe-aux-loss-coeff", "1e-2",
       "--moe-z-loss-coeff", "1e-3", "--moe-token-dispatcher-type", "alltoall"]


@pytest.mark.parametrize("balancing", ["aux_loss", "seq_aux_loss"])
def test_moe_layers_at_cp2_give_the_single_rank_losses(tmp_path, balancing):
    """The load-balancing loss counts tokens over the CP ranks; losses, norms and the logged
    auxiliary losses are the single-rank run's, with the experts also split over the CP ranks."""
    flags = [*MOE, "--moe-router-load-balancing-type", balancing]
    extra = ("load_balancing_loss" if balancing == "aux_loss" else "seq_load_balancing_loss", "z_loss")
    want = train(tmp_path, "single", flags, extra=extra)
    assert all(0.5 < r[3] < 4 for r in want), want
    same(train(tmp_path, "cp2", flags + CP + ["2"], ranks=2, extra=extra), want, "cp2")
    same(train(tmp_path, "cp2_ep2", flags + CP + ["2", "--expert-model-parallel-size", "2"], ranks=2, extra=extra), want,
         "cp2_ep2")


def test_activation_memory_per_rank_at_cp4_is_at_most_a_third_of_cp1s(tmp_path):
    """A long sequence: the allocator's peak during the first iteration less what stays allocated
    after it (parameters, gradients, optimizer state: the same on every rank), on rank 0."""
    long = [*MODEL, "--seq-length", "4096", "--max-position-embeddings", "4096", "--micro-batch-size", "1",
            "--global-batch-size", "1", "--hidden-size", "64"]

    def activations(ranks):
        cmd = [program("pretrain_gpt"), *long, "--train-iters", "1", *CP, str(ranks)]
        proc = subprocess.run((MPIRUN + ["-np", str(ranks)] if ranks > 1 else []) + cmd, capture_output=True,
                              text=True, timeout=300)
        assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
        line = re.search(r"\[Rank 0\] \(after 1 iterations\) host memory \(MB\) \| allocated: ([\d.]+) \| "
                         r"max allocated: ([\d.]+)", proc.stdout)
        assert line, proc.stdout[-2000:]
        return float(line.group(2)) - float(line.group(1))

    whole, split = activations(1), activations(4)
    assert whole > 20 and split <= 0.35 * whole, (whole, split)


def test_a_cp2_checkpoint_resumes_at_cp1_and_cp4(tmp_path):
    whole = train(tmp_path, "whole", CP + ["2"], ranks=2, iters=6)
    ck = tmp_path / "ck"
    train(tmp_path, "first", CP + ["2", "--save", ck, "--save-interval", "3", "--exit-interval", "3"], ranks=2, iters=6)
    for ranks, cp in [(1, "1"), (4, "4")]:
        resumed = train(tmp_path, f"resumed_cp{cp}", CP + [cp, "--load", ck], ranks=ranks, iters=6)
        same(resumed, whole[3:])


@pytest.mark.parametrize("ranks, flags, message", [
    (2, CP + ["2", "--seq-length", "18"], "--seq-length (18) must be divisible by 2 x --context-parallel-size (4)"),
    (3, CP + ["2"], "is not divisible by --tensor-model-parallel-size (1) x --pipeline-model-parallel-size (1) x "
                    "--context-parallel-size (2)"),
    (2, CP + ["2", "--cp-comm-type", "p2p", "a2a", "p2p"], "--cp-comm-type takes one value or one per layer"),
    (4, CP + ["4", "--cp-comm-type", "a2a", "--num-attention-heads", "2", "--hidden-size", "32"],
     "both must be divisible by it"),
    (2, CP + ["2", "--cp-comm-type", "a2a+p2p"], "--cp-comm-type a2a+p2p needs --hierarchical-context-parallel-sizes"),
    (2, CP + ["2", "--hierarchical-context-parallel-sizes", "2", "2"],
     "--hierarchical-context-parallel-sizes multiply to 4, not --context-parallel-size (2)"),
    (4, CP + ["4", "--cp-comm-type", "a2a+p2p", "--hierarchical-context-parallel-sizes", "4", "1",
              "--num-attention-heads", "2"], "over its a2a groups (4): both must be divisible by it"),
    (2, CP + ["2", "--position-embedding-type", "alibi"], "alibi does not compose with --context-parallel-size"),
    (2, CP + ["2", "--attention-dropout", "0.1"], "--attention-dropout (0.1) must be 0 with --context-parallel-size"),
    (2, CP + ["2", "--reset-attention-mask"], "--reset-attention-mask does not compose"),
    (8, CP + ["2", "--tensor-model-parallel-size", "4", "--sequence-parallel", "--seq-length", "12"],
     "/ --context-parallel-size (2) must be divisible by --tensor-model-parallel-size (4)"),
])
def test_what_does_not_compose_is_one_line(ranks, flags, message):
    """Judged by --check-args at the job's world size, the parse every rank of the job makes."""
    proc = check_args([*MODEL, "--train-iters", "1", *flags], ranks)
    assert proc.returncode != 0, proc.stdout
    refused = [line for line in proc.stdout.splitlines() if line.startswith("refused: ")]
    assert len(refused) == 1 and message in refused[0], proc.stdout + proc.stderr


def test_a_refused_layout_stops_the_job_with_that_line(tmp_path):
    cmd = [program("pretrain_gpt"), *MODEL, "--train-iters", "1", *CP, "2", "--seq-length", "18"]
    proc = subprocess.run(MPIRUN + ["-np", "2"] + cmd, capture_output=True, text=True, timeout=120)
    assert proc.returncode != 0
    assert "--seq-length (18) must be divisible by 2 x --context-parallel-size (4)" in proc.stderr, proc.stderr[-2000:]


def test_check_args_names_the_context_parallel_size():
    proc = check_args([*MODEL, "--train-iters", "1", *CP, "2", "--tensor-model-parallel-size", "2"], 8)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "tensor-parallel 2, pipeline-parallel 1, context-parallel 2, data-parallel 2" in proc.stdout, proc.stdout


def test_bf16_runs_stay_within_half_precision_of_the_single_rank_run(tmp_path):
    want = train(tmp_path, "single_bf16", ["--bf16"])
    for comm_type in ("p2p", "a2a"):
        got = train(tmp_path, f"cp2_{comm_type}_bf16", CP + ["2", "--cp-comm-type", comm_type, "--bf16"], ranks=2)
        assert [r[0] for r in got] == [r[0] for r in want]
        assert [r[1:] for r in got] == [pytest.approx(r[1:], rel=5e-3) for r in want], comm_type


def test_get_batch_on_this_cp_rank_from_python():
    import torch
    import megatron_cpp
    batch = {"tokens": torch.arange(32).view(2, 16), "text": torch.arange(34).view(2, 17)}
    cut = megatron_cpp._C.get_batch_on_this_cp_rank(batch, 4, 1)  # chunks 1 and 6 of 8
    assert cut["tokens"][1].tolist() == [18, 19, 28, 29]
    assert torch.equal(cut["text"], batch["text"])  # not a GPT micro-batch tensor: as it was
    # Megatron-LM's two module paths name the one function.
    from megatron_cpp.core.utils import get_batch_on_this_cp_rank
    from megatron_cpp.training.utils import get_batch_on_this_cp_rank as training_one
    assert get_batch_on_this_cp_rank is training_one
