"""MoE checkpoints (docs/moe.md, docs/checkpoints.md): an expert-parallel run writes Megatron-LM's
per-(TP, PP, EP)-rank folders and resumes bit for bit, convert_checkpoint moves an MoE checkpoint
to other tensor- and expert-parallel layouts, and the Hugging Face MoE classes import with their
logits and export back bit for bit."""
import subprocess

import pytest
import torch

from data_helpers import program
from test_moe import MODEL, MOE, same, train


def test_an_expert_parallel_run_saves_megatron_lms_rank_files_and_resumes_bit_for_bit(tmp_path):
    ckpt = tmp_path / "ckpt"
    flags = ["--expert-model-parallel-size", "2", "--moe-token-dispatcher-type", "alltoall"]
    whole = train(tmp_path, "whole", flags, ranks=2)
    train(tmp_path, "first", flags + ["--save", ckpt, "--save-interval", "2", "--exit-interval", "2"], ranks=2)
    resumed = train(tmp_path, "resumed", flags + ["--load", ckpt], ranks=2)
    assert resumed == whole[2:]
    # One folder per expert-parallel rank (mp_rank_TT_EEE), each with its two experts under their
    # local indices, as Megatron-LM's legacy checkpoints keep them.
    iter_dir = ckpt / "iter_0000002"
    assert sorted(p.name for p in iter_dir.iterdir()) == ["mp_rank_00_000", "mp_rank_00_001"]
    halves = [torch.load(iter_dir / d / "model_optim_rng.pt", weights_only=True)["model"]
              for d in ("mp_rank_00_000", "mp_rank_00_001")]
    for model in halves:
        experts = {k.split(".")[6] for k in model if ".mlp.experts.local_experts." in k}
        assert experts == {"0", "1"}, sorted(model)
    expert = "decoder.layers.0.mlp.experts.local_experts.0.linear_fc1.weight"
    assert not torch.equal(halves[0][expert], halves[1][expert])  # experts 0 and 2
    assert torch.equal(halves[0]["decoder.layers.0.mlp.router.weight"], halves[1]["decoder.layers.0.mlp.router.weight"])
    # Another expert-parallel size cannot read these files, and says so.
    proc = subprocess.run([program("pretrain_gpt"), *MODEL, *MOE, "--train-iters", "4", "--load", str(ckpt)],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode != 0 and "this run has TP 1, PP 1, EP 1" in proc.stderr, proc.stderr[-2000:]


def test_a_moe_run_resumes_bit_for_bit(tmp_path):
    ckpt = tmp_path / "ckpt"
    whole = train(tmp_path, "whole", [])
    train(tmp_path, "first", ["--save", ckpt, "--save-interval", "2", "--exit-interval", "2"])
    resumed = train(tmp_path, "resumed", ["--load", ckpt])
    assert resumed == whole[2:]
    # torch.load opens it as Megatron-LM's loader does, --moe-layer-freq evaluated as Megatron-LM keeps it.
    saved = torch.load(ckpt / "iter_0000002" / "mp_rank_00" / "model_optim_rng.pt", weights_only=True)
    assert saved["args"].moe_layer_freq == [1, 0, 1, 1] and saved["args"].num_experts == 4
    # No Hugging Face class has this model's gated shared expert without q/k/v biases: refused, nothing written.
    proc = subprocess.run([program("convert_checkpoint"), "--load", str(ckpt), "--export-hf", str(tmp_path / "hf")],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1 and "no Hugging Face architecture fits this checkpoint" in proc.stderr, proc.stderr
    assert not (tmp_path / "hf").exists()
    # Another expert count: one line naming both, before any tensor is read.
    flags = [*MODEL, *MOE, "--num-experts", "8", "--train-iters", "4", "--load", str(ckpt)]
    proc = subprocess.run([program("pretrain_gpt"), *flags], capture_output=True, text=True, timeout=120)
    assert proc.returncode != 0 and "was saved with --num-experts 4, this run has 8" in proc.stderr, proc.stderr[-2000:]


def convert(*flags):
    proc = subprocess.run([program("convert_checkpoint"), *map(str, flags)], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc


def test_convert_checkpoint_moves_an_moe_checkpoint_to_other_tensor_and_expert_parallel_layouts(tmp_path):
    """An EP 2 save (experts 0-1 and 2-3 in two folders, optimizer state along) converted to one
    rank, to TP 2 x EP 2 (each expert and the shared expert split over TP) and to TP 2 with
    expert TP 1 resumes there as the whole run goes on; EP 2 -> 1 -> 2 gives back the very files'
    tensors."""
    pad = ["--make-vocab-size-divisible-by", "64"]
    whole = train(tmp_path, "whole", pad)
    ep2 = pad + ["--expert-model-parallel-size", "2", "--moe-token-dispatcher-type", "alltoall"]
    ckpt = tmp_path / "ep2"
    train(tmp_path, "first", ep2 + ["--save", ckpt, "--save-interval", "2", "--exit-interval", "2"], ranks=2)
    one, back = tmp_path / "one", tmp_path / "back"
    convert("--load", ckpt, "--save", one)
    convert("--load", one, "--save", back, "--target-expert-parallel-size", "2")
    for d in ("mp_rank_00_000", "mp_rank_00_001"):
        want = torch.load(ckpt / "iter_0000002" / d / "model_optim_rng.pt", weights_only=False)
        got = torch.load(back / "iter_0000002" / d / "model_optim_rng.pt", weights_only=False)
        assert want["model"].keys() == got["model"].keys()
        assert all(torch.equal(want["model"][k], got["model"][k]) for k in want["model"]), d
    same(train(tmp_path, "resumed_one", pad + ["--load", one]), whole[2:])

    tp = pad + ["--tensor-model-parallel-size", "2", "--sequence-parallel", "--moe-token-dispatcher-type", "alltoall"]
    for name, target, flags in [
            ("tp2_ep2", ["--target-expert-parallel-size", "2"], ["--expert-model-parallel-size", "2"]),
            ("tp2_etp1_ep2", ["--target-expert-parallel-size", "2", "--target-expert-tensor-parallel-size", "1"],
             ["--expert-model-parallel-size", "2", "--expert-tensor-parallel-size", "1"])]:
        convert("--load", ckpt, "--save", tmp_path / name, "--target-tensor-parallel-size", "2", *target)
        ranks = 4 if name == "tp2_ep2" else 2
        same(train(tmp_path, name, tp + flags + ["--load", tmp_path / name], ranks=ranks), whole[2:])
    # TP 2's shards of an expert: its fc1 rows (gate and up halves each split) and fc2 columns.
    shard = torch.load(tmp_path / "tp2_ep2" / "iter_0000002" / "mp_rank_01_001" / "model_optim_rng.pt",
                       weights_only=False)["model"]
    full = torch.load(one / "iter_0000002" / "mp_rank_00" / "model_optim_rng.pt", weights_only=False)["model"]
    fc1 = full["decoder.layers.0.mlp.experts.local_experts.3.linear_fc1.weight"]
    gate, up = fc1.chunk(2)
    assert torch.equal(shard["decoder.layers.0.mlp.experts.local_experts.1.linear_fc1.weight"],
                       torch.cat([gate.chunk(2)[1], up.chunk(2)[1]]))
    assert torch.equal(shard["decoder.layers.0.mlp.experts.local_experts.1.linear_fc2.weight"],
                       full["decoder.layers.0.mlp.experts.local_experts.3.linear_fc2.weight"].chunk(2, dim=1)[1])
    # Expert counts the target cannot split: one line, nothing written.
    proc = subprocess.run([program("convert_checkpoint"), "--load", str(ckpt), "--save", str(tmp_path / "ep3"),
                           "--target-expert-parallel-size", "3"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1 and "--target-expert-parallel-size 3 must divide the checkpoint's --num-experts (4)" \
        in proc.stderr, proc.stderr
    assert not (tmp_path / "ep3").exists()


# Hugging Face's MoE members of the Llama family, small: their config, then what our dump tool
# takes for the same model. Qwen2-MoE with a dense layer between MoE ones (mlp_only_layers) and
# the top-k probabilities left unnormalised (norm_topk_prob false: --moe-router-pre-softmax).
HF_MOE = {
    "mixtral": ("MixtralConfig", "MixtralForCausalLM",
                dict(hidden_size=32, intermediate_size=24, num_hidden_layers=2, num_attention_heads=4,
                     num_key_value_heads=2, max_position_embeddings=16, vocab_size=250, num_local_experts=4,
                     num_experts_per_tok=2, sliding_window=None),
                dict(layers=2, norm="rmsnorm", eps=1e-5, mlp="swiglu", bias=0, position="rope", tied=0, groups=2,
                     ffn=24, rotary_base=1000000, experts=4, moe_layers="1,1", moe_ffn=24, topk=2)),
    "qwen2_moe": ("Qwen2MoeConfig", "Qwen2MoeForCausalLM",
                  dict(hidden_size=32, intermediate_size=40, moe_intermediate_size=24,
                       shared_expert_intermediate_size=20, num_hidden_layers=3, num_attention_heads=4,
                       num_key_value_heads=2, max_position_embeddings=16, vocab_size=250, num_experts=4,
                       num_experts_per_tok=2, mlp_only_layers=[1], norm_topk_prob=False),
                  dict(layers=3, norm="rmsnorm", eps=1e-6, mlp="swiglu", bias=0, qkv_bias=1, position="rope", tied=0,
                       groups=2, ffn=40, experts=4, moe_layers="1,0,1", moe_ffn=24, topk=2, pre_softmax=1,
                       shared_ffn=20, shared_gate=1)),
    # Qwen3-MoE: each head's query and key normalised, heads of 16 in a hidden of 32 (head_dim),
    # the top-k renormalised, a dense layer between MoE ones.
    "qwen3_moe": ("Qwen3MoeConfig", "Qwen3MoeForCausalLM",
                  dict(hidden_size=32, intermediate_size=40, moe_intermediate_size=24, num_hidden_layers=3,
                       num_attention_heads=4, num_key_value_heads=2, head_dim=16, max_position_embeddings=16,
                       vocab_size=250, num_experts=4, num_experts_per_tok=2, mlp_only_layers=[1], norm_topk_prob=True),
                  dict(layers=3, norm="rmsnorm", eps=1e-6, mlp="swiglu", bias=0, position="rope", tied=0, groups=2,
                       ffn=40, experts=4, moe_layers="1,0,1", moe_ffn=24, topk=2, qk_layernorm=1, kv_channels=16)),
    # OLMoE: one RMSNorm over all the heads' queries and one over the keys (not per head), the
    # top-k of the softmax over all experts unnormalised.
    "olmoe": ("OlmoeConfig", "OlmoeForCausalLM",
              dict(hidden_size=32, intermediate_size=24, num_hidden_layers=2, num_attention_heads=4,
                   num_key_value_heads=2, max_position_embeddings=16, vocab_size=250, num_experts=4,
                   num_experts_per_tok=2, norm_topk_prob=False),
              dict(layers=2, norm="rmsnorm", eps=1e-5, mlp="swiglu", bias=0, position="rope", tied=0, groups=2, ffn=24,
                   experts=4, moe_layers="1,1", moe_ffn=24, topk=2, pre_softmax=1, qk_layernorm=1, qk_across_heads=1)),
}


@pytest.mark.parametrize("family", sorted(HF_MOE))
def test_hugging_face_moe_import_gives_their_logits_and_exports_back_bit_identical(tmp_path, family):
    import transformers

    from test_checkpoint import CONVERT, assert_exported_back, our_logits, run, saved_hf_model

    config_class, model_class, kwargs, dump_opts = HF_MOE[family]
    theirs = saved_hf_model(tmp_path, config_class, model_class, kwargs)
    run([CONVERT, "--import-hf", str(tmp_path / "hf"), "--save", str(tmp_path / "ck"),
         "--make-vocab-size-divisible-by", "8"])
    state = torch.load(tmp_path / "ck" / "release" / "mp_rank_00" / "model_optim_rng.pt", weights_only=True)["model"]
    assert "decoder.layers.0.mlp.experts.local_experts.3.linear_fc2.weight" in state
    dump = our_logits(state, tmp_path, hidden=32, heads=4, vocab=250, divisible_by=8, max_seq=16, seq=16, batch=2,
                      **dump_opts)
    with torch.no_grad():
        expected = theirs(dump["input_ids"]).logits
    assert (dump["logits"][..., :250] - expected).abs().max().item() <= 1e-4

    assert_exported_back(tmp_path, theirs)
    config = transformers.AutoConfig.from_pretrained(str(tmp_path / "back"))
    assert type(config).__name__ == config_class
    for key, value in kwargs.items():
        assert getattr(config, key) == value, key
