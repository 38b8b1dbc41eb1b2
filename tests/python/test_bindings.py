"""The megatron_cpp module from the build tree: launcher parsing, the rank layout against
Megatron-LM's documented 16-GPU example, and errors as Python exceptions."""
import os
import sys

import pytest

BUILD_DIR = os.environ.get("MEGATRON_BUILD_DIR", os.path.join(os.path.dirname(__file__), "..", "..", "build"))
sys.path.insert(0, os.path.join(BUILD_DIR, "python"))

import megatron_cpp  # noqa: E402


def test_version_and_torch():
    import torch

    assert megatron_cpp.__version__.count(".") == 2
    assert megatron_cpp.torch_version == torch.__version__


def test_launcher_env_from_variables():
    env = megatron_cpp.LauncherEnv.from_variables({"OMPI_COMM_WORLD_RANK": "3", "OMPI_COMM_WORLD_SIZE": "4"})
    assert (env.rank, env.world_size, env.launcher) == (3, 4, megatron_cpp.Launcher.OPENMPI)
    single = megatron_cpp.LauncherEnv.from_variables({})
    assert (single.rank, single.world_size) == (0, 1)


def test_errors_are_python_exceptions_with_the_message():
    with pytest.raises(RuntimeError, match="RANK is set but WORLD_SIZE is not"):
        megatron_cpp.LauncherEnv.from_variables({"RANK": "0"})
    with pytest.raises(RuntimeError, match=r"world size \(8\) is not divisible"):
        megatron_cpp.rank_layout(8, 3)


def test_rank_layout_matches_megatron_documentation():
    layout = megatron_cpp.rank_layout(16, tensor_model_parallel_size=2, pipeline_model_parallel_size=4)
    assert layout["tensor_model_parallel"] == [[0, 1], [2, 3], [4, 5], [6, 7], [8, 9], [10, 11], [12, 13], [14, 15]]
    assert layout["pipeline_model_parallel"] == [[0, 4, 8, 12], [1, 5, 9, 13], [2, 6, 10, 14], [3, 7, 11, 15]]
    assert layout["data_parallel"] == [[0, 2], [1, 3], [4, 6], [5, 7], [8, 10], [9, 11], [12, 14], [13, 15]]
