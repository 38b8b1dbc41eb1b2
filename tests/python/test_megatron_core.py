"""Against megatron-core itself (the package, pinned in scripts/setup.sh, so that CI runs it):
- its RankGenerator gives our process groups, the experts' folding included;
- its GPTDataset and BlendedDataset give our samples on the same files and settings
  (tools/check_against_megatron.py);
- its GPTModel (local layers, CPU, gloo) loads our checkpoints strictly and gives our logits, at
  TP 1 and 2, GPT-2 and Llama shapes, and with mixture-of-experts layers (Mixtral's routing with a
  gated shared expert, and DeepSeek-V3's sigmoid group-limited routing).
What needs Megatron-LM's training code, which the package does not ship (load_checkpoint,
save_checkpoint, tools/checkpoint), is test_megatron_lm_checkpoints.py, run against a checkout."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from data_helpers import BUILD_DIR, free_port, write_mmidx
from test_checkpoint import CONVERT, PRETRAIN, our_logits, run, tiny

pytest.importorskip("megatron.core", reason="megatron-core is not installed: scripts/setup.sh pins it")
ROOT = Path(__file__).resolve().parents[2]
DRIVER = str(Path(__file__).with_name("megatron_core_driver.py"))
NO_DROPOUT = ["--hidden-dropout", "0", "--attention-dropout", "0"]


# --- process groups ------------------------------------------------------------------------------

@pytest.mark.parametrize("world, tp, pp, cp, ep, etp, dp_last", [
    (8, 2, 1, 1, 2, None, False), (8, 2, 1, 1, 4, 1, False), (16, 2, 2, 1, 2, 2, False), (16, 1, 2, 2, 4, 1, False),
    (16, 4, 1, 1, 2, 2, False), (32, 2, 2, 2, 4, 1, False), (8, 1, 1, 1, 8, 1, False), (24, 2, 3, 1, 2, 1, False),
    # --use-tp-pp-dp-mapping, as Megatron-LM's dp_last functional tests run it
    (16, 2, 2, 2, 2, 2, True), (16, 1, 2, 2, 2, 1, True), (16, 4, 2, 1, 2, 2, True), (24, 2, 3, 1, 1, None, True),
    (8, 2, 1, 2, 4, 1, True)])
def test_rank_layout_is_megatron_cores_including_the_folded_expert_groups(world, tp, pp, cp, ep, etp, dp_last):
    """Its RankGenerator, order tp-cp-ep-dp-pp (tp-cp-ep-pp-dp with dp_last), built as
    initialize_model_parallel builds both."""
    import megatron_cpp
    from megatron.core.parallel_state import RankGenerator
    ours = megatron_cpp.rank_layout(world, tp, pp, cp, ep, etp, use_tp_pp_dp_mapping=dp_last)
    etp = etp or tp
    order = "tp-cp-ep-pp-dp" if dp_last else "tp-cp-ep-dp-pp"
    dense = RankGenerator(tp=tp, ep=1, dp=world // (tp * pp * cp), pp=pp, cp=cp, order=order)
    experts = RankGenerator(tp=etp, ep=ep, dp=world // (pp * etp * ep), pp=pp, cp=1, order=order)
    want = {"tensor_model_parallel": dense.get_ranks("tp"), "pipeline_model_parallel": dense.get_ranks("pp"),
            "data_parallel": dense.get_ranks("dp"), "context_parallel": dense.get_ranks("cp"),
            "model_parallel": dense.get_ranks("tp-pp"), "expert_model_parallel": experts.get_ranks("ep"),
            "expert_tensor_parallel": experts.get_ranks("tp"),
            "expert_tensor_and_model_parallel": experts.get_ranks("tp-ep"),
            "expert_data_parallel": experts.get_ranks("dp")}
    for kind, groups in want.items():
        assert sorted(ours[kind]) == sorted(groups), kind


# --- datasets ------------------------------------------------------------------------------------

def documents(seed: int, count: int) -> list[list[list[int]]]:
    rng = np.random.default_rng(seed)
    return [[rng.integers(0, 50000, int(rng.integers(1, 300))).tolist()] for _ in range(count)]


@pytest.mark.parametrize("case", [
    # A test split of 16 documents read 10 times over; train ends in a separate final epoch.
    dict(paths=["a"], split="90,6,4", seq=128, samples="1300,100,200"),
    # A weighted blend of two prefixes, a split without a test part.
    dict(paths=["0.3", "a", "0.7", "b"], split="90,10,0", seq=64, samples="500,60,0"),
    # Unweighted, so each prefix in proportion to its size.
    dict(paths=["a", "b"], split="98,2,0", seq=32, samples="800,40,0"),
], ids=["single_prefix_epochs", "weighted_blend", "blend_by_size"])
def test_megatron_core_gpt_datasets_give_our_samples(tmp_path, case):
    write_mmidx(str(tmp_path / "a"), documents(1, 400), np.uint16)
    write_mmidx(str(tmp_path / "b"), documents(2, 250), np.int32)
    paths = [p if p[0].isdigit() else str(tmp_path / p) for p in case["paths"]]
    proc = subprocess.run([sys.executable, str(ROOT / "tools" / "check_against_megatron.py"), "--build-dir", BUILD_DIR,
                           "--data-path", *paths, "--seq-length", str(case["seq"]), "--split", case["split"],
                           "--num-samples", case["samples"], "--samples", "5000", "--seed", "1234"],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr[-3000:]
    lines = proc.stdout.splitlines()
    wanted = [name for name, n in zip(["train", "valid", "test"], case["samples"].split(",")) if int(n) > 0]
    for name in wanted:
        assert any(line.startswith(f"{name}: Megatron-LM ") and line.endswith(" identical") for line in lines), proc.stdout


# --- the model -----------------------------------------------------------------------------------

def megatron_core_logits(iter_dir: Path, ids: torch.Tensor, model: dict, tmp_path: Path, tp: int,
                         *mode: str) -> torch.Tensor:
    torch.save(ids, tmp_path / "ids.pt")
    (tmp_path / "model.json").write_text(json.dumps(model))
    launch = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", str(tp), "--master-port",
              str(free_port())]
    proc = subprocess.run([*launch, DRIVER, str(iter_dir), str(tmp_path / "ids.pt"), str(tmp_path / "theirs.pt"),
                           str(tmp_path / "model.json"), *mode], capture_output=True, text=True, timeout=600,
                          env={**os.environ, "OMP_NUM_THREADS": "1", "TMPDIR": str(tmp_path)})  # torchrun's folders
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return torch.load(tmp_path / "theirs.pt")["logits"]


# Each case: our flags, the parity dump's name for the same model, and megatron-core's
# TransformerConfig fields and GPTModel arguments, each written from that side's definitions.
GPT2 = dict(
    flags=[],
    dump=dict(layers=4, hidden=32, heads=4, vocab=250, divisible_by=8, max_seq=16, seq=16, batch=2, norm="layernorm",
              mlp="gelu", bias=1, position="learned", tied=1),
    config=dict(num_layers=4, hidden_size=32, num_attention_heads=4, normalization="LayerNorm", activation="gelu",
                add_bias_linear=True),
    model=dict(vocab_size=256, max_sequence_length=16, share_embeddings_and_output_weights=True,
               position_embedding_type="learned_absolute"))
LLAMA_FLAGS = ["--position-embedding-type", "rope", "--normalization", "RMSNorm", "--swiglu", "--disable-bias-linear",
               "--untie-embeddings-and-output-weights", "--group-query-attention", "--num-query-groups", "2",
               "--ffn-hidden-size", "48", "--rotary-base", "500"]
LLAMA = dict(
    flags=LLAMA_FLAGS,
    dump=dict(layers=4, hidden=32, heads=4, groups=2, ffn=48, vocab=250, divisible_by=8, max_seq=16, seq=16, batch=2,
              norm="rmsnorm", mlp="swiglu", bias=0, position="rope", tied=0, rotary_base=500),
    config=dict(num_layers=4, hidden_size=32, num_attention_heads=4, num_query_groups=2, ffn_hidden_size=48,
                normalization="RMSNorm", gated_linear_unit=True, activation="silu", add_bias_linear=False),
    model=dict(vocab_size=256, max_sequence_length=16, share_embeddings_and_output_weights=False,
               position_embedding_type="rope", rotary_base=500))
LLAMA_QK = dict(  # Qwen3 / OLMo-2-style per-head query and key norms
    flags=[*LLAMA_FLAGS, "--qk-layernorm"], dump={**LLAMA["dump"], "qk_layernorm": 1},
    config={**LLAMA["config"], "qk_layernorm": True}, model=LLAMA["model"])
MIXTRAL = dict(
    flags=[*LLAMA_FLAGS, "--num-experts", "4", "--moe-router-topk", "2", "--moe-ffn-hidden-size", "40",
           "--moe-layer-freq", "[1,0,1,1]", "--moe-aux-loss-coeff", "1e-2", "--moe-z-loss-coeff", "1e-3",
           "--moe-shared-expert-intermediate-size", "24", "--moe-shared-expert-gate"],
    dump={**LLAMA["dump"], "experts": 4, "moe_layers": "1,0,1,1", "moe_ffn": 40, "topk": 2, "shared_ffn": 24,
          "shared_gate": 1},
    config={**LLAMA["config"], "num_moe_experts": 4, "moe_router_topk": 2, "moe_ffn_hidden_size": 40,
            "moe_layer_freq": [1, 0, 1, 1], "moe_shared_expert_intermediate_size": 24, "moe_shared_expert_gate": True},
    model=LLAMA["model"])
DEEPSEEK_ROUTING = dict(
    flags=[*LLAMA_FLAGS, "--num-experts", "8", "--moe-router-topk", "4", "--moe-ffn-hidden-size", "16",
           "--moe-router-score-function", "sigmoid", "--moe-router-num-groups", "4", "--moe-router-group-topk", "2",
           "--moe-router-topk-scaling-factor", "2.5", "--moe-router-pre-softmax", "--moe-aux-loss-coeff", "1e-2"],
    dump={**LLAMA["dump"], "experts": 8, "moe_layers": "1,1,1,1", "moe_ffn": 16, "topk": 4, "score": "sigmoid",
          "router_groups": 4, "group_topk": 2, "topk_scaling": 2.5, "pre_softmax": 1},
    config={**LLAMA["config"], "num_moe_experts": 8, "moe_router_topk": 4, "moe_ffn_hidden_size": 16,
            "moe_router_score_function": "sigmoid", "moe_router_num_groups": 4, "moe_router_group_topk": 2,
            "moe_router_topk_scaling_factor": 2.5, "moe_router_pre_softmax": True},
    model=LLAMA["model"])


@pytest.mark.parametrize("case, tp", [(GPT2, 1), (GPT2, 2), (LLAMA, 2), (LLAMA_QK, 2), (MIXTRAL, 1),
                                     (DEEPSEEK_ROUTING, 1)],
                         ids=["gpt2_tp1", "gpt2_tp2", "llama_tp2", "llama_qk_tp2", "mixtral_shared_expert",
                              "deepseek_routing"])
def test_megatron_core_gpt_model_loads_our_checkpoint_and_gives_our_logits(tmp_path, case, tp):
    run([PRETRAIN, *tiny(2, "--save", str(tmp_path / "ck"), "--tensor-model-parallel-size", str(tp), *case["flags"],
                         *NO_DROPOUT)], np=tp)
    whole = tmp_path / "ck"
    if tp > 1:  # our model at TP 1 from the same weights
        run([CONVERT, "--load", str(whole), "--save", str(tmp_path / "tp1"), "--target-tensor-parallel-size", "1"])
        whole = tmp_path / "tp1"
    state = torch.load(whole / "iter_0000002" / "mp_rank_00" / "model_optim_rng.pt", weights_only=True)["model"]
    ours = our_logits(state, tmp_path, **case["dump"])
    theirs = megatron_core_logits(tmp_path / "ck" / "iter_0000002", ours["input_ids"], case, tmp_path, tp)
    assert theirs.shape == ours["logits"].shape
    assert (theirs - ours["logits"]).abs().max().item() <= 1e-5


@pytest.mark.parametrize("case, tp", [(GPT2, 1), (GPT2, 2), (LLAMA, 2)], ids=["gpt2_tp1", "gpt2_tp2", "llama_tp2"])
def test_megatron_core_dist_checkpointing_loads_our_torch_dist_checkpoint(tmp_path, case, tp):
    """Its dist_checkpointing.load of its GPTModel's sharded_state_dict, from the torch_dist
    checkpoint of a run whose twin (same seed and layout) saved the legacy format: our logits."""
    for name, fmt in (("dist", "torch_dist"), ("ck", "torch")):
        run([PRETRAIN, *tiny(2, "--save", str(tmp_path / name), "--ckpt-format", fmt, "--tensor-model-parallel-size",
                             str(tp), *case["flags"], *NO_DROPOUT)], np=tp)
    run([CONVERT, "--load", str(tmp_path / "ck"), "--save", str(tmp_path / "tp1"), "--target-tensor-parallel-size", "1"])
    state = torch.load(tmp_path / "tp1" / "iter_0000002" / "mp_rank_00" / "model_optim_rng.pt", weights_only=True)
    ours = our_logits(state["model"], tmp_path, **case["dump"])
    theirs = megatron_core_logits(tmp_path / "dist" / "iter_0000002", ours["input_ids"], case, tmp_path, tp)
    assert (theirs - ours["logits"]).abs().max().item() <= 1e-5


@pytest.mark.parametrize("case, tp", [(GPT2, 2), (LLAMA, 2)], ids=["gpt2_tp2", "llama_tp2"])
def test_a_torch_dist_checkpoint_megatron_core_saves_resumes_here_with_its_logits(tmp_path, case, tp):
    """What its dist_checkpointing.save writes of its GPTModel (with Megatron-LM's common state)
    converts here to our layout with its logits, and resumes training at its TP size."""
    ids = torch.randint(0, 250, (2, 16), generator=torch.Generator().manual_seed(7))
    theirs = megatron_core_logits(tmp_path / "mc" / "iter_0000005", ids, case, tmp_path, tp, "save")
    run([CONVERT, "--load", str(tmp_path / "mc"), "--save", str(tmp_path / "tp1")])
    state = torch.load(tmp_path / "tp1" / "iter_0000005" / "mp_rank_00" / "model_optim_rng.pt", weights_only=True)
    ours = our_logits(state["model"], tmp_path, input_ids=ids, **case["dump"])
    assert (theirs - ours["logits"]).abs().max().item() <= 1e-5
    resumed = run([PRETRAIN, *tiny(6, "--load", str(tmp_path / "mc"), "--no-load-optim", "--tensor-model-parallel-size",
                                   str(tp), *case["flags"], *NO_DROPOUT)], np=tp)
    assert "[ iter_0000005 ] at iteration 5" in resumed.stdout
    assert "iteration        6/       6 | consumed samples:           48" in resumed.stdout
