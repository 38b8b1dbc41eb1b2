"""Uneven pipeline splits: --decoder-first/last-pipeline-num-layers and
--account-for-embedding/loss-in-pipeline-split. Each chunk's layers against megatron-core's own
get_transformer_layer_offset / get_num_layers_to_build, and training at those layouts against the
single-rank run, through a checkpoint converted to one rank."""
import itertools
import warnings

import pytest
import torch

import megatron_cpp
from data_helpers import check_args
from test_checkpoint import CONVERT, PRETRAIN, losses, run, tiny

warnings.filterwarnings("ignore")
REASON = "megatron-core is not installed: scripts/setup.sh pins it"
mcore_layer = pytest.importorskip("megatron.core.transformer.transformer_layer", reason=REASON)
mcore_block = pytest.importorskip("megatron.core.transformer.transformer_block", reason=REASON)
from megatron.core.transformer.transformer_config import TransformerConfig as McoreConfig  # noqa: E402


def splits():
    """Every valid split of up to 9 layers over 2-4 stages and 1-2 chunks."""
    for n, pp, vpp in itertools.product(range(2, 10), (2, 3, 4), (1, 2)):
        for first, last in itertools.product((None, 0, 1, 2, 4), repeat=2):
            yield n, pp, vpp, first, last, False, False
        for emb, loss in ((True, False), (False, True), (True, True)):
            yield n, pp, vpp, None, None, emb, loss


def megatron_core_chunks(fields):
    """megatron-core's (offset, count) per (stage, chunk), None where it refuses the split or its
    chunks do not hold every layer exactly once, "crash" where it accepts the split but its offset
    divides by zero (a first and a last stage of their own, no stage between, and virtual stages)."""
    vpp = fields["virtual_pipeline_model_parallel_size"] or 1
    try:
        config = McoreConfig(hidden_size=8, num_attention_heads=1, pipeline_dtype=torch.float32, **fields)
    except (AssertionError, ValueError):
        return None
    try:
        chunks = {(p, v): (mcore_layer.get_transformer_layer_offset(config, vp_stage=v if vpp > 1 else None, pp_rank=p),
                           mcore_block.get_num_layers_to_build(config, vp_stage=v if vpp > 1 else None, pp_rank=p))
                  for p in range(fields["pipeline_model_parallel_size"]) for v in range(vpp)}
    except ZeroDivisionError:
        return "crash"
    except (AssertionError, ValueError):
        return None
    held = sorted(i for offset, count in chunks.values() for i in range(offset, offset + max(count, 0)))
    ok = all(count >= 0 for _, count in chunks.values()) and held == list(range(fields["num_layers"]))
    return chunks if ok else None


def test_each_chunk_holds_the_layers_megatron_core_gives_it():
    compared = refused = crashed = 0
    for n, pp, vpp, first, last, emb, loss in splits():
        fields = dict(num_layers=n, pipeline_model_parallel_size=pp,
                      virtual_pipeline_model_parallel_size=vpp if vpp > 1 else None,
                      num_layers_in_first_pipeline_stage=first, num_layers_in_last_pipeline_stage=last,
                      account_for_embedding_in_pipeline_split=emb, account_for_loss_in_pipeline_split=loss)
        theirs = megatron_core_chunks(fields)
        ours = megatron_cpp.TransformerConfig(hidden_size=8, num_attention_heads=1, **fields)
        try:
            ours.finalize()
        except (RuntimeError, ValueError):
            assert theirs is None, fields  # refused only where megatron-core cannot split it either
            refused += 1
            continue
        assert theirs is not None, fields
        vpp = fields["virtual_pipeline_model_parallel_size"] or 1
        mine = {(p, v): tuple(ours.pipeline_layers(p, v)) for p in range(pp) for v in range(vpp)}
        if theirs == "crash":  # then each chunk in order (chunk-major) continues where the one before ended
            order = sorted(mine, key=lambda pv: (pv[1], pv[0]))
            assert [mine[pv][0] for pv in order] == list(itertools.accumulate(
                [0] + [mine[pv][1] for pv in order[:-1]])) and sum(c for _, c in mine.values()) == n, fields
            crashed += 1
            continue
        assert mine == theirs, fields
        compared += 1
    assert compared > 150 and refused > 50 and crashed > 0, (compared, refused, crashed)


# (name, ranks, flags, another split of the same stages): 6 layers unless named; the last one is
# megatron-core's functional-test layout, whose first and last chunks hold no transformer layer.
PP4 = ["--pipeline-model-parallel-size", "4"]
LAYOUTS = [
    ("first2_last2_pp4", 4, PP4 + ["--decoder-first-pipeline-num-layers", "2", "--decoder-last-pipeline-num-layers", "2"],
     PP4 + ["--decoder-first-pipeline-num-layers", "1", "--decoder-last-pipeline-num-layers", "1"]),
    ("first_only_pp3", 3, ["--pipeline-model-parallel-size", "3", "--decoder-first-pipeline-num-layers", "2"],
     ["--pipeline-model-parallel-size", "3"]),
    ("embedding_pp2_dp2", 4, ["--pipeline-model-parallel-size", "2", "--account-for-embedding-in-pipeline-split",
                              "--num-layers", "5"],
     ["--pipeline-model-parallel-size", "2", "--num-layers", "5", "--decoder-first-pipeline-num-layers", "3"]),
    ("both_pp4_vp2", 4, PP4 + ["--num-virtual-stages-per-pipeline-rank", "2", "--account-for-embedding-in-pipeline-split",
                               "--account-for-loss-in-pipeline-split"], None),
]


def six(iters, *extra):
    return tiny(iters, "--num-layers", "6", "--hidden-dropout", "0", "--attention-dropout", "0", *extra)


@pytest.mark.parametrize("name,ranks,flags,other", LAYOUTS, ids=[layout[0] for layout in LAYOUTS])
def test_an_uneven_split_trains_as_one_rank_and_its_checkpoint_converts(tmp_path, name, ranks, flags, other):
    one = tmp_path / "one.jsonl"
    layers = flags[flags.index("--num-layers") + 1] if "--num-layers" in flags else "6"
    run([PRETRAIN, *six(6, "--num-layers", layers, "--metrics-file", str(one))])
    ck, converted = tmp_path / "ck", tmp_path / "converted"
    run([PRETRAIN, *six(3, *flags, "--save", str(ck), "--metrics-file", str(tmp_path / "split.jsonl"))], np=ranks)
    whole = losses(one)
    split = losses(tmp_path / "split.jsonl")
    assert split == pytest.approx({i: whole[i] for i in (1, 2, 3)}, rel=1e-5), (split, whole)
    # The same split resumes; another is refused by name (the stages' files number their layers
    # from the stage's first).
    if other:
        refused = run([PRETRAIN, *six(4, *other, "--load", str(ck))], np=ranks, check=False)
        assert refused.returncode != 0 and "was saved with --decoder-first-pipeline-num-layers" in refused.stderr, \
            refused.stderr[-2000:]
    # Converted to one rank, it continues the whole run's losses.
    run([CONVERT, "--load", str(ck), "--save", str(converted), "--target-tensor-parallel-size", "1",
         "--target-pipeline-model-parallel-size", "1"])
    resumed = tmp_path / "resumed.jsonl"
    run([PRETRAIN, *six(6, "--num-layers", layers, "--load", str(converted), "--metrics-file", str(resumed))])
    assert losses(resumed) == pytest.approx({i: whole[i] for i in (4, 5, 6)}, rel=1e-5)


def test_splits_that_do_not_divide_are_refused_naming_the_flags():
    bad = [(["--pipeline-model-parallel-size", "4", "--decoder-first-pipeline-num-layers", "1"],
            "the 5 layers left after --decoder-first-pipeline-num-layers do not divide over the 3 pipeline stages"),
           (["--pipeline-model-parallel-size", "2", "--decoder-first-pipeline-num-layers", "2",
             "--account-for-loss-in-pipeline-split"],
            "--decoder-first-pipeline-num-layers and --account-for-loss-in-pipeline-split exclude each other"),
           (["--pipeline-model-parallel-size", "4", "--account-for-embedding-in-pipeline-split"],
            "--num-layers (6) with the embedding and loss counted is not divisible by --pipeline-model-parallel-size"),
           (["--pipeline-model-parallel-size", "2", "--decoder-last-pipeline-num-layers", "2",
             "--num-layers-per-virtual-pipeline-stage", "1"], "--num-virtual-stages-per-pipeline-rank")]
    for flags, message in bad:
        proc = check_args(six(1, *flags), int(flags[1]))
        assert proc.returncode == 2 and message in proc.stdout, (flags, proc.stdout[-1500:])


# --- --pipeline-model-parallel-layout: megatron-core's layout strings, functional-test forms included

LAYOUT_CASES = [  # (layout, pipeline size, transformer layers)
    ("Et*3|(tt|)*6L", 4, 15), ("Et*2|(tt|)*5t|tL", 4, 14), ("Et*2|(tt|)*5t|tL", 8, 14), ("Et|tt|tt|tL", 2, 6), ("E|tttt|tt|L", 4, 6),
    ("Ettt|tt,t|L", 3, 6), ("(Et|t|)*1tt|ttL", 2, 6), ("Et*6L", 1, 6), ("E|t*6|L", 3, 6),
]


def test_each_layout_chunk_holds_the_layers_megatron_core_gives_it():
    from megatron.core import parallel_state
    from megatron.core.transformer.enums import LayerType
    from megatron.core.transformer.pipeline_parallel_layer_layout import PipelineParallelLayerLayout
    for layout, pp, n in LAYOUT_CASES:
        theirs = PipelineParallelLayerLayout(layout, pp)
        theirs.validate_layer_layout(n, None)
        vpp = theirs.virtual_pipeline_model_parallel_size
        parallel_state.set_virtual_pipeline_model_parallel_world_size(vpp if vpp > 1 else None)
        try:
            expected = {(p, v): (theirs.get_layer_offset(vp_stage=v, pp_rank=p),
                                 theirs.get_num_layers_to_build(LayerType.decoder, vp_stage=v, pp_rank=p))
                        for p in range(pp) for v in range(vpp)}
        finally:
            parallel_state.set_virtual_pipeline_model_parallel_world_size(None)
        ours = megatron_cpp.TransformerConfig(hidden_size=8, num_attention_heads=1, num_layers=n,
                                              pipeline_model_parallel_size=pp,
                                              pipeline_model_parallel_layout=layout).finalize()
        assert (ours.virtual_pipeline_model_parallel_size or 1) == vpp, layout
        assert {(p, v): tuple(ours.pipeline_layers(p, v)) for p in range(pp) for v in range(vpp)} == expected, layout


def test_a_layout_trains_as_one_rank_and_its_checkpoint_converts(tmp_path):
    # Two stages of two chunks each, the first chunk of each stage thinner than the second.
    flags = ["--pipeline-model-parallel-size", "2", "--pipeline-model-parallel-layout", "Et|t|tt|ttL"]
    one = tmp_path / "one.jsonl"
    run([PRETRAIN, *six(6, "--metrics-file", str(one))])
    ck, converted = tmp_path / "ck", tmp_path / "converted"
    run([PRETRAIN, *six(3, *flags, "--save", str(ck), "--metrics-file", str(tmp_path / "split.jsonl"))], np=2)
    whole = losses(one)
    assert losses(tmp_path / "split.jsonl") == pytest.approx({i: whole[i] for i in (1, 2, 3)}, rel=1e-5)
    other = ["--pipeline-model-parallel-size", "2", "--pipeline-model-parallel-layout", "Ett|t|t|ttL"]
    refused = run([PRETRAIN, *six(4, *other, "--load", str(ck))], np=2, check=False)
    assert refused.returncode != 0 and "was saved with --pipeline-model-parallel-layout" in refused.stderr, \
        refused.stderr[-2000:]
    resumed = tmp_path / "resumed.jsonl"
    run([PRETRAIN, *six(6, *flags, "--load", str(ck), "--metrics-file", str(resumed))], np=2)
    assert losses(resumed) == pytest.approx({i: whole[i] for i in (4, 5, 6)}, rel=1e-5)
    run([CONVERT, "--load", str(ck), "--save", str(converted), "--target-tensor-parallel-size", "1",
         "--target-pipeline-model-parallel-size", "1"])
    resumed = tmp_path / "converted.jsonl"
    run([PRETRAIN, *six(6, "--load", str(converted), "--metrics-file", str(resumed))])
    assert losses(resumed) == pytest.approx({i: whole[i] for i in (4, 5, 6)}, rel=1e-5)


def test_layouts_that_do_not_fit_are_refused_naming_the_flag():
    pp2 = ["--pipeline-model-parallel-size", "2", "--pipeline-model-parallel-layout"]
    bad = [(pp2 + ["Ett|ttt|L"], "names 3 stages, not a multiple of --pipeline-model-parallel-size (2)"),
           (pp2 + ["Ettt|tttmL"], "multi-token prediction is not implemented"),
           (pp2 + ["Ettt|ttxL"], "'x' is not a layer"),
           (pp2 + ["Ettt|ttL"], "places 5 transformer layers (t), not --num-layers (6)"),
           (pp2 + ["tEtt|tttL"], "the embedding (E) must open the first stage and the loss (L) close the last"),
           (pp2 + ["Ettt|tttL", "--num-virtual-stages-per-pipeline-rank", "2"],
            "--pipeline-model-parallel-layout sets the virtual stages itself")]
    for flags, message in bad:
        proc = check_args(six(1, *flags), 2)
        assert proc.returncode == 2 and message in proc.stdout, (flags, proc.stdout[-1500:])
