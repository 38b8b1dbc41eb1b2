"""The model options of BLOOM, Llama 3 and Qwen 2 (and interleaved rotary pairs) in pretrain_gpt:
each family's losses at TP 2 and PP 2 (and TP 4 for Llama 3's query groups) equal its TP 1 run
(fp32), its TP 2 run resumes bit for bit, and an option that was ignored would fail. Parity of the model itself with an independent
reference is test_gpt_parity.py's; with transformers, test_checkpoint.py's."""
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from data_helpers import MPIRUN, program, TINY

ROOT = Path(__file__).resolve().parents[2]
FAMILIES = {
    "bloom": ["--position-embedding-type", "alibi", "--embed-layernorm", "--openai-gelu",
              "--pad-vocab-size-to", "264"],
    "llama3": ["--hidden-size", "64", "--num-attention-heads", "8", "--group-query-attention",
               "--num-query-groups", "4", "--position-embedding-type", "rope", "--normalization", "RMSNorm",
               "--swiglu", "--disable-bias-linear", "--untie-embeddings-and-output-weights", "--rotary-base", "500000",
               "--use-rope-scaling", "--rope-scaling-factor", "8", "--rope-scaling-original-max-position-embeddings",
               "64"],
    "qwen2": ["--position-embedding-type", "rope", "--normalization", "RMSNorm", "--swiglu", "--disable-bias-linear",
              "--add-qkv-bias", "--rotary-base", "1000000", "--norm-epsilon", "1e-6"],
    "rotary_interleaved": ["--position-embedding-type", "rope", "--rotary-interleaved", "--rotary-percent", "0.5"],
}
# Per family, the options whose removal must change the losses (each with its value count).
ABLATIONS = {"bloom": [("--embed-layernorm", 0), ("--position-embedding-type", 1)],
             "llama3": [("--use-rope-scaling", 0)], "qwen2": [("--add-qkv-bias", 0)],
             "rotary_interleaved": [("--rotary-interleaved", 0)]}
LAYOUTS = {"tp2": (2, ["--tensor-model-parallel-size", "2"]), "pp2": (2, ["--pipeline-model-parallel-size", "2"])}
# TP 4 where it splits what TP 2 does not: Llama 3's four query groups, one per rank.
TP4 = {"llama3": {"tp4": (4, ["--tensor-model-parallel-size", "4"])}}


def train(tmp_path, name, *flags, ranks=1):
    metrics = tmp_path / f"{name}.jsonl"
    # The vocabulary padded alike at TP 1-4 (padding rows take part in the softmax).
    cmd = [program("pretrain_gpt"), *TINY, "--mock-data", "--vocab-size", "256", "--make-vocab-size-divisible-by", "64",
           "--train-iters", "5", "--global-batch-size", "8", "--lr-warmup-iters", "1", "--lr-decay-style", "cosine", "--min-lr", "1e-4",
           "--seed", "7", "--init-method-std", "0.2", "--metrics-file", str(metrics), *flags]
    proc = subprocess.run((MPIRUN + ["-np", str(ranks)] if ranks > 1 else []) + cmd, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return [r["lm loss"] for r in map(json.loads, metrics.read_text().splitlines()) if r["type"] == "train"]


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_family_gives_its_tp1_losses_at_every_layout_and_resumes(tmp_path, family):
    flags = FAMILIES[family]
    single = train(tmp_path, "tp1", *flags)
    assert len(single) == 5
    for option, values in ABLATIONS[family]:
        at = flags.index(option)
        without = train(tmp_path, "without" + option, *flags[:at], *flags[at + 1 + values:])
        # (Zero-initialised biases change the losses from the third iteration on.)
        assert all(abs(a - b) > 1e-5 * abs(b) for a, b in zip(single[2:], without[2:])), (option, single, without)
    runs = {}
    for name, (ranks, layout) in {**LAYOUTS, **TP4.get(family, {})}.items():
        runs[name] = got = train(tmp_path, name, *flags, *layout, ranks=ranks)
        assert all(abs(a - b) <= 1e-5 * abs(b) for a, b in zip(got, single)) and len(got) == 5, (name, got, single)
    # The TP 2 run saved at iteration 3 and resumed to 5 gives its uninterrupted losses exactly.
    tp2, ck = [*flags, *LAYOUTS["tp2"][1]], tmp_path / "ck"
    first = train(tmp_path, "first", *tp2, "--save", str(ck), "--save-interval", "3", "--exit-interval", "3", ranks=2)
    resumed = train(tmp_path, "resumed", *tp2, "--load", str(ck), ranks=2)
    assert first == runs["tp2"][:3] and resumed == runs["tp2"][3:], (first, resumed, runs["tp2"])


@pytest.mark.parametrize("flags, message", [
    (["--use-rope-scaling"], "--use-rope-scaling and --rotary-interleaved need --position-embedding-type rope"),
    (["--position-embedding-type", "alibi", "--rotary-interleaved"], "need --position-embedding-type rope"),
    (["--pad-vocab-size-to", "100"], "--pad-vocab-size-to 100 must be at least the vocabulary (256)"),
    (["--pad-vocab-size-to", "258", "--tensor-model-parallel-size", "4"],
     "--pad-vocab-size-to (258) is not divisible by --tensor-model-parallel-size (4)"),
    (["--position-embedding-type", "sinusoidal"], "--position-embedding-type"),
])
def test_bad_family_options_are_one_clear_line(tmp_path, flags, message):
    ranks = 4 if "--tensor-model-parallel-size" in flags else 1
    cmd = [program("pretrain_gpt"), *TINY, "--mock-data", "--vocab-size", "256", "--train-iters", "1",
           "--global-batch-size", "8", *flags]
    proc = subprocess.run((MPIRUN + ["-np", str(ranks)] if ranks > 1 else []) + cmd, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode != 0 and message in proc.stdout + proc.stderr, proc.stdout[-2000:] + proc.stderr[-2000:]


# Published parameter counts (Hugging Face model cards / safetensors totals) of each full-size preset.
PUBLISHED = {"bloom-560m": 559_214_592, "llama3-8b": 8_030_261_248, "llama3.1-8b": 8_030_261_248,
             "qwen2-0.5b": 494_032_768, "mistral-7b": 7_248_023_552, "mixtral-8x7b": 46_702_792_704,
             "qwen3-30b-a3b": 30_532_122_624, "olmoe-1b-7b": 6_919_161_856}
# The true vocabulary each was published with (the presets pad it as Megatron-LM does).
VOCAB = {"bloom-560m": 250_880, "llama3-8b": 128_256, "llama3.1-8b": 128_256, "qwen2-0.5b": 151_936,
         "mistral-7b": 32_768, "mixtral-8x7b": 32_000, "qwen3-30b-a3b": 151_936, "olmoe-1b-7b": 50_304}


def parameter_count(c: dict, vocab: int) -> int:
    """Parameters of a decoder from its published definition: embeddings (+ LayerNorm), per layer
    two norms, q/k/v (and the query and key norms, per head or across them), output projection and MLP (with biases
    where the family has them) or, in every layer with --num-experts, a router and that many
    expert MLPs, final norm, and an untied output layer."""
    h, layers, heads = c["hidden-size"], c["num-layers"], c["num-attention-heads"]
    groups = c.get("num-query-groups", heads) if c.get("group-query-attention") else heads
    d = c.get("kv-channels", h // heads)
    ffn = c.get("ffn-hidden-size", 4 * h)
    norm = 2 * h if c.get("normalization", "LayerNorm") == "LayerNorm" else h
    bias = not c.get("disable-bias-linear", False)
    qkv = h * (heads + 2 * groups) * d + ((heads + 2 * groups) * d if bias or c.get("add-qkv-bias") else 0)
    qk_norms = 2 * d if c.get("qk-layernorm") else 0
    if c.get("qk-layernorm-across-heads"):  # OLMoE's: over all the queries and all the keys
        qk_norms = (heads + groups) * d
    proj = heads * d * h + (h if bias else 0)

    def mlp_of(width):
        return h * width * (3 if c.get("swiglu") else 2) + ((2 * width if c.get("swiglu") else width) + h if bias else 0)

    experts = c.get("num-experts")
    mlp = experts * (h + mlp_of(c.get("moe-ffn-hidden-size", ffn))) if experts else mlp_of(ffn)
    total = (vocab * h + (2 * h if c.get("embed-layernorm") else 0)
             + layers * (2 * norm + qkv + qk_norms + proj + mlp) + norm)
    return total + (vocab * h if c.get("untie-embeddings-and-output-weights") else 0)


@pytest.mark.parametrize("preset", sorted(PUBLISHED))
def test_published_presets_have_the_published_parameter_counts(preset):
    import tomllib
    config = tomllib.loads((ROOT / "configs" / f"{preset}.toml").read_text())
    assert parameter_count(config, VOCAB[preset]) == PUBLISHED[preset]


TINY_PRESETS = {"bloom-tiny": ("BloomForCausalLM", []), "llama3-tiny": ("LlamaForCausalLM", []),
                "qwen2-tiny": ("Qwen2ForCausalLM", []),
                "mistral-tiny": ("MistralForCausalLM", ["--hf-model-type", "mistral"]),
                "mixtral-tiny": ("MixtralForCausalLM", []), "qwen3-moe-tiny": ("Qwen3MoeForCausalLM", []),
                "olmoe-tiny": ("OlmoeForCausalLM", [])}


@pytest.mark.parametrize("preset", sorted(TINY_PRESETS))
def test_tiny_presets_train_and_export_as_their_family(tmp_path, preset):
    import transformers
    arch, export_flags = TINY_PRESETS[preset]
    metrics, ck, hf = tmp_path / "m.jsonl", tmp_path / "ck", tmp_path / "hf"
    cmd = [program("pretrain_gpt"), "--config", str(ROOT / "configs" / f"{preset}.toml"), "--mock-data",
           "--vocab-size", "256", "--train-iters", "6", "--lr-warmup-iters", "1", "--eval-iters", "0", "--log-interval", "1",
           "--save", str(ck), "--metrics-file", str(metrics)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    losses = [r["lm loss"] for r in map(json.loads, metrics.read_text().splitlines()) if r["type"] == "train"]
    assert len(losses) == 6 and losses[-1] < losses[0], losses
    proc = subprocess.run([program("convert_checkpoint"), "--load", str(ck), "--export-hf", str(hf), *export_flags],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert json.loads((hf / "config.json").read_text())["architectures"] == [arch]
    model, info = transformers.AutoModelForCausalLM.from_pretrained(str(hf), output_loading_info=True)
    assert type(model).__name__ == arch and not info["missing_keys"] and not info["unexpected_keys"], info


@pytest.fixture(scope="module")
def default_data():
    build = Path(program("pretrain_gpt")).parent.parent
    subprocess.run(["bash", str(ROOT / "tools" / "prepare_default_data.sh"), str(build)], check=True,
                   capture_output=True)
    return build


# The example's family-specific steps (import, export) are test_checkpoint.py's for every family;
# here it runs end to end for two unlike ones.
@pytest.mark.parametrize("family", ["bloom", "llama3"])
def test_hf_continue_pretraining_example_runs(tmp_path, default_data, family):
    """examples/hf_continue_pretraining.py: import, train on the default corpus, export, generate."""
    proc = subprocess.run([sys.executable, str(ROOT / "examples" / "hf_continue_pretraining.py"), "--family", family,
                           "--work", str(tmp_path / "work"), "--train-iters", "10", "--build", str(default_data)],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    first, last = map(float, re.search(r"lm loss ([0-9.]+) -> ([0-9.]+)", proc.stdout).groups())
    assert last < first, proc.stdout
    assert re.search(r"\[5/5\] generating with transformers\n      'def ", proc.stdout), proc.stdout
