"""Checkpoints end to end with the pretrain_gpt and convert_checkpoint programs: Python's
torch.load opens every file; a run killed (SIGKILL) at each step of a save leaves the previous
checkpoint current and loadable, and resuming from it repeats the killed run's losses; SIGTERM
with --exit-signal-handler saves and exits 0; a checkpoint resharded TP2 x PP2 -> TP1 x PP1 -> TP2 x
PP2 resumes with the uninterrupted run's losses (fp32 tolerance); the Hugging Face export loads
in transformers with our model's logits (<= 1e-4) and imports back unchanged."""
from __future__ import annotations

import json
import os
import signal
import subprocess
from pathlib import Path

import pytest
import torch
from data_helpers import MPIRUN
from data_helpers import run as helper_run

ROOT = Path(__file__).resolve().parents[2]
BUILD = Path(os.environ.get("MEGATRON_BUILD_DIR", ROOT / "build"))
PRETRAIN = str(BUILD / "bin" / "pretrain_gpt")
CONVERT = str(BUILD / "bin" / "convert_checkpoint")
DUMP = str(BUILD / "bin" / "gpt_parity_dump")


def tiny(iters: int, *extra: str) -> list[str]:
    return ["--num-layers", "4", "--hidden-size", "32", "--num-attention-heads", "4", "--seq-length", "16",
            "--micro-batch-size", "2", "--global-batch-size", "8", "--train-iters", str(iters),
            "--lr", "2e-3", "--min-lr", "2e-4", "--lr-warmup-iters", "1", "--lr-decay-iters", "12",
            "--lr-decay-style", "cosine", "--mock-data", "--vocab-size", "250",
            "--make-vocab-size-divisible-by", "8", "--device", "cpu", "--num-workers", "0",
            "--log-interval", "1", "--eval-iters", "0", *extra]


def run(cmd: list[str], np: int = 1, check: bool = True, env: dict | None = None, timeout: int = 300):
    full = (MPIRUN + ["-np", str(np)] if np > 1 else []) + cmd
    proc = subprocess.run(full, capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, **(env or {})})
    if check:
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc


def losses(metrics: Path) -> dict[int, float]:
    return {r["iteration"]: r["lm loss"] for r in map(json.loads, metrics.read_text().splitlines())
            if r["type"] == "train"}


def tracker(d: Path) -> str:
    return (d / "latest_checkpointed_iteration.txt").read_text().strip()


def test_torch_load_opens_every_file(tmp_path):
    """TP1 x DP2 with the distributed optimizer: model_optim_rng.pt and distrib_optim.pt."""
    run([PRETRAIN, *tiny(2, "--save", str(tmp_path / "ck"), "--use-distributed-optimizer",
                      "--hidden-dropout", "0.1")], np=2)
    rank_dir = tmp_path / "ck" / "iter_0000002" / "mp_rank_00"
    main = torch.load(rank_dir / "model_optim_rng.pt", weights_only=True)
    assert main["iteration"] == 2 and main["checkpoint_version"] == 3.0
    assert main["consumed_train_samples"] == 16 and main["consumed_valid_samples"] == 0
    assert main["args"].num_layers == 4 and main["args"].padded_vocab_size == 256
    assert main["model"]["embedding.word_embeddings.weight"].shape == (256, 32)
    assert main["opt_param_scheduler"]["num_steps"] == 16
    assert main["optimizer"]["distributed"] is True and "grad_scaler" not in main["optimizer"]  # fp16 only
    assert set(main["rng_state"][0]) >= {"torch_rng_state", "rng_tracker_states"}
    dist = torch.load(rank_dir / "distrib_optim.pt", weights_only=True)
    state = dist["param_state"]["decoder.layers.0.mlp.linear_fc1.weight"]
    assert state["exp_avg"].shape == (128, 32) and int(state["step"]) == 2
    # The fp32 main parameter equals the model's after the step.
    assert torch.equal(state["main_param"], main["model"]["decoder.layers.0.mlp.linear_fc1.weight"])
    sums = (rank_dir / "checksums.txt").read_text().split()
    assert sums[0] == "distrib_optim.pt" and int(sums[1]) == (rank_dir / "distrib_optim.pt").stat().st_size


POINTS = ["save:mid_file", "save:before_rank_rename", "save:before_publish", "save:before_tracker",
          "save:tracker_tmp"]


@pytest.mark.parametrize("np_,point", [(1, p) for p in POINTS] + [(2, "save:mid_file@1"),
                                                                   (2, "save:before_rank_rename@0")])
def test_kill_during_save_keeps_the_previous_checkpoint(tmp_path, np_, point):
    ck = tmp_path / "ck"
    layout = ["--pipeline-model-parallel-size", "2"] if np_ == 2 else []
    run([PRETRAIN, *tiny(2, "--save", str(ck), *layout)], np=np_)
    assert tracker(ck) == "2"
    # Resumes at 2, trains 3 and 4, and dies while saving 4.
    killed = run([PRETRAIN, *tiny(4, "--load", str(ck), "--save", str(ck), *layout,
                                  "--metrics-file", str(tmp_path / "killed.jsonl"))],
                 np=np_, check=False, env={"MEGATRON_FAULT_INJECTION": point})
    assert killed.returncode != 0
    assert "[fault injection]" in killed.stderr, killed.stderr[-2000:]
    assert tracker(ck) == "2"
    first = "mp_rank_00_000" if np_ == 2 else "mp_rank_00"
    torch.load(ck / "iter_0000002" / first / "model_optim_rng.pt", weights_only=True)
    resumed = run([PRETRAIN, *tiny(4, "--load", str(ck), "--save", str(ck), *layout,
                                   "--metrics-file", str(tmp_path / "resumed.jsonl"))], np=np_)
    assert "successfully loaded checkpoint from" in resumed.stdout and "at iteration 2" in resumed.stdout
    assert tracker(ck) == "4"
    assert losses(tmp_path / "resumed.jsonl") == losses(tmp_path / "killed.jsonl")
    assert not [p.name for p in ck.iterdir() if p.name.endswith((".tmp", ".deleting", ".old"))]


def test_sigterm_saves_and_exits(tmp_path):
    ck = tmp_path / "ck"
    proc = subprocess.Popen([PRETRAIN, *tiny(100000, "--save", str(ck), "--exit-signal-handler")],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    for line in proc.stdout:
        if "iteration        2/" in line:
            proc.send_signal(signal.SIGTERM)
            break
    out = proc.communicate(timeout=120)[0]
    assert proc.returncode == 0, out[-2000:]
    assert "exiting program after receiving SIGTERM." in out
    stopped_at = int(tracker(ck))
    assert stopped_at >= 2
    assert (ck / f"iter_{stopped_at:07d}" / "mp_rank_00" / "model_optim_rng.pt").is_file()


def test_resharded_resume_continues_the_losses(tmp_path):
    a, b, c = tmp_path / "tp2pp2", tmp_path / "tp1pp1", tmp_path / "back"
    # No dropout: RNG states belong to ranks and are not resharded.
    layout = ["--tensor-model-parallel-size", "2", "--pipeline-model-parallel-size", "2",
              "--hidden-dropout", "0", "--attention-dropout", "0"]
    run([PRETRAIN, *tiny(6, *layout, "--save", str(a), "--save-interval", "3",
                      "--metrics-file", str(tmp_path / "full.jsonl"))], np=4)
    full = losses(tmp_path / "full.jsonl")
    assert sorted(full) == [1, 2, 3, 4, 5, 6]

    out = run([CONVERT, "--load", str(a), "--ckpt-step", "3", "--save", str(b)]).stdout
    assert "TP 1, PP 1" in out and tracker(b) == "3"
    run([PRETRAIN, *tiny(6, "--load", str(b), "--hidden-dropout", "0", "--attention-dropout", "0",
                      "--metrics-file", str(tmp_path / "tp1.jsonl"))])
    run([CONVERT, "--load", str(b), "--save", str(c), "--target-tensor-parallel-size", "2",
         "--target-pipeline-model-parallel-size", "2"])
    run([PRETRAIN, *tiny(6, *layout, "--load", str(c), "--metrics-file", str(tmp_path / "back.jsonl"))], np=4)
    for name in ["tp1.jsonl", "back.jsonl"]:
        resumed = losses(tmp_path / name)
        assert sorted(resumed) == [4, 5, 6], name
        for it, loss in resumed.items():
            assert loss == pytest.approx(full[it], rel=1e-5), (name, it)


def our_logits(state: dict, tmp_path: Path, input_ids: torch.Tensor | None = None, **opts) -> dict:
    """gpt_parity_dump (TP1) with the checkpoint's weights: input ids (random, or these) and logits."""
    torch.save(state, tmp_path / "state.pt")
    args = [DUMP, "--out", str(tmp_path / "dump.pt"), "--load", str(tmp_path / "state.pt")]
    if input_ids is not None:
        torch.save({"input_ids": input_ids}, tmp_path / "inputs.pt")
        args += ["--inputs", str(tmp_path / "inputs.pt")]
    for k, v in opts.items():
        args += ["--" + k.replace("_", "-"), str(v)]
    run(args)
    return torch.load(tmp_path / "dump.pt")


HF_CASES = {
    "gpt2": dict(flags=[], arch="GPT2LMHeadModel",
                 dump=dict(norm="layernorm", mlp="gelu", bias=1, position="learned", tied=1)),
    "gpt2_untied_openai_gelu": dict(flags=["--untie-embeddings-and-output-weights", "--openai-gelu"],
                                    arch="GPT2LMHeadModel",
                                    dump=dict(norm="layernorm", mlp="gelu_tanh", bias=1, position="learned",
                                              tied=0)),
    "llama": dict(flags=["--position-embedding-type", "rope", "--normalization", "RMSNorm", "--swiglu",
                         "--disable-bias-linear", "--untie-embeddings-and-output-weights",
                         "--group-query-attention", "--num-query-groups", "2", "--ffn-hidden-size", "48",
                         "--rotary-base", "500"],
                  arch="LlamaForCausalLM",
                  dump=dict(norm="rmsnorm", mlp="swiglu", bias=0, position="rope", tied=0, groups=2, ffn=48,
                            rotary_base=500)),
    # Llama 3: rotary base 500000 and its frequency scaling (an original context of 8 tokens, so
    # that a 16-token sequence reaches every band).
    "llama3": dict(flags=["--position-embedding-type", "rope", "--normalization", "RMSNorm", "--swiglu",
                          "--disable-bias-linear", "--untie-embeddings-and-output-weights", "--group-query-attention",
                          "--num-query-groups", "2", "--ffn-hidden-size", "48", "--rotary-base", "500000",
                          "--use-rope-scaling", "--rope-scaling-factor", "8",
                          "--rope-scaling-original-max-position-embeddings", "8"],
                   arch="LlamaForCausalLM",
                   dump=dict(norm="rmsnorm", mlp="swiglu", bias=0, position="rope", tied=0, groups=2, ffn=48,
                             rotary_base=500000, rope_scaling_factor=8, rope_original=8)),
    "qwen2": dict(flags=["--position-embedding-type", "rope", "--normalization", "RMSNorm", "--swiglu",
                         "--disable-bias-linear", "--add-qkv-bias", "--group-query-attention", "--num-query-groups",
                         "2", "--ffn-hidden-size", "48", "--rotary-base", "1000000", "--norm-epsilon", "1e-6"],
                  arch="Qwen2ForCausalLM",
                  dump=dict(norm="rmsnorm", mlp="swiglu", bias=0, qkv_bias=1, position="rope", tied=1, groups=2,
                            ffn=48, rotary_base=1000000, eps=1e-6)),
    # A Llama without biases exports as Mistral when asked.
    "mistral": dict(flags=["--position-embedding-type", "rope", "--normalization", "RMSNorm", "--swiglu",
                           "--disable-bias-linear", "--untie-embeddings-and-output-weights", "--group-query-attention",
                           "--num-query-groups", "2", "--ffn-hidden-size", "48"],
                    arch="MistralForCausalLM", hf_model_type="mistral",
                    dump=dict(norm="rmsnorm", mlp="swiglu", bias=0, position="rope", tied=0, groups=2, ffn=48)),
    # BLOOM: ALiBi, the embeddings' LayerNorm, tanh GELU, an exactly padded vocabulary.
    "bloom": dict(flags=["--position-embedding-type", "alibi", "--embed-layernorm", "--openai-gelu",
                         "--pad-vocab-size-to", "260"],
                  arch="BloomForCausalLM",
                  layout=(["--tensor-model-parallel-size", "2", "--pipeline-model-parallel-size", "2"], 4),
                  dump=dict(norm="layernorm", mlp="gelu_tanh", bias=1, position="alibi", tied=1, embed_ln=1,
                            pad_vocab_to=260)),
}


@pytest.mark.parametrize("case", sorted(HF_CASES))
def test_hugging_face_export_gives_our_logits(tmp_path, case):
    import transformers
    from safetensors import safe_open

    spec = HF_CASES[case]
    ck, hf, back = tmp_path / "ck", tmp_path / "hf", tmp_path / "back"
    # Trained at TP 2 (BLOOM's also at PP 2) so that the export merges shards.
    layout, ranks = spec.get("layout", (["--tensor-model-parallel-size", "2"], 2))
    run([PRETRAIN, *tiny(2, *layout, "--save", str(ck), *spec["flags"])], np=ranks)
    run([CONVERT, "--load", str(ck), "--export-hf", str(hf),
         *(["--hf-model-type", spec["hf_model_type"]] if "hf_model_type" in spec else [])])
    config = json.loads((hf / "config.json").read_text())
    assert config["architectures"] == [spec["arch"]] and config["vocab_size"] == 250
    with safe_open(str(hf / "model.safetensors"), framework="pt") as f:
        assert f.metadata() == {"format": "pt"}
        assert all(f.get_tensor(k).dtype == torch.float32 for k in f.keys())

    model = transformers.AutoModelForCausalLM.from_pretrained(str(hf), torch_dtype=torch.float32).eval()
    # Our model at TP 1 from the same weights (the checkpoint resharded to TP 1).
    run([CONVERT, "--load", str(ck), "--save", str(tmp_path / "tp1")])
    state = torch.load(tmp_path / "tp1" / "iter_0000002" / "mp_rank_00" / "model_optim_rng.pt")["model"]
    shape = dict(layers=4, hidden=32, heads=4, vocab=250, divisible_by=8, max_seq=16, seq=16, batch=2)
    dump = our_logits(state, tmp_path, **shape, **spec["dump"])
    with torch.no_grad():
        theirs = model(dump["input_ids"]).logits
    ours = dump["logits"][..., :250]
    assert theirs.shape == ours.shape
    assert (theirs - ours).abs().max().item() <= 1e-4

    # Greedy generation: each token transformers picks is the argmax of our logits there (all 8,
    # not stopping at the end-of-document id).
    prompt = dump["input_ids"][:, :6]
    model.generation_config.eos_token_id = None
    with torch.no_grad():
        generated = model.generate(prompt, max_new_tokens=8, do_sample=False, pad_token_id=0,
                                   attention_mask=torch.ones_like(prompt))
    assert generated.shape == (2, 14)
    again = our_logits(state, tmp_path, input_ids=generated, **shape, **spec["dump"])
    assert torch.equal(again["logits"][:, 5:13, :250].argmax(-1), generated[:, 6:14])

    # Import back: the same weights as a release checkpoint (padded rows are zero).
    run([CONVERT, "--import-hf", str(hf), "--save", str(back), "--make-vocab-size-divisible-by", "8"])
    assert tracker(back) == "release"
    imported = torch.load(back / "release" / "mp_rank_00" / "model_optim_rng.pt", weights_only=True)
    assert set(imported["model"]) == set(state)
    for name, tensor in state.items():
        got = imported["model"][name]
        if name in ("embedding.word_embeddings.weight", "output_layer.weight"):
            assert torch.equal(got[:250], tensor[:250]) and not got[250:].any(), name
        else:
            assert torch.equal(got, tensor), name


# transformers' own classes at tiny random configs: (config class, model class, config kwargs, dump options).
HF_IMPORTS = {
    "bloom": ("BloomConfig", "BloomForCausalLM",
              dict(n_embed=32, n_layer=2, n_head=4, vocab_size=250, layer_norm_epsilon=1e-5),
              dict(norm="layernorm", mlp="gelu_tanh", bias=1, position="alibi", tied=1, embed_ln=1)),
    "llama3": ("LlamaConfig", "LlamaForCausalLM",
               dict(hidden_size=32, intermediate_size=48, num_hidden_layers=2, num_attention_heads=4,
                    num_key_value_heads=2, max_position_embeddings=16, vocab_size=250, tie_word_embeddings=False,
                    rope_scaling=dict(rope_type="llama3", rope_theta=500000.0, factor=8.0, low_freq_factor=1.0,
                                      high_freq_factor=4.0, original_max_position_embeddings=8)),
               dict(norm="rmsnorm", eps=1e-6, mlp="swiglu", bias=0, position="rope", tied=0, groups=2, ffn=48,
                    rotary_base=500000, rope_scaling_factor=8, rope_original=8)),
    "qwen2": ("Qwen2Config", "Qwen2ForCausalLM",
              dict(hidden_size=32, intermediate_size=48, num_hidden_layers=2, num_attention_heads=4,
                   num_key_value_heads=2, max_position_embeddings=16, vocab_size=250, tie_word_embeddings=True,
                   rope_theta=1000000.0),
              dict(norm="rmsnorm", eps=1e-6, mlp="swiglu", bias=0, qkv_bias=1, position="rope", tied=1, groups=2,
                   ffn=48, rotary_base=1000000)),
    "mistral": ("MistralConfig", "MistralForCausalLM",
                dict(hidden_size=32, intermediate_size=48, num_hidden_layers=2, num_attention_heads=4,
                     num_key_value_heads=2, max_position_embeddings=16, vocab_size=250, sliding_window=None),
                dict(norm="rmsnorm", eps=1e-6, mlp="swiglu", bias=0, position="rope", tied=0, groups=2, ffn=48)),
    # Qwen 3: an RMSNorm on each head's query and key, heads of 16 in a hidden of 32 (head_dim).
    "qwen3": ("Qwen3Config", "Qwen3ForCausalLM",
              dict(hidden_size=32, intermediate_size=48, num_hidden_layers=2, num_attention_heads=4,
                   num_key_value_heads=2, head_dim=16, max_position_embeddings=16, vocab_size=250,
                   tie_word_embeddings=True, rope_theta=1000000.0),
              dict(norm="rmsnorm", eps=1e-6, mlp="swiglu", bias=0, position="rope", tied=1, groups=2, ffn=48,
                   rotary_base=1000000, qk_layernorm=1, kv_channels=16)),
}


def saved_hf_model(tmp_path: Path, config_class: str, model_class: str, kwargs: dict):
    """transformers' own model of that class, seeded, saved to tmp_path/hf."""
    import transformers
    torch.manual_seed(0)
    theirs = getattr(transformers, model_class)(getattr(transformers, config_class)(**kwargs)).eval()
    with torch.no_grad():  # norms and biases away from their initial 1 and 0, so that a dropped one shows
        for name, p in theirs.named_parameters():
            if "norm" in name or name.endswith("bias"):
                p.add_(0.1 * torch.randn_like(p))
    theirs.save_pretrained(tmp_path / "hf")
    return theirs


def assert_exported_back(tmp_path: Path, theirs, flags=()):
    """The export of tmp_path/ck holds the very tensors transformers saved in tmp_path/hf."""
    from safetensors.torch import load_file
    run([CONVERT, "--load", str(tmp_path / "ck"), "--export-hf", str(tmp_path / "back"), *flags])
    saved, back = load_file(str(tmp_path / "hf" / "model.safetensors")), load_file(str(tmp_path / "back" / "model.safetensors"))
    tied_copy = {"lm_head.weight"} if theirs.config.tie_word_embeddings else set()
    assert set(back) == set(saved) - tied_copy
    for name, tensor in back.items():
        assert torch.equal(tensor, saved[name]), name


@pytest.mark.parametrize("family", sorted(HF_IMPORTS))
def test_hugging_face_import_gives_their_logits_and_exports_back_bit_identical(tmp_path, family):
    config_class, model_class, kwargs, dump_opts = HF_IMPORTS[family]
    theirs = saved_hf_model(tmp_path, config_class, model_class, kwargs)
    run([CONVERT, "--import-hf", str(tmp_path / "hf"), "--save", str(tmp_path / "ck"),
         "--target-tensor-parallel-size", "2", "--make-vocab-size-divisible-by", "8"])
    run([CONVERT, "--load", str(tmp_path / "ck"), "--save", str(tmp_path / "tp1")])
    state = torch.load(tmp_path / "tp1" / "release" / "mp_rank_00" / "model_optim_rng.pt", weights_only=True)["model"]
    dump = our_logits(state, tmp_path, layers=2, hidden=32, heads=4, vocab=250, divisible_by=8, max_seq=16, seq=16,
                      batch=2, **dump_opts)
    with torch.no_grad():
        expected = theirs(dump["input_ids"]).logits
    assert (dump["logits"][..., :250] - expected).abs().max().item() <= 1e-4

    # Export of the imported checkpoint (at TP 2): the very tensors transformers saved.
    assert_exported_back(tmp_path, theirs, ["--hf-model-type", theirs.config.model_type])


def test_hugging_face_gpt2_loads_in_pretrain(tmp_path):
    """An imported release checkpoint starts a fine-tuning run (iteration 0, weights loaded)."""
    import transformers
    config = transformers.GPT2Config(n_layer=4, n_embd=32, n_head=4, n_positions=16, vocab_size=250,
                                     activation_function="gelu_new")
    transformers.GPT2LMHeadModel(config).save_pretrained(tmp_path / "hf")
    run([CONVERT, "--import-hf", str(tmp_path / "hf"), "--save", str(tmp_path / "ck"),
         "--target-tensor-parallel-size", "2", "--make-vocab-size-divisible-by", "8"])
    out = run([PRETRAIN, *tiny(1, "--tensor-model-parallel-size", "2", "--openai-gelu", "--load",
                                str(tmp_path / "ck"))], np=2).stdout
    assert "[ release ] at iteration 0" in out


def test_corrupt_checkpoint_is_one_line_naming_the_file(tmp_path):
    ck = tmp_path / "ck"
    run([PRETRAIN, *tiny(1, "--save", str(ck))])
    f = ck / "iter_0000001" / "mp_rank_00" / "model_optim_rng.pt"
    os.truncate(f, f.stat().st_size // 3)
    proc = run([PRETRAIN, *tiny(2, "--load", str(ck))], check=False)
    assert proc.returncode != 0
    lines = [l for l in proc.stderr.splitlines() if l.startswith("pretrain_gpt:")]
    assert len(lines) == 1 and str(f) in lines[0] and "truncated" in lines[0], proc.stderr[-2000:]


def test_apply_layernorm_1p_trains_the_same_model_and_exports_gamma(tmp_path):
    """--apply-layernorm-1p stores each norm weight as gamma - 1 (initialised to 0, applied as
    1 + weight). From one seed it trains what a run without it trains, with every norm weight
    1 lower; the Hugging Face export writes gamma, so both exports give the same logits."""
    import transformers
    runs = {}
    for name, flags in (("plain", []), ("1p", ["--apply-layernorm-1p"])):
        ck, metrics = tmp_path / name, tmp_path / f"{name}.jsonl"
        run([PRETRAIN, *tiny(4, "--save", str(ck), "--metrics-file", str(metrics), *flags)])
        state = torch.load(ck / "iter_0000004" / "mp_rank_00" / "model_optim_rng.pt")["model"]
        run([CONVERT, "--load", str(ck), "--export-hf", str(tmp_path / f"{name}_hf")])
        runs[name] = (losses(metrics), state)
    (plain_losses, plain), (losses_1p, state_1p) = runs["plain"], runs["1p"]
    assert list(losses_1p.values()) == pytest.approx(list(plain_losses.values()), rel=1e-5)
    norms = [k for k in plain if k.endswith("layernorm.weight")]
    assert len(norms) == 9  # two per layer and the final one
    for k in norms:
        assert torch.allclose(state_1p[k] + 1, plain[k], atol=1e-5), k
        assert state_1p[k].abs().max() < 0.1, k  # gamma - 1, where the plain run holds gamma near 1
    hf = {name: transformers.AutoModelForCausalLM.from_pretrained(str(tmp_path / f"{name}_hf")).eval()
          for name in runs}
    assert torch.equal(hf["1p"].state_dict()["transformer.ln_f.weight"], state_1p["decoder.final_layernorm.weight"] + 1)
    ids = torch.randint(0, 250, (2, 16), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        assert (hf["1p"](ids).logits - hf["plain"](ids).logits).abs().max().item() <= 1e-4
    # Resuming with the other setting would read gamma - 1 as gamma: refused, naming the flag.
    proc = run([PRETRAIN, *tiny(6, "--load", str(tmp_path / "1p"))], check=False)
    assert proc.returncode != 0 and "--apply-layernorm-1p" in proc.stderr, proc.stderr[-2000:]


def test_use_checkpoint_args_takes_the_shape_and_layout_from_the_checkpoint(tmp_path):
    """--use-checkpoint-args: a resume that names no model shape and no parallel sizes builds the
    checkpoint's model (3 layers, hidden 48, RMSNorm + SwiGLU, vocabulary 250, TP 2) and continues
    the uninterrupted run's losses exactly."""
    shape = ["--num-layers", "3", "--hidden-size", "48", "--num-attention-heads", "4", "--seq-length", "16",
             "--normalization", "RMSNorm", "--swiglu", "--ffn-hidden-size", "64", "--vocab-size", "250",
             "--make-vocab-size-divisible-by", "8", "--tensor-model-parallel-size", "2"]

    def train(iters):
        return ["--micro-batch-size", "2", "--global-batch-size", "8", "--train-iters", str(iters), "--lr", "2e-3",
                "--min-lr", "2e-4", "--lr-warmup-iters", "1", "--lr-decay-iters", "12", "--lr-decay-style", "cosine",
                "--mock-data", "--device", "cpu", "--num-workers", "0", "--log-interval", "1", "--eval-iters", "0"]

    ck = tmp_path / "ck"
    run([PRETRAIN, *shape, *train(6), "--metrics-file", str(tmp_path / "whole.jsonl")], np=2)
    run([PRETRAIN, *shape, *train(3), "--save", str(ck)], np=2)
    run([PRETRAIN, *train(6), "--load", str(ck), "--use-checkpoint-args", "--metrics-file",
         str(tmp_path / "resumed.jsonl")], np=2)
    whole, resumed = losses(tmp_path / "whole.jsonl"), losses(tmp_path / "resumed.jsonl")
    assert list(resumed) == [4, 5, 6] and all(resumed[i] == whole[i] for i in resumed), (resumed, whole)
    # Without it the same command builds the default model, which the checkpoint does not fit.
    proc = run([PRETRAIN, *train(6), "--load", str(ck)], np=2, check=False)
    assert proc.returncode != 0
    # No checkpoint yet (a first start): the given arguments stand, as in Megatron-LM.
    proc = run([PRETRAIN, *shape, *train(1), "--load", str(tmp_path / "empty"), "--use-checkpoint-args"], np=2)
    assert "--use-checkpoint-args: no checkpoint in --load" in proc.stdout + proc.stderr


def test_hugging_face_export_opens_from_its_folder_alone(tmp_path):
    """A GPT2BPETokenizer run: the export holds the tokenizer too, so AutoTokenizer, the model and
    pipeline("text-generation") open the folder with nothing else."""
    import transformers
    texts = ["the cat sat on the mat", "the theme of these theses", "naïve café 日本語", "don't stop 123"] * 20
    corpus = tmp_path / "c.jsonl"
    corpus.write_text("\n".join(json.dumps({"text": t}) for t in texts) + "\n")
    tok_dir = tmp_path / "tok"
    helper_run("train_tokenizer", "--input", corpus, "--output-dir", tok_dir, "--vocab-size", 300)
    ck, hf = tmp_path / "ck", tmp_path / "hf"
    run([PRETRAIN, "--num-layers", "2", "--hidden-size", "32", "--num-attention-heads", "4", "--seq-length", "16",
         "--micro-batch-size", "2", "--global-batch-size", "4", "--train-iters", "2", "--lr", "1e-3", "--mock-data",
         "--tokenizer-type", "GPT2BPETokenizer", "--vocab-file", str(tok_dir / "vocab.json"), "--merge-file",
         str(tok_dir / "merges.txt"), "--eval-iters", "0", "--save", str(ck)])
    # The files moved since training: the export names the flag that finds them.
    tok_dir.rename(tmp_path / "moved")
    proc = run([CONVERT, "--load", str(ck), "--export-hf", str(hf)], check=False)
    assert proc.returncode == 1 and "pass --vocab-file to export its tokenizer" in proc.stderr, proc.stderr
    run([CONVERT, "--load", str(ck), "--export-hf", str(hf), "--vocab-file", str(tmp_path / "moved" / "vocab.json"),
         "--merge-file", str(tmp_path / "moved" / "merges.txt")])

    end = json.loads((hf / "vocab.json").read_text(encoding="utf-8"))["<|endoftext|>"]
    config = json.loads((hf / "config.json").read_text())
    assert config["bos_token_id"] == config["eos_token_id"] == end
    tokenizer = transformers.AutoTokenizer.from_pretrained(str(hf))
    probe = tmp_path / "p.jsonl"
    probe.write_text("\n".join(json.dumps(t) for t in texts[:4]) + "\n")
    ours = helper_run("dataset_tool", "tokenize", "--vocab-file", hf / "vocab.json", "--merge-file",
                      hf / "merges.txt", "--input", probe).stdout.split("\n")[:-1]
    for text, line in zip(texts, ours):
        assert tokenizer(text)["input_ids"] == [int(x) for x in line.split()]
    assert tokenizer.eos_token_id == end

    model = transformers.AutoModelForCausalLM.from_pretrained(str(hf)).eval()
    prompt = tokenizer("the cat", return_tensors="pt")
    greedy = model.generate(**prompt, max_new_tokens=4, do_sample=False, pad_token_id=end)
    generated = transformers.pipeline("text-generation", model=str(hf))("the cat", max_new_tokens=4, do_sample=False,
                                                                        pad_token_id=end)[0]["generated_text"]
    assert generated == tokenizer.decode(greedy[0])


def test_async_save_writes_the_files_a_plain_save_writes(tmp_path):
    """--async-save at TP 2 x DP 2 with the distributed optimizer and ZeRO-3-free layouts: every
    checkpoint file byte-identical to the plain save's, each published (tracker, log line) while
    training went on, and the run's losses unchanged; a resume from its checkpoint repeats them."""
    layout = ["--tensor-model-parallel-size", "2", "--use-distributed-optimizer", "--save-interval", "2"]
    # One --save path for both (the files record it), the plain save's moved aside.
    plain, background = tmp_path / "plain", tmp_path / "ck"
    run([PRETRAIN, *tiny(6, *layout, "--save", str(background), "--metrics-file", str(tmp_path / "plain.jsonl"))],
        np=4)
    background.rename(plain)
    proc = run([PRETRAIN, *tiny(6, *layout, "--save", str(background), "--async-save", "--use-persistent-ckpt-worker",
                                "--metrics-file", str(tmp_path / "async.jsonl"))], np=4)
    assert losses(tmp_path / "async.jsonl") == losses(tmp_path / "plain.jsonl")
    assert tracker(background) == "6"
    files = sorted(p.relative_to(plain) for p in plain.rglob("*") if p.is_file() and p.name != "save.lock")
    assert len([f for f in files if f.name == "distrib_optim.pt"]) == 3 * 2  # 3 saves x 2 TP ranks
    for f in files:
        assert (background / f).read_bytes() == (plain / f).read_bytes(), f
    # Each save published once, in order, after its iteration's line (whether before or after the
    # next iteration's line depends on how fast the writer was: the tests run side by side), the
    # last before exit.
    log = proc.stdout
    published = [log.index(f"successfully saved checkpoint from iteration {it:7d}") for it in (2, 4, 6)]
    assert published == sorted(published), log[-3000:]
    for it, at in zip((2, 4, 6), published):
        assert at > log.index(f" iteration {it:8d}/"), log[-3000:]
    (background / "latest_checkpointed_iteration.txt").write_text("4")
    run([PRETRAIN, *tiny(6, *layout, "--load", str(background), "--metrics-file", str(tmp_path / "rest.jsonl"))], np=4)
    assert losses(tmp_path / "rest.jsonl") == {k: v for k, v in losses(tmp_path / "plain.jsonl").items() if k > 4}
