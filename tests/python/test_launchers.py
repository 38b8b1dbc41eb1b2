"""The seeds' way in: the real `deepspeed` and `torchrun` launchers start CPU jobs of several ranks
(host tensors through LibTorch's Gloo) that give the losses of `mpirun -np 2 pretrain_gpt` on
the same flags; `--deepspeed --deepspeed_config ds.json` means what the same flags mean; a
conflicting, malformed or unsupported ds_config is one line and no traceback."""
import json
import os
import subprocess
import sys

import pytest

import megatron_cpp
from test_bindings_pretrain import (ENV, EXAMPLE, MPIRUN, PRETRAIN, command_line, corpus, metrics,  # noqa: F401
                                    run_program, same_runs, tiny)
from data_helpers import free_port

VENV_BIN = os.path.dirname(sys.executable)
DEEPSPEED = os.path.join(VENV_BIN, "deepspeed")
TORCHRUN = os.path.join(VENV_BIN, "torchrun")

# Megatron-LM's pretrain_gpt.py, moved by changing its imports: its dataset provider goes through
# BlendedMegatronDatasetBuilder and GPTDatasetConfig, its get_batch through get_batch_on_this_tp_rank.
MEGATRON_LM_SHAPED = """
import sys
from functools import partial
import torch
sys.path.insert(0, {example_dir!r})
import pretrain_gpt
from megatron_cpp.core import parallel_state
from megatron_cpp.core.datasets.blended_megatron_dataset_builder import BlendedMegatronDatasetBuilder
from megatron_cpp.core.datasets.gpt_dataset import GPTDataset, GPTDatasetConfig, MockGPTDataset
from megatron_cpp.core.enums import ModelType
from megatron_cpp.training import get_args, get_tokenizer, pretrain
from megatron_cpp.training.utils import get_batch_on_this_tp_rank, get_blend_and_blend_per_split


def model_provider(pre_process=True, post_process=True):
    return pretrain_gpt.model_builder(pre_process, post_process)


def train_valid_test_datasets_provider(train_val_test_num_samples):
    args = get_args()
    blend, blend_per_split = get_blend_and_blend_per_split(args)
    config = GPTDatasetConfig(random_seed=args.seed, sequence_length=args.seq_length, blend=blend,
                              blend_per_split=blend_per_split, split=args.split, path_to_cache=args.data_cache_path,
                              tokenizer=get_tokenizer(), reset_position_ids=args.reset_position_ids,
                              reset_attention_mask=args.reset_attention_mask, eod_mask_loss=args.eod_mask_loss,
                              mmap_bin_files=True)
    dataset_type = MockGPTDataset if args.mock_data else GPTDataset
    return BlendedMegatronDatasetBuilder(dataset_type, train_val_test_num_samples, lambda: True, config).build()


def forward_step(data_iterator, model):
    batch = get_batch_on_this_tp_rank(data_iterator)
    output = model(batch["tokens"], batch["position_ids"], batch["attention_mask"], labels=batch["labels"])
    return output, partial(pretrain_gpt.loss_func, batch["loss_mask"])


pretrain(train_valid_test_datasets_provider, model_provider, ModelType.encoder_or_decoder, forward_step)
"""


def launched(cmd, tmp_path, name, timeout=300):
    """Runs a launcher command; the metrics file its ranks wrote."""
    metrics_file = tmp_path / f"{name}.jsonl"
    # TMPDIR: the launchers' own folders (torchrun's torchelastic_*) go with the test's.
    proc = subprocess.run(cmd + ["--metrics-file", str(metrics_file)], capture_output=True, text=True,
                          env={**ENV, "TMPDIR": str(tmp_path)}, timeout=timeout)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return metrics(metrics_file)


def test_seed_shaped_script_under_deepspeed_at_tp2_gives_mpiruns_losses(tmp_path):
    flags = tiny(tmp_path, tensor_model_parallel_size=2)
    want = run_program([PRETRAIN] + command_line(flags), tmp_path / "mpirun.jsonl", MPIRUN + ["-np", "2"])
    got = launched([DEEPSPEED, "--num_gpus", "2", "--master_port", str(free_port()), EXAMPLE] + command_line(flags),
                   tmp_path, "deepspeed")
    assert same_runs(got, want) and len(want) == 7


def test_megatron_lm_shaped_script_under_torchrun_at_dp2_gives_mpiruns_losses(tmp_path, corpus):
    flags = tiny(tmp_path, mock_data=False, data_path=[corpus], tokenizer_type="NullTokenizer", split="90,5,5")
    want = run_program([PRETRAIN] + command_line(flags), tmp_path / "mpirun.jsonl", MPIRUN + ["-np", "2"])
    script = tmp_path / "megatron_lm_shaped.py"
    script.write_text(MEGATRON_LM_SHAPED.format(example_dir=os.path.dirname(EXAMPLE)))
    torchrun = [TORCHRUN, "--nproc-per-node", "2", "--master-port", str(free_port()), str(script)]
    got = launched(torchrun + command_line(flags), tmp_path, "torchrun")
    assert same_runs(got, want) and len(want) == 7
    # At TP 2 every batch reaches rank 1 through get_batch_on_this_tp_rank's broadcast.
    flags_tp = dict(flags, tensor_model_parallel_size=2)
    want_tp = run_program([PRETRAIN] + command_line(flags_tp), tmp_path / "mpirun_tp.jsonl", MPIRUN + ["-np", "2"])
    got_tp = launched(torchrun + command_line(flags_tp), tmp_path, "torchrun_tp")
    assert same_runs(got_tp, want_tp)


DS_CONFIG = {
    "train_batch_size": 8,
    "train_micro_batch_size_per_gpu": 2,
    "gradient_clipping": 0.5,
    "steps_per_print": 1,
    "zero_optimization": {"stage": 1, "reduce_bucket_size": 5e8, "overlap_comm": True},
    "fp16": {"enabled": False, "loss_scale": 0, "initial_scale_power": 11},
    "bf16": {"enabled": False},
    "optimizer": {"type": "AdamW", "params": {"lr": 3e-3, "betas": [0.9, 0.95], "eps": 1e-7, "weight_decay": 0.1}},
    "wall_clock_breakdown": False,
}
# What DS_CONFIG says, as flags (at DP 2: train_batch_size 8 = micro 2 x 2 steps x 2 ranks).
DS_FLAGS = dict(micro_batch_size=2, global_batch_size=8, clip_grad=0.5, log_interval=1,
                use_distributed_optimizer=True, lr=3e-3, adam_beta1=0.9, adam_beta2=0.95, adam_eps=1e-7,
                weight_decay=0.1)


def test_pretrain_gpt_under_deepspeed_with_a_ds_config_equals_the_flags(tmp_path):
    base = {k: v for k, v in tiny(tmp_path).items() if k not in DS_FLAGS}
    want = run_program([PRETRAIN] + command_line(dict(base, **DS_FLAGS)), tmp_path / "flags.jsonl",
                       MPIRUN + ["-np", "2"])
    (tmp_path / "ds.json").write_text(json.dumps(DS_CONFIG))
    got = launched([DEEPSPEED, "--num_gpus", "2", "--master_port", str(free_port()), "--no_python", PRETRAIN] +
                   command_line(base) + ["--deepspeed", "--deepspeed_config", str(tmp_path / "ds.json")],
                   tmp_path, "ds")
    assert got == want and len(want) == 7
    # The config's clipping and Adam settings reached the run: without them the losses differ.
    default = run_program([PRETRAIN] + command_line(dict(base, micro_batch_size=2, global_batch_size=8, lr=3e-3)),
                          tmp_path / "default.jsonl", MPIRUN + ["-np", "2"])
    assert [r[2] for r in default if r[0] == "train"][1:] != [r[2] for r in want if r[0] == "train"][1:]


def parsed(tmp_path, config, extra=(), world_size=1):
    path = tmp_path / "ds.json"
    path.write_text(config if isinstance(config, str) else json.dumps(config))
    flags = {k: v for k, v in tiny(tmp_path).items()
             if k not in ("micro_batch_size", "global_batch_size", "log_interval")}
    return megatron_cpp.parse_arguments(command_line(flags) + ["--deepspeed", "--deepspeed-config", str(path)] +
                                        list(extra), world_size)


def test_ds_config_batch_keys_follow_deepspeeds_rule(tmp_path):
    # Any two of train_batch_size, micro batch and accumulation steps give the third (DP 4 here).
    a = parsed(tmp_path, {"train_micro_batch_size_per_gpu": 2, "gradient_accumulation_steps": 3}, world_size=4)
    assert (a.micro_batch_size, a.global_batch_size, a.num_microbatches) == (2, 24, 3)
    a = parsed(tmp_path, {"train_batch_size": 32, "gradient_accumulation_steps": 2}, world_size=4)
    assert (a.micro_batch_size, a.global_batch_size, a.num_microbatches) == (4, 32, 2)
    a = parsed(tmp_path, {"train_batch_size": 16}, ["--tensor-model-parallel-size", "2"], world_size=4)
    assert (a.micro_batch_size, a.global_batch_size, a.num_microbatches) == (8, 16, 1)
    a = parsed(tmp_path, {"train_batch_size": 8, "train_micro_batch_size_per_gpu": "auto",
                          "fp16": {"enabled": True, "loss_scale": 128, "initial_scale_power": 11},
                          "zero_optimization": {"stage": 0}}, ["--micro-batch-size", "4"])
    assert (a.micro_batch_size, a.fp16, a.loss_scale, a.use_distributed_optimizer) == (4, True, 128, False)
    a = parsed(tmp_path, {"train_batch_size": 8, "fp16": {"enabled": True, "loss_scale": 0, "initial_scale_power": 12,
                                                          "hysteresis": 3, "loss_scale_window": 50}})
    assert (a.loss_scale, a.initial_loss_scale, a.hysteresis, a.loss_scale_window) == (None, 4096, 3, 50)


def test_ds_config_defaults_are_deepspeeds_and_steps_per_print_yields_to_log_interval(tmp_path):
    # Without gradient_clipping DeepSpeed does not clip; fp16 without initial_scale_power starts at 2^16.
    a = parsed(tmp_path, {"train_batch_size": 8, "fp16": {"enabled": True}})
    assert (a.clip_grad, a.initial_loss_scale) == (0.0, 65536.0)
    a = parsed(tmp_path, {"train_batch_size": 8, "fp16": {"enabled": True}},
               ["--clip-grad", "0.3", "--initial-loss-scale", "1024"])
    assert (a.clip_grad, a.initial_loss_scale) == (0.3, 1024.0)
    # steps_per_print is DeepSpeed's own progress line: --log-interval, when given, wins.
    config = {"train_batch_size": 8, "steps_per_print": 2000}
    assert parsed(tmp_path, config, ["--log-interval", "10"]).log_interval == 10
    assert parsed(tmp_path, config).log_interval == 2000


def test_ds_config_zero_stages_are_the_sharding_strategies(tmp_path):
    for stage, strategy in enumerate(["no_shard", "optim", "optim_grads", "optim_grads_params"]):
        a = parsed(tmp_path, {"train_batch_size": 8, "zero_optimization": {"stage": stage}})
        assert (a.data_parallel_sharding_strategy, a.use_distributed_optimizer, a.use_megatron_fsdp) == (
            strategy, stage > 0, stage > 1), stage


@pytest.mark.parametrize("config, extra, message", [
    ({"train_batch_size": 8, "fp16": {"enabled": True, "loss_scale": 0}}, ["--loss-scale", "8"],
     r'"fp16.loss_scale" is 0 \(dynamic loss scaling\) but --loss-scale is 8'),
    ({"train_batch_size": 8, "gradient_clipping": 0.5}, ["--clip-grad", "1.0"],
     r'ds.json: "gradient_clipping" is 0.5 but --clip-grad is 1.0; give one, or make them agree'),
    ({"train_batch_size": 8, "bf16": {"enabled": True}}, ["--fp16"], r"--bf16 and --fp16 exclude each other"),
    ({"train_batch_size": 8, "train_micro_batch_size_per_gpu": 2, "gradient_accumulation_steps": 3}, [],
     r"train_batch_size \(8\) != micro batch \(2\) x gradient_accumulation_steps \(3\) x data-parallel size \(1\) = 6"),
    ('{"train_batch_size": 8,\n  "fp16": {"enabled": true,}}', [], r"ds.json: malformed JSON: parse error at line 2, column"),
    ({"train_batch_size": 8, "zero_optimization": {"stage": 1, "offload_optimizer": {"device": "cpu"}},
      "communication_data_type": "fp16", "prescale_gradients": True}, [],
     r'keys "communication_data_type", "prescale_gradients=true", "zero_optimization.offload_optimizer" are not '
     r"implemented"),
    ({"train_batch_size": 8, "zero_optimization": {"stage": 4}}, [],
     r'"zero_optimization.stage" is 4: DeepSpeed\'s ZeRO stages are 0 to 3'),
    ({"train_batch_size": 8, "optimizer": {"type": "Lamb"}}, [], r'"optimizer.type" is "Lamb"; only Adam and AdamW'),
    ({"train_batch_size": "eight"}, [], r'"train_batch_size" must be an integer, found "eight"'),
])
def test_a_bad_ds_config_is_one_line(tmp_path, config, extra, message):
    with pytest.raises(RuntimeError, match=message):
        parsed(tmp_path, config, extra)
    # From the program: the same line, no traceback or C++ terminate.
    flags = {k: v for k, v in tiny(tmp_path).items() if k not in ("micro_batch_size", "global_batch_size")}
    proc = subprocess.run([PRETRAIN] + command_line(flags) + ["--deepspeed_config", str(tmp_path / "ds.json")] + extra,
                          capture_output=True, text=True, env=ENV, timeout=60)
    assert proc.returncode != 0
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "terminate" not in proc.stderr, proc.stderr
    assert __import__("re").search(message, lines[0]), lines[0]


def test_deepspeed_without_a_config_and_gloo_with_cuda_are_refused(tmp_path):
    with pytest.raises(RuntimeError, match="--deepspeed needs --deepspeed_config"):
        megatron_cpp.parse_arguments(command_line(tiny(tmp_path)) + ["--deepspeed"], 1)
    with pytest.raises(RuntimeError, match="--device cuda with --distributed-backend gloo"):
        megatron_cpp.pretrain(command_line(dict(tiny(tmp_path), device="cuda")) + ["--distributed-backend", "gloo"])

