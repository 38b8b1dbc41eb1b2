"""megatron_cpp.convert_checkpoint: the same conversion as the convert_checkpoint program, in
process. A TP2 checkpoint resharded to TP1 through the binding holds exactly the tensors the
program writes; the Hugging Face export is the program's byte for byte; bad calls raise with the
library's message."""
from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
import torch

from test_checkpoint import CONVERT, PRETRAIN, run, tiny, tracker

BUILD_DIR = os.environ.get("MEGATRON_BUILD_DIR", os.path.join(os.path.dirname(__file__), "..", "..", "build"))
sys.path.insert(0, os.path.join(BUILD_DIR, "python"))

import megatron_cpp  # noqa: E402


def test_binding_writes_what_the_program_writes(tmp_path):
    src = tmp_path / "tp2"
    run([PRETRAIN, *tiny(2, "--tensor-model-parallel-size", "2", "--save", str(src))], np=2)
    by_program, by_binding = tmp_path / "program", tmp_path / "binding"
    run([CONVERT, "--load", str(src), "--save", str(by_program)])
    assert megatron_cpp.convert_checkpoint(load=str(src), save=str(by_binding)) == 2
    assert tracker(by_binding) == tracker(by_program) == "2"
    a = torch.load(by_program / "iter_0000002" / "mp_rank_00" / "model_optim_rng.pt", weights_only=True)
    b = torch.load(by_binding / "iter_0000002" / "mp_rank_00" / "model_optim_rng.pt", weights_only=True)
    assert a["model"].keys() == b["model"].keys()
    for name, tensor in a["model"].items():
        assert torch.equal(tensor, b["model"][name]), name

    hf_program, hf_binding = tmp_path / "hf_program", tmp_path / "hf_binding"
    run([CONVERT, "--load", str(src), "--export-hf", str(hf_program)])
    megatron_cpp.convert_checkpoint(load=str(src), export_hf=str(hf_binding))
    for name in ["config.json", "model.safetensors"]:
        assert (hf_binding / name).read_bytes() == (hf_program / name).read_bytes(), name


def test_bad_calls_raise_with_the_message(tmp_path):
    with pytest.raises(RuntimeError, match="give one of load"):
        megatron_cpp.convert_checkpoint(save=str(tmp_path / "out"))
    with pytest.raises(RuntimeError, match="give save"):
        megatron_cpp.convert_checkpoint(load=str(tmp_path))
    with pytest.raises(RuntimeError, match=str(tmp_path / "missing")):
        megatron_cpp.convert_checkpoint(load=str(tmp_path / "missing"), save=str(tmp_path / "out"))
