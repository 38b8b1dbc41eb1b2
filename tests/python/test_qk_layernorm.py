"""--qk-layernorm: each head's query and key normalised before RoPE. megatron-core's GPTModel gives
our logits from the same weights (test_megatron_core.py's llama_qk case); here, tensor (with
sequence) and pipeline parallelism give the single-rank losses, which needs the norms' gradients
summed over the TP ranks (each sees its own heads); a Hugging Face export other than Qwen 3's
(test_checkpoint.py's qwen3 case) is refused by name."""
import subprocess

from data_helpers import program
from test_fp8_training import same, train

QK = ["--qk-layernorm", "--normalization", "RMSNorm"]


def test_tensor_sequence_and_pipeline_parallelism_give_the_single_rank_losses(tmp_path):
    want, _ = train(tmp_path, "single", QK)
    assert want[-1][1] < want[0][1] - 0.2  # it trains
    for name, ranks, flags in [("tp2", 2, ["--tensor-model-parallel-size", "2"]),
                               ("tp2_sp", 2, ["--tensor-model-parallel-size", "2", "--sequence-parallel"]),
                               ("pp2", 2, ["--pipeline-model-parallel-size", "2"])]:
        same(train(tmp_path, name, QK + flags, ranks=ranks)[0], want, name=name)
    layernorm, _ = train(tmp_path, "layernorm_tp2", ["--qk-layernorm", "--tensor-model-parallel-size", "2"], ranks=2)
    same(layernorm, train(tmp_path, "layernorm", ["--qk-layernorm"])[0], name="layernorm_tp2")
    assert [r[1] for r in layernorm] != [r[1] for r in train(tmp_path, "plain", [])[0]]  # the norms are there


def test_norms_across_heads_give_the_single_rank_losses_at_every_layout(tmp_path):
    """--qk-layernorm-across-heads (OLMoE's): each TP rank holds its heads' part of the norms'
    weights and the sum of squares is summed over TP ranks, forward and backward; with sequence
    parallelism and pipeline stages too. test_moe_checkpoints.py's olmoe case checks the norm
    itself against transformers' OLMoE."""
    across = QK + ["--qk-layernorm-across-heads", "--group-query-attention", "--num-query-groups", "2"]
    want, _ = train(tmp_path, "across", across)
    assert want[-1][1] < want[0][1] - 0.2  # it trains
    for name, ranks, flags in [("across_tp2", 2, ["--tensor-model-parallel-size", "2"]),
                               ("across_tp2_sp", 2, ["--tensor-model-parallel-size", "2", "--sequence-parallel"]),
                               ("across_pp2", 2, ["--pipeline-model-parallel-size", "2"])]:
        same(train(tmp_path, name, across + flags, ranks=ranks)[0], want, name=name)
    per_head, _ = train(tmp_path, "per_head", QK + ["--group-query-attention", "--num-query-groups", "2"])
    assert [r[1] for r in per_head] != [r[1] for r in want]


def test_a_hugging_face_export_without_qwen3s_layout_is_refused_by_name(tmp_path):
    ck = tmp_path / "ck"
    train(tmp_path, "save", QK + ["--save", ck, "--save-interval", "1"], iters=1)
    proc = subprocess.run([program("convert_checkpoint"), "--load", str(ck), "--export-hf", str(tmp_path / "hf")],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode != 0
    assert "no Hugging Face architecture fits this checkpoint" in proc.stderr, proc.stderr
    assert "GPT2LMHeadModel has no query and key norms (--qk-layernorm)" in proc.stderr, proc.stderr
    assert "Qwen3ForCausalLM needs --normalization RMSNorm, --swiglu" in proc.stderr, proc.stderr
    assert not (tmp_path / "hf").exists()
