"""Scripts move by changing their imports: pretrain() in the seed's form
(model_builder, dataset_builder, forward_step_func; flags from sys.argv) and in Megatron-LM's
(train_valid_test_dataset_provider, model_provider, model_type, forward_step_func,
extra_args_provider, args_defaults), with callbacks that take no context and read get_args(),
get_tokenizer(), get_timers(), megatron_cpp.core.parallel_state, broadcast_data and
get_ltor_masks_and_position_ids, give the losses of
pretrain_gpt on the same flags; a call that fits no form is one TypeError; a launcher's
--local_rank must agree with the environment."""
import json
import os
import re
import subprocess
import sys

import pytest
import torch

import megatron_cpp
from megatron_cpp.core import parallel_state
from megatron_cpp.core.enums import ModelType
from megatron_cpp.training import get_args, get_timers, get_tokenizer, pretrain
from megatron_cpp.training.utils import get_ltor_masks_and_position_ids
from test_bindings_pretrain import ENV, EXAMPLE, MPIRUN, PRETRAIN, command_line, run_program, same_runs, tiny

sys.path.insert(0, os.path.dirname(EXAMPLE))
import pretrain_gpt  # noqa: E402  (the example's callbacks, in the seed's shape)

MEGATRON_SHAPED = """
import json, sys
from functools import partial
import torch
sys.path.insert(0, {example_dir!r})
import pretrain_gpt
from megatron_cpp.core import parallel_state, tensor_parallel
from megatron_cpp.core.enums import ModelType
from megatron_cpp.training import get_args, get_tokenizer, pretrain
from megatron_cpp.training.utils import get_ltor_masks_and_position_ids

def extra_args_provider(parser):
    group = parser.add_argument_group(title="my flags")
    group.add_argument("--my-scale", type=float, default=1.0)
    group.add_argument("--my-switch", action="store_true")
    group.add_argument("--my-choice", choices=["a", "b"], default="a")
    group.add_argument("--my-list", nargs="+", type=int, default=None)
    return parser

seen = {{}}

def model_provider(pre_process=True, post_process=True):
    args = get_args()
    seen.update(scale=args.my_scale, switch=args.my_switch, choice=args.my_choice, list=args.my_list,
                seed=args.seed, lr=args.lr, padded_vocab_size=args.padded_vocab_size)
    return pretrain_gpt.model_builder(pre_process, post_process)

def train_valid_test_datasets_provider(train_val_test_num_samples):
    return pretrain_gpt.dataset_builder(train_val_test_num_samples)

def forward_step(data_iterator, model):
    # As Megatron-LM's get_batch: TP rank 0's batch reaches the group through broadcast_data
    # (every rank here draws the same batch itself, which the broadcast must give back).
    # The legacy split of the samples ("text") into tokens and labels.
    data = next(data_iterator)
    first = parallel_state.get_tensor_model_parallel_rank() == 0
    text = tensor_parallel.broadcast_data(["text"], data if first else None, torch.int64)["text"]
    assert torch.equal(text, data["text"]), "broadcast_data changed the batch"
    tokens, labels = text[:, :-1].contiguous(), text[:, 1:].contiguous()
    assert torch.equal(tokens, data["tokens"]) and torch.equal(labels, data["labels"])
    args = get_args()
    attention_mask, loss_mask, position_ids = get_ltor_masks_and_position_ids(
        tokens, get_tokenizer().eod, args.reset_position_ids, args.reset_attention_mask, args.eod_mask_loss)
    output = model(tokens, position_ids, attention_mask, labels=labels)
    return output, partial(pretrain_gpt.loss_func, loss_mask)

try:
    pretrain(train_valid_test_datasets_provider, model_provider, ModelType.encoder_or_decoder,
             forward_step, extra_args_provider=extra_args_provider,
             args_defaults={{"seed": 77, "lr": 1.0, "my_list": [3, 4]}})
except BaseException:  # end every rank at once rather than leave the others waiting
    import traceback, megatron_cpp
    traceback.print_exc()
    sys.stderr.flush()
    megatron_cpp.abort_job(1)
print("SEEN " + json.dumps(seen), flush=True)
"""


def test_megatron_lm_shaped_script_at_tp2_gives_pretrain_gpts_losses(tmp_path):
    flags = tiny(tmp_path, tensor_model_parallel_size=2)
    want = run_program([PRETRAIN] + command_line(dict(flags, seed=77)), tmp_path / "cpp.jsonl", MPIRUN + ["-np", "2"])
    script = tmp_path / "megatron_shaped.py"
    script.write_text(MEGATRON_SHAPED.format(example_dir=os.path.dirname(EXAMPLE)))
    metrics_file = tmp_path / "py.jsonl"
    proc = subprocess.run(MPIRUN + ["-np", "2", "-x", "PYTHONPATH", "-x", "MEGATRON_LOG_LEVEL", sys.executable,
                                    str(script)] + command_line(flags) +
                          ["--my-scale", "2.5", "--my-switch", "--metrics-file", str(metrics_file)],
                          capture_output=True, text=True, env=ENV, timeout=300)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    # Every rank saw its extra flags, the defaults for flags not given, and Megatron-LM's padded vocabulary.
    # mpirun may join the two ranks' lines: find each record wherever it starts.
    seen = [json.loads(record) for record in re.findall(r"SEEN (\{[^{}]*\})", proc.stdout)]
    assert seen == [{"scale": 2.5, "switch": True, "choice": "a", "list": [3, 4], "seed": 77, "lr": 2e-3,
                     "padded_vocab_size": 256}] * 2
    from test_bindings_pretrain import metrics
    assert same_runs(metrics(metrics_file), want) and len(want) == 7


def test_seed_form_by_keywords_in_process(tmp_path, monkeypatch):
    flags = tiny(tmp_path, iters=2)
    want = megatron_cpp.pretrain(flags)  # the library's own callbacks
    seen = []

    def forward_step(data_iterator, model):
        timer = get_timers()("forward-step")
        timer.start()
        output = pretrain_gpt.forward_step(data_iterator, model)
        timer.stop()
        seen.append((parallel_state.get_data_parallel_world_size(), parallel_state.is_pipeline_last_stage(),
                     get_tokenizer().vocab_size, get_timers()("forward-step").elapsed(reset=False) > 0))
        return output

    monkeypatch.setattr(sys, "argv", ["seed.py"] + command_line(flags))
    got = pretrain(model_builder=pretrain_gpt.model_builder, dataset_builder=pretrain_gpt.dataset_builder,
                   forward_step_func=forward_step)
    assert [r.metrics for r in got.iterations] == [r.metrics for r in want.iterations]
    assert [e.metrics for e in got.evaluations] == [e.metrics for e in want.evaluations]
    assert seen and set(seen) == {(1, True, 128, True)}
    # The run's globals end with it.
    with pytest.raises(RuntimeError, match=r"get_args\(\) is not set: call it inside pretrain\(\)"):
        get_args()
    with pytest.raises(RuntimeError, match="the parallel state is not set"):
        parallel_state.get_tensor_model_parallel_rank()


def test_a_call_that_fits_no_form_is_one_type_error(tmp_path, monkeypatch):
    with pytest.raises(TypeError, match="fits none of the forms pretrain takes"):
        pretrain(1, 2)
    with pytest.raises(TypeError, match="fits none of the forms pretrain takes"):
        pretrain(pretrain_gpt.model_builder, pretrain_gpt.dataset_builder)
    monkeypatch.setattr(sys, "argv", ["script.py"] + command_line(tiny(tmp_path, iters=1)))
    with pytest.raises(ValueError, match="model_type ModelType.encoder_and_decoder is not implemented"):
        pretrain(pretrain_gpt.dataset_builder, pretrain_gpt.model_builder, ModelType.encoder_and_decoder,
                 pretrain_gpt.forward_step)
    with pytest.raises(NotImplementedError, match="process_non_loss_data_func is not implemented"):
        pretrain(pretrain_gpt.dataset_builder, pretrain_gpt.model_builder, ModelType.encoder_or_decoder,
                 pretrain_gpt.forward_step, process_non_loss_data_func=print)


def test_local_rank_from_the_launcher_must_agree(tmp_path):
    flags = tiny(tmp_path, iters=2)
    assert megatron_cpp.parse_arguments(command_line(flags) + ["--local_rank=0"]).local_rank == 0
    # Alone, this process is local rank 0: a launcher that says otherwise is refused.
    with pytest.raises(RuntimeError, match="--local-rank 1 disagrees with the launcher's local rank 0"):
        megatron_cpp.pretrain(command_line(flags) + ["--local_rank=1"])


def reference_masks(tokens, eod, reset_position_ids, reset_attention_mask, eod_mask_loss):
    """From the definition: a document ends at each EOD (which belongs to it); positions count
    from the document's start with reset_position_ids; a token attends to the tokens before it,
    only within its document with reset_attention_mask; EODs are not loss targets with
    eod_mask_loss. The mask is one [1, 1, s, s] unless it differs per sample."""
    b, s = tokens.shape
    masked = torch.ones(b if reset_attention_mask else 1, 1, s, s, dtype=torch.bool)
    loss_mask = torch.ones(b, s)
    positions = torch.zeros(b, s, dtype=torch.long)
    for r in range(b):
        start = 0
        for q in range(s):
            positions[r, q] = q - start if reset_position_ids else q
            if r < masked.shape[0]:
                masked[r, 0, q, (start if reset_attention_mask else 0):q + 1] = False
            if tokens[r, q] == eod:
                if eod_mask_loss:
                    loss_mask[r, q] = 0
                start = q + 1
    return masked, loss_mask, positions


@pytest.mark.parametrize("flags", [(p, a, m) for p in (False, True) for a in (False, True) for m in (False, True)])
def test_ltor_masks_and_position_ids_follow_the_definition(flags):
    generator = torch.Generator().manual_seed(sum(v << i for i, v in enumerate(flags)))
    tokens = torch.randint(0, 6, (3, 17), generator=generator)  # EOD = 5: several documents per row
    got = get_ltor_masks_and_position_ids(tokens, 5, *flags)
    want = reference_masks(tokens, 5, *flags)
    for g, w, name in zip(got, want, ["attention_mask", "loss_mask", "position_ids"]):
        assert g.dtype == w.dtype and g.shape == w.shape and torch.equal(g, w), name
    with pytest.raises(RuntimeError, match=r"expects tokens \[b, s\]"):
        get_ltor_masks_and_position_ids(tokens[0], 5, *flags)
