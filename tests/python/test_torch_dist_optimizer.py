"""Optimizer state in torch_dist checkpoints as Megatron-LM keeps it, against megatron-core's own
optimizers (the package pinned in scripts/setup.sh, so that CI runs it; megatron_core_optimizer.py):
its FP32Optimizer and Float16OptimizerWithFloat16Params load the Adam moments, fp32 master copies,
step and learning rates of our checkpoint onto their parameters; its DistributedOptimizer loads
what a --use-distributed-optimizer run writes (its fully_reshardable layout); and what each saves
back, its DistributedOptimizer's default bucket layout (dp_reshardable) too, resumes here as the
uninterrupted run continues."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from data_helpers import free_port
from test_checkpoint import PRETRAIN, losses, run, tiny
from test_megatron_core import GPT2, LLAMA, NO_DROPOUT

pytest.importorskip("megatron.core", reason="megatron-core is not installed: scripts/setup.sh pins it")
DRIVER = str(Path(__file__).with_name("megatron_core_optimizer.py"))


def megatron_core_round_trip(load: Path, save: Path, case: dict, tmp_path: Path, *mode: str) -> list[dict]:
    """megatron-core loads the iteration folder `load` and saves it into `save`; each TP rank's
    optimizer state as it loaded it (none for its distributed optimizer)."""
    (tmp_path / "model.json").write_text(json.dumps(case))
    launch = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2", "--master-port",
              str(free_port())]
    proc = subprocess.run([*launch, DRIVER, str(load), str(save), str(tmp_path / "theirs"), str(tmp_path / "model.json"),
                           *mode], capture_output=True, text=True, timeout=600,
                          env={**os.environ, "OMP_NUM_THREADS": "1", "TMPDIR": str(tmp_path)})
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return [torch.load(f"{tmp_path / 'theirs'}.{r}") for r in range(2)] if "distributed" not in mode else []


def check_against_our_state(theirs: list[dict], legacy: Path, bf16: bool) -> None:
    """On every tensor-parallel rank, each parameter's shard of state as our legacy file holds it."""
    for rank, loaded in enumerate(theirs):
        saved = torch.load(legacy / f"mp_rank_{rank:02d}" / "model_optim_rng.pt", weights_only=True)["optimizer"]
        ours = saved["param_state"]
        assert set(loaded["state"]) == set(ours)
        for name, state in ours.items():
            got = loaded["state"][name]
            for kind in ("exp_avg", "exp_avg_sq"):
                assert torch.equal(got[kind], state[kind]), (rank, name, kind)
            assert ("fp32_param" in got) == ("main_param" in state) == bf16, name
            if bf16:
                assert torch.equal(got["fp32_param"], state["main_param"]), name
            assert float(got["step"]) == 2.0, name
        groups = saved["optimizer"]["param_groups"] if bf16 else saved["param_groups"]
        want = {g["wd_mult"]: g["lr"] for g in groups}
        assert {g["wd_mult"]: g["lr"] for g in loaded["groups"]} == want and len(want) == 2


@pytest.mark.parametrize("case, bf16, distributed", [(GPT2, False, False), (LLAMA, True, False), (GPT2, False, True),
                                                     (LLAMA, True, True)],
                         ids=["gpt2_fp32", "llama_bf16", "gpt2_fp32_distopt", "llama_bf16_distopt"])
def test_megatron_core_optimizers_load_our_state_and_what_they_save_resumes_here(tmp_path, case, bf16, distributed):
    def at_tp(tp: int) -> list[str]:
        return [*case["flags"], "--tensor-model-parallel-size", str(tp), *NO_DROPOUT, *(["--bf16"] if bf16 else []),
                *(["--use-distributed-optimizer"] if distributed else []), "--save-interval", "2"]
    flags = at_tp(2)
    run([PRETRAIN, *tiny(4, *flags, "--save", str(tmp_path / "dist"), "--ckpt-format", "torch_dist",
                         "--metrics-file", str(tmp_path / "full.jsonl"))], np=2)
    mode = [*(["bf16"] if bf16 else []), *(["distributed"] if distributed else [])]
    theirs = megatron_core_round_trip(tmp_path / "dist" / "iter_0000002", tmp_path / "mc" / "iter_0000002", case,
                                      tmp_path, *mode)
    if not distributed:
        run([PRETRAIN, *tiny(4, *flags, "--save", str(tmp_path / "legacy"))], np=2)  # its twin, in our legacy layout
        check_against_our_state(theirs, tmp_path / "legacy" / "iter_0000002", bf16)

    # What megatron-core saved continues the run: with fresh moments the next losses would differ.
    full = losses(tmp_path / "full.jsonl")
    for saved in ["mc", *(["mc_dp"] if distributed else [])]:
        run([PRETRAIN, *tiny(4, *flags, "--load", str(tmp_path / saved), "--metrics-file",
                             str(tmp_path / f"{saved}.jsonl"))], np=2)
        assert losses(tmp_path / f"{saved}.jsonl") == {3: full[3], 4: full[4]}, saved
    if distributed and bf16:
        # The bucket layout reads at another data-parallel size (TP 2 x DP 2), not at another TP.
        run([PRETRAIN, *tiny(4, *flags, "--load", str(tmp_path / "mc_dp"), "--metrics-file",
                             str(tmp_path / "dp2.jsonl"))], np=4)
        assert losses(tmp_path / "dp2.jsonl") == pytest.approx({3: full[3], 4: full[4]}, rel=1e-5)
        refused = run([PRETRAIN, *tiny(4, *at_tp(1), "--load", str(tmp_path / "mc_dp"))], check=False)
        assert refused.returncode != 0 and "saved at TP 2, PP 1, which only another data-parallel size reads" \
            in refused.stderr, refused.stderr[-2000:]


def test_megatron_lm_deprecated_distributed_optimizer_layouts_are_one_error_naming_the_way_through(tmp_path):
    """Its DistributedOptimizer's deprecated torch_dist layouts (fully_sharded_model_space:
    flattened shards) are not mapped; the common state names them."""
    flags = [*NO_DROPOUT, "--ckpt-format", "torch_dist"]
    run([PRETRAIN, *tiny(2, *flags, "--save", str(tmp_path / "ck"))])
    common_path = tmp_path / "ck" / "iter_0000002" / "common.pt"
    common = torch.load(common_path, weights_only=False)
    common["optimizer"] = {"param_state_sharding_type": "fully_sharded_model_space"}
    torch.save(common, common_path)
    refused = run([PRETRAIN, *tiny(4, *flags, "--load", str(tmp_path / "ck"))], check=False)
    assert refused.returncode != 0 and "'fully_sharded_model_space' layout" in refused.stderr, refused.stderr[-2000:]
    assert "--dist-ckpt-optim-fully-reshardable" in refused.stderr and "--no-load-optim" in refused.stderr
    assert "Traceback" not in refused.stderr
