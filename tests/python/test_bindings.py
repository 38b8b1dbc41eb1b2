"""The megatron_cpp module: launcher parsing, the rank layout against Megatron-LM's documented
16-GPU example, arguments from lists and dicts, the library's errors as Python exceptions with
their message."""
import os
import re

import pytest
import torch

import megatron_cpp


def test_version_and_torch():
    assert megatron_cpp.__version__.count(".") == 2
    assert megatron_cpp.torch_version == torch.__version__


def test_cpu_allocator_cache_serves_torch_tensors():
    megatron_cpp.enable_cpu_allocator_cache()
    megatron_cpp.empty_cpu_allocator_cache()
    before = megatron_cpp.cpu_allocator_cache_stats()
    assert before["enabled"] and before["cached_bytes"] == 0
    a = torch.empty(1 << 20)
    ptr = a.data_ptr()
    del a
    assert megatron_cpp.cpu_allocator_cache_stats()["cached_bytes"] == 4 << 20
    b = torch.ones(1 << 20)
    after = megatron_cpp.cpu_allocator_cache_stats()
    assert (after["hits"] - before["hits"], after["misses"] - before["misses"]) == (1, 1)
    assert b.data_ptr() == ptr and bool((b == 1).all())
    megatron_cpp.empty_cpu_allocator_cache()


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
    # The message is the library's one line, without a C++ backtrace.
    with pytest.raises(RuntimeError) as info:
        megatron_cpp.rank_layout(8, 3)
    assert "\n" not in str(info.value) and "Exception raised from" not in str(info.value)
    with pytest.raises(TypeError, match=r"\[TransformerConfig\] no field named 'hidden'"):
        megatron_cpp.TransformerConfig(hidden=3)
    with pytest.raises(ValueError, match=r"normalization: expected one of 'LayerNorm', 'RMSNorm', found 'BatchNorm'"):
        megatron_cpp.TransformerConfig(normalization="BatchNorm")
    with pytest.raises(RuntimeError, match=r"\[tokenizer\] NullTokenizer: .*'x'"):
        megatron_cpp.NullTokenizer(10).tokenize("1 x")


def test_rank_layout_matches_megatron_documentation():
    layout = megatron_cpp.rank_layout(16, tensor_model_parallel_size=2, pipeline_model_parallel_size=4)
    assert layout["tensor_model_parallel"] == [[0, 1], [2, 3], [4, 5], [6, 7], [8, 9], [10, 11], [12, 13], [14, 15]]
    assert layout["pipeline_model_parallel"] == [[0, 4, 8, 12], [1, 5, 9, 13], [2, 6, 10, 14], [3, 7, 11, 15]]
    assert layout["data_parallel"] == [[0, 2], [1, 3], [4, 6], [5, 7], [8, 10], [9, 11], [12, 14], [13, 15]]


def test_parallel_state_of_a_single_process():
    world = megatron_cpp.init_distributed(megatron_cpp.LauncherEnv.from_variables({}))
    ps = megatron_cpp.ParallelState.initialize_model_parallel(world)
    assert (ps.get_world_size(), ps.get_tensor_model_parallel_world_size(), ps.get_data_parallel_rank()) == (1, 1, 0)
    assert ps.is_pipeline_first_stage() and ps.is_pipeline_last_stage()
    assert ps.get_pipeline_model_parallel_group().size() == 1


TINY = ["--num-layers", "2", "--hidden-size", "32", "--num-attention-heads", "4", "--seq-length", "16",
        "--micro-batch-size", "2", "--train-iters", "3", "--lr", "1e-3", "--mock-data", "--vocab-size", "64"]


def test_arguments_from_a_list_and_from_a_dict_agree():
    real_data = ["--data-path", "1", "a", "--tokenizer-type", "NullTokenizer", "--swiglu"]
    from_list = megatron_cpp.parse_arguments([w for w in TINY if w != "--mock-data"] + real_data, world_size=2)
    from_dict = megatron_cpp.parse_arguments({
        "num_layers": 2, "hidden-size": 32, "num_attention_heads": 4, "seq_length": 16, "micro_batch_size": 2,
        "train_iters": 3, "lr": 1e-3, "mock_data": False, "vocab_size": 64, "swiglu": True, "bf16": False,
        "data_path": ["1", "a"], "tokenizer_type": "NullTokenizer", "global_batch_size": None}, world_size=2)
    assert from_list.to_dict() == from_dict.to_dict()
    assert (from_dict.num_layers, from_dict.lr, from_dict.swiglu, from_dict.bf16) == (2, 1e-3, True, False)
    assert from_dict.data_path == ["1", "a"] and from_dict.global_batch_size == 4  # micro x DP 2


def test_bad_arguments_name_the_flag():
    with pytest.raises(RuntimeError, match=r"--lr-decay-style must be one of constant, linear, cosine, inverse-square-root, WSD \(got .spiral.\)"):
        megatron_cpp.parse_arguments(TINY + ["--lr-decay-style", "spiral"], world_size=1)
    with pytest.raises(RuntimeError, match=r"--global-batch-size \(6\) is not divisible by --micro-batch-size \(2\) x data-parallel size \(4\)"):
        megatron_cpp.parse_arguments(TINY + ["--global-batch-size", "6"], world_size=4)
    with pytest.raises(TypeError, match="found one string; split it into words"):
        megatron_cpp.parse_arguments("--num-layers 2")


def test_every_flag_is_an_attribute_of_arguments():
    # --check-args is pretrain_gpt's own (read before parsing, named in the help's footer).
    flags = set(re.findall(r"--([a-z0-9_-]+)", megatron_cpp.arguments_help())) - {"help", "config", "check-args"}
    args = megatron_cpp.Arguments()
    missing = [f for f in sorted(flags) if not hasattr(args, f.replace("-", "_"))]
    assert not missing, missing
    attributes = {name for name in dir(args) if not name.startswith("_") and not callable(getattr(args, name))}
    assert set(args.to_dict()) == attributes


