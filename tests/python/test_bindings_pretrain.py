"""pretrain() from Python: examples/pretrain_gpt.py (model_builder, dataset_builder, forward_step
and loss_func in Python) gives the C++ program's losses, alone, under mpirun on 2 ranks and in a
torchrun-style environment; the library's callbacks stand in for any not given; exceptions raised
in callbacks come out of pretrain() unchanged."""
import argparse
import json
import os
import subprocess
import sys

import numpy as np
import pytest
import torch

import megatron_cpp
from conftest import BUILD_DIR
from data_helpers import MPIRUN

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
EXAMPLE = os.path.join(ROOT, "examples", "pretrain_gpt.py")
PRETRAIN = os.path.join(BUILD_DIR, "bin", "pretrain_gpt")
ENV = dict(os.environ, PYTHONPATH=os.path.join(BUILD_DIR, "python"), MEGATRON_LOG_LEVEL="warn")

sys.path.insert(0, os.path.dirname(EXAMPLE))
import pretrain_gpt  # noqa: E402  (the example's callbacks)


def tiny(tmp_path, iters=4, **extra):
    flags = {"num_layers": 2, "hidden_size": 32, "num_attention_heads": 4, "seq_length": 16, "micro_batch_size": 2,
             "global_batch_size": 8, "train_iters": iters, "lr": 2e-3, "min_lr": 2e-4, "lr_warmup_iters": 1,
             "lr_decay_style": "cosine", "attention_dropout": 0, "hidden_dropout": 0, "log_interval": 1,
             "eval_interval": 2, "eval_iters": 1, "device": "cpu", "mock_data": True, "vocab_size": 128,
             "data_cache_path": str(tmp_path / "cache")}
    flags.update(extra)
    return flags


def command_line(flags):
    words = []
    for key, value in flags.items():
        if value is False or value is None:
            continue
        words.append("--" + key.replace("_", "-"))
        if value is not True:
            words.extend(map(str, value) if isinstance(value, list) else [str(value)])
    return words


def metrics(path):
    """(type, iteration, lm loss, grad norm, learning rate) of every line of a metrics file."""
    rows = [json.loads(line) for line in open(path)]
    return [(r["type"], r["iteration"], r["lm loss"], r.get("grad_norm"), r.get("learning_rate")) for r in rows]


def same_runs(got, want):
    """Rows equal but for the loss to float32 rounding: the example's loss_func reports the loss
    averaged over data parallelism in float32 (as Megatron-LM's), which the loop averages again."""
    return ([r[:2] + r[3:] for r in got] == [r[:2] + r[3:] for r in want] and
            [r[2] for r in got] == pytest.approx([r[2] for r in want], rel=1e-6))


def run_program(cmd, metrics_file, launcher=(), env=ENV, timeout=300):
    proc = subprocess.run(list(launcher) + cmd + ["--metrics-file", str(metrics_file)], capture_output=True, text=True,
                          env=env, timeout=timeout)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    return metrics(metrics_file)


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    """A NullTokenizer corpus (vocab 128, EOD 127) written from Python."""
    prefix = str(tmp_path_factory.mktemp("corpus") / "docs")
    rng = np.random.RandomState(0)
    builder = megatron_cpp.IndexedDatasetBuilder(prefix + ".bin", np.uint16)
    for _ in range(300):
        builder.add_item(np.append(rng.randint(0, 127, rng.randint(5, 60)), 127))
        builder.end_document()
    builder.finalize(prefix + ".idx")
    return prefix


def test_python_callbacks_give_the_cpp_programs_losses(tmp_path):
    flags = tiny(tmp_path)
    want = run_program([PRETRAIN] + command_line(flags), tmp_path / "cpp.jsonl")
    got = run_program([sys.executable, EXAMPLE] + command_line(flags), tmp_path / "py.jsonl")
    assert [r[:2] for r in want] == [("train", 1), ("train", 2), ("valid", 2), ("train", 3), ("train", 4),
                                     ("valid", 4), ("test", 4)]
    assert got == want
    # In-process, the TrainingResult holds the same numbers.
    result = megatron_cpp.pretrain(flags, pretrain_gpt.model_builder, pretrain_gpt.dataset_builder,
                                   pretrain_gpt.forward_step)
    assert [r.metrics["lm loss"] for r in result.iterations] == pytest.approx(
        [w[2] for w in want if w[0] == "train"], rel=1e-7)
    assert [(e.split, e.iteration) for e in result.evaluations] == [("valid", 2), ("valid", 4), ("test", 4)]
    assert result.consumed_train_samples == 32


@pytest.mark.parametrize("layout", [
    {},  # data parallel over the 2 ranks
    {"num_layers": 4, "pipeline_model_parallel_size": 2, "num_layers_per_virtual_pipeline_stage": 1},  # interleaved 1F1B
    {"num_layers": 4, "use_megatron_fsdp": True, "data_parallel_sharding_strategy": "optim_grads_params"},  # ZeRO-3
], ids=["dp2", "pp2-interleaved", "dp2-zero3"])
def test_two_ranks_under_mpirun_on_data_written_from_python(tmp_path, corpus, layout):
    flags = tiny(tmp_path, mock_data=False, data_path=[corpus], tokenizer_type="NullTokenizer", split="90,5,5", **layout)
    want = run_program([PRETRAIN] + command_line(flags), tmp_path / "cpp.jsonl", MPIRUN + ["-np", "2"])
    got = run_program([sys.executable, EXAMPLE] + command_line(flags), tmp_path / "py.jsonl",
                      MPIRUN + ["-np", "2", "-x", "PYTHONPATH", "-x", "MEGATRON_LOG_LEVEL"])
    assert same_runs(got, want) and len(want) == 7
    # The same run on one rank gives the same losses (layout invariance).
    flags = {k: v for k, v in flags.items() if k not in layout or k == "num_layers"}
    single = run_program([PRETRAIN] + command_line(flags), tmp_path / "one.jsonl")
    assert [r[2] for r in single] == pytest.approx([r[2] for r in want], rel=1e-5)


def test_torchrun_style_environment(tmp_path):
    env = dict(ENV, RANK="0", WORLD_SIZE="1", LOCAL_RANK="0", LOCAL_WORLD_SIZE="1", MASTER_ADDR="127.0.0.1",
               MASTER_PORT="29517")
    got = run_program([sys.executable, EXAMPLE] + command_line(tiny(tmp_path, iters=2)), tmp_path / "py.jsonl", env=env)
    assert [r[:2] for r in got if r[0] == "train"] == [("train", 1), ("train", 2)]


def test_library_callbacks_fill_in_and_a_python_model_trains_in_place(tmp_path):
    flags = tiny(tmp_path, eval_iters=0)
    built = []

    def model_builder(ctx, pre_process, post_process):
        assert ctx.args.hidden_size == 32 and ctx.device == torch.device("cpu")
        assert ctx.parallel_state.get_tensor_model_parallel_world_size() == 1
        model = megatron_cpp.GPTModel(megatron_cpp.core_transformer_config_from_args(ctx), 128, 16, seed=ctx.args.seed)
        built.append((model, model.state_dict()["decoder.final_layernorm.weight"].clone()))
        return model

    seen = []

    def forward_step(data_iterator, model):
        seen.append(model)
        batch = next(data_iterator)
        output = model(batch["tokens"], batch["position_ids"], labels=batch["labels"])
        return output, lambda out: megatron_cpp.gpt_loss_func(batch["loss_mask"], out)

    result = megatron_cpp.pretrain(flags, model_builder=model_builder, forward_step=forward_step)
    model, before = built[0]
    # forward_step got the very module model_builder returned, and the C++ optimizer updated its
    # tensors in place.
    assert all(m is model for m in seen) and len(seen) == 4 * 4
    assert not torch.equal(model.state_dict()["decoder.final_layernorm.weight"], before)
    # The library's model_builder and dataset_builder with this forward_step give the same run.
    again = megatron_cpp.pretrain(flags, forward_step=forward_step)
    assert [r.metrics for r in again.iterations] == [r.metrics for r in result.iterations]
    assert isinstance(seen[-1], megatron_cpp.GPTModel) and seen[-1] is not model
    # The Python gpt_loss_func returns Megatron-LM's form, (sum, count, {'lm loss': [sum, count]}):
    # the same run as the library's own forward_step, with and without --calculate-per-token-loss.
    for per_token in (False, True):
        ours = megatron_cpp.pretrain(dict(flags, calculate_per_token_loss=per_token))
        python = megatron_cpp.pretrain(dict(flags, calculate_per_token_loss=per_token), forward_step=forward_step)
        assert [r.metrics for r in python.iterations] == [r.metrics for r in ours.iterations]
        assert [r.grad_norm for r in python.iterations] == [r.grad_norm for r in ours.iterations]


def test_checkpoints_from_python_resume_and_read_back(tmp_path):
    flags = tiny(tmp_path, eval_iters=0, lr_warmup_iters=0)
    callbacks = (pretrain_gpt.model_builder, pretrain_gpt.dataset_builder, pretrain_gpt.forward_step)
    models = []

    def model_builder(pre_process, post_process):
        models.append(pretrain_gpt.model_builder(pre_process, post_process))
        return models[-1]

    whole = megatron_cpp.pretrain(dict(flags, save=str(tmp_path / "ckpt"), save_interval=2), model_builder,
                                  *callbacks[1:])
    assert whole.saved_iterations == [2, 4] and megatron_cpp.list_iterations(str(tmp_path / "ckpt")) == [2, 4]
    assert megatron_cpp.read_tracker(str(tmp_path / "ckpt")) == 4
    assert megatron_cpp.read_tracker(str(tmp_path / "nothing")) is None
    # The saved weights are the trained module's, and the checkpoint remembers its arguments.
    path = str(tmp_path / "ckpt" / megatron_cpp.iteration_dir_name(4) / megatron_cpp.rank_dir_name(0, 0, 1) /
               "model_optim_rng.pt")
    saved = megatron_cpp.read_checkpoint_file(path)
    assert saved["iteration"] == 4
    trained = models[0].state_dict()
    assert set(saved["model"]) == set(trained)
    assert all(torch.equal(saved["model"][k], trained[k]) for k in trained)
    assert megatron_cpp.checkpoint_arguments(path).hidden_size == 32
    # Resuming at iteration 2 from Python continues exactly as the uninterrupted run.
    resumed = megatron_cpp.pretrain(dict(flags, load=str(tmp_path / "ckpt"), ckpt_step=2), *callbacks)
    assert resumed.loaded_iteration == 2 and [r.iteration for r in resumed.iterations] == [3, 4]
    assert [r.metrics for r in resumed.iterations] == [r.metrics for r in whole.iterations[2:]]
    (tmp_path / "bad.pt").write_bytes(b"not a checkpoint")
    with pytest.raises(RuntimeError, match="bad.pt"):
        megatron_cpp.read_checkpoint_file(str(tmp_path / "bad.pt"))


class Boom(Exception):
    pass


def raise_boom(*args):
    raise Boom("from a callback")


@pytest.mark.parametrize("where", ["model_builder", "dataset_builder", "forward_step", "loss_func"])
def test_exceptions_in_callbacks_come_out_unchanged(tmp_path, where):
    flags = tiny(tmp_path)
    callbacks = {"model_builder": pretrain_gpt.model_builder, "dataset_builder": pretrain_gpt.dataset_builder,
                 "forward_step": pretrain_gpt.forward_step}
    if where == "loss_func":
        callbacks["forward_step"] = lambda it, model: (pretrain_gpt.forward_step(it, model)[0], raise_boom)
    else:
        callbacks[where] = raise_boom
    with pytest.raises(Boom, match="from a callback"):
        megatron_cpp.pretrain(flags, **callbacks)


def test_wrong_callback_results_and_flags_are_clear_errors(tmp_path):
    flags = tiny(tmp_path, iters=2)
    with pytest.raises(TypeError, match=r"forward_step must return \(output tensor, loss_func callable\), found \(1, 2\)"):
        megatron_cpp.pretrain(flags, forward_step=lambda it, model: (1, 2))
    with pytest.raises(TypeError, match=r"loss_func must return \(loss tensor, \{metric name: value\}\)"):
        megatron_cpp.pretrain(flags, forward_step=lambda it, model: (model(next(it)["tokens"]), lambda out: out.sum()))
    with pytest.raises(TypeError, match=r"model_builder must return a megatron_cpp module .*found Linear"):
        megatron_cpp.pretrain(flags, model_builder=lambda ctx, pre, post: torch.nn.Linear(2, 2))
    with pytest.raises(TypeError, match=r"Datasets.valid: expected a megatron_cpp dataset .* found str"):
        megatron_cpp.pretrain(flags, dataset_builder=lambda ctx, n: (None, "valid", None))
    with pytest.raises(RuntimeError, match=r"\[training\] dataset_builder returned no training dataset"):
        megatron_cpp.pretrain(flags, dataset_builder=lambda ctx, n: (None, None, None))
    with pytest.raises(TypeError, match=r"dataset_builder must return megatron_cpp.Datasets .* found NoneType"):
        megatron_cpp.pretrain(flags, dataset_builder=lambda ctx, n: None)

    def step_with_loss(loss_func):
        return lambda it, model: (pretrain_gpt.forward_step(it, model)[0], loss_func)
    # The per-token losses not reduced, an integer loss, a metric of many values: each named.
    for loss_func, message in (
            (lambda out: (out, {}), r"the loss must be one floating-point value, found a Float tensor of shape \[2, 16\]"),
            (lambda out: (out.sum().long(), {}), r"the loss must be one floating-point value, found a Long tensor"),
            (lambda out: (out.mean(), {"lm loss": out}), r"metric 'lm loss' must be one value or Megatron-LM's "
                                                         r"\[sum, count\], found shape \[2, 16\]")):
        with pytest.raises(TypeError, match=message):
            megatron_cpp.pretrain(flags, forward_step=step_with_loss(loss_func))
    with pytest.raises(RuntimeError, match=r"--hidden-size \(30\) is not divisible by --num-attention-heads \(4\)"):
        megatron_cpp.pretrain(dict(flags, hidden_size=30))
    # The failures left nothing behind: a good run still works.
    assert megatron_cpp.pretrain(flags).consumed_train_samples == 16


def test_a_failing_rank_ends_the_mpirun_job_with_its_message(tmp_path):
    script = tmp_path / "fail_on_rank_1.py"
    script.write_text(
        "import sys\n"
        f"sys.path.insert(0, {os.path.dirname(EXAMPLE)!r})\n"
        "import megatron_cpp, pretrain_gpt\n"
        "step = pretrain_gpt.forward_step\n"
        "def forward_step(it, model):\n"
        "    if megatron_cpp.LauncherEnv.from_environment().rank == 1:\n"
        "        raise ValueError('rank 1 gives up')\n"
        "    return step(it, model)\n"
        "pretrain_gpt.forward_step = forward_step\n"
        "sys.exit(pretrain_gpt.main())\n")
    proc = subprocess.run(MPIRUN + ["-np", "2", "-x", "PYTHONPATH", sys.executable, str(script)] +
                          command_line(tiny(tmp_path)), capture_output=True, text=True, env=ENV, timeout=120)
    assert proc.returncode != 0
    assert "pretrain_gpt.py: [rank 1] ValueError: rank 1 gives up" in proc.stderr, proc.stderr[-2000:]


def test_forward_step_output_of_the_wrong_shape_is_named(tmp_path):
    """At PP 2, a forward_step that drops a position of the hidden states it hands the next stage
    is named on stage 0, not left to the send (or the receiving stage) to fail on a shape."""
    script = tmp_path / "short_output.py"
    script.write_text(
        "import sys\n"
        f"sys.path.insert(0, {os.path.dirname(EXAMPLE)!r})\n"
        "import pretrain_gpt\n"
        "step = pretrain_gpt.forward_step\n"
        "def forward_step(it, model):\n"
        "    output, loss_func = step(it, model)\n"
        "    return (output[:-1] if output.dim() == 3 else output), loss_func  # [s, b, h] between stages\n"
        "pretrain_gpt.forward_step = forward_step\n"
        "sys.exit(pretrain_gpt.main())\n")
    proc = subprocess.run(MPIRUN + ["-np", "2", "-x", "PYTHONPATH", sys.executable, str(script)] +
                          command_line(tiny(tmp_path, pipeline_model_parallel_size=2)), capture_output=True,
                          text=True, env=ENV, timeout=120)
    assert proc.returncode != 0
    assert "[schedules] forward_step returned an output of shape [15, 2, 32] on pipeline stage 0 (model chunk 0); " \
           "the next stage takes [sequence, micro-batch, hidden] = [16, 2, 32]" in proc.stderr, proc.stderr[-2000:]


def test_a_frozen_parameter_is_in_the_model_but_not_the_optimizer_state(tmp_path):
    """A parameter the optimizer leaves out (frozen here: the position embeddings) is saved with the
    model and in neither layout of the optimizer state, under --bf16 (Megatron-LM's layout keeps
    fp32 master copies of the 16-bit parameters it updates only), and the run resumes."""
    flags = tiny(tmp_path, iters=2, eval_iters=0, bf16=True, save=str(tmp_path / "ck"), save_interval=2,
                 lr_decay_iters=3)  # the resume trains to 3 on the same schedule
    frozen = "embedding.position_embeddings.weight"

    def model_builder(ctx, pre_process, post_process):
        model = megatron_cpp.GPTModel(megatron_cpp.core_transformer_config_from_args(ctx), 128, 16, seed=ctx.args.seed)
        dict(model.named_parameters())[frozen].requires_grad_(False)
        return model

    megatron_cpp.pretrain(flags, model_builder=model_builder)
    torch.serialization.add_safe_globals([argparse.Namespace])
    main = torch.load(tmp_path / "ck" / "iter_0000002" / "mp_rank_00" / "model_optim_rng.pt", weights_only=True)
    state = main["optimizer"]["param_state"]
    assert frozen in main["model"] and frozen not in state
    assert sum(len(group["params"]) for group in main["optimizer"]["optimizer"]["param_groups"]) == len(state)
    assert sum(map(len, main["optimizer"]["fp32_from_fp16_params"])) == len(state)
    again = {k: v for k, v in flags.items() if k not in ("save", "save_interval")}
    resumed = megatron_cpp.pretrain(dict(again, train_iters=3, load=str(tmp_path / "ck")), model_builder=model_builder)
    assert [r.iteration for r in resumed.iterations] == [3]


def test_deterministic_mode_holds_for_the_run_and_reruns_are_bit_identical(tmp_path):
    """--deterministic-mode: ATen's deterministic algorithms are on in every forward step and off
    again once pretrain() returns; two runs give the same losses and norms bit for bit."""
    seen = []

    def forward_step(it, model):
        seen.append(torch.are_deterministic_algorithms_enabled())
        return pretrain_gpt.forward_step(it, model)

    flags = tiny(tmp_path, deterministic_mode=True)
    runs = [megatron_cpp.pretrain(flags, pretrain_gpt.model_builder, pretrain_gpt.dataset_builder, forward_step)
            for _ in range(2)]
    assert seen and all(seen)
    assert not torch.are_deterministic_algorithms_enabled()
    first, second = ([(r.metrics["lm loss"], r.grad_norm) for r in run.iterations] for run in runs)
    assert first == second and len(first) == 4


def test_empty_unused_memory_level_returns_the_cache_each_step(tmp_path):
    """--empty-unused-memory-level 2 hands the CPU allocator cache's blocks back after each
    forward-backward and step, so later iterations allocate from the OS again; without it the cache
    serves them."""
    def misses_per_step(level):
        misses = []

        def forward_step(it, model):
            misses.append(megatron_cpp.cpu_allocator_cache_stats()["misses"])
            return pretrain_gpt.forward_step(it, model)

        flags = tiny(tmp_path, train_iters=6, eval_iters=0, global_batch_size=2, empty_unused_memory_level=level)
        megatron_cpp.pretrain(flags, pretrain_gpt.model_builder, pretrain_gpt.dataset_builder, forward_step)
        return misses[-1] - misses[-3]  # the last two iterations, past warm-up

    kept, emptied = misses_per_step(0), misses_per_step(2)
    assert emptied > kept and emptied > 10, (kept, emptied)
