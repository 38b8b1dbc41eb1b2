"""Continue pretraining a Hugging Face model with megatron-cpp and hand it back to transformers:

  1. import the Hugging Face folder (config.json, model.safetensors, tokenizer.json) as a release
     checkpoint at TP 2 (convert_checkpoint --import-hf);
  2. tokenize the default corpus with the model's own tokenizer (preprocess_data);
  3. train on it for a few iterations, the model's shape taken from the checkpoint
     (pretrain_gpt --use-checkpoint-args, 2 ranks under mpirun);
  4. export the result (convert_checkpoint --export-hf, its tokenizer beside it);
  5. generate text with transformers from the export.

  python examples/hf_continue_pretraining.py --hf-dir PATH/TO/Qwen2-0.5B --work /tmp/cont
  python examples/hf_continue_pretraining.py --family qwen2 --work /tmp/cont   # no download

Without --hf-dir it makes a tiny model of --family (llama3, qwen2, mistral, bloom) with
transformers, with the default data's tokenizer, as a stand-in for a downloaded one. Run
tools/prepare_default_data.sh first (the README's main job does).
"""
from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

TINY = {  # transformers config class, model class, config kwargs (vocabulary added below)
    "llama3": ("LlamaConfig", "LlamaForCausalLM",
               dict(hidden_size=64, intermediate_size=160, num_hidden_layers=2, num_attention_heads=4,
                    num_key_value_heads=2, max_position_embeddings=64, tie_word_embeddings=False,
                    rope_scaling=dict(rope_type="llama3", rope_theta=500000.0, factor=8.0, low_freq_factor=1.0,
                                      high_freq_factor=4.0, original_max_position_embeddings=32))),
    "qwen2": ("Qwen2Config", "Qwen2ForCausalLM",
              dict(hidden_size=64, intermediate_size=160, num_hidden_layers=2, num_attention_heads=4,
                   num_key_value_heads=2, max_position_embeddings=64, tie_word_embeddings=True)),
    "mistral": ("MistralConfig", "MistralForCausalLM",
                dict(hidden_size=64, intermediate_size=160, num_hidden_layers=2, num_attention_heads=4,
                     num_key_value_heads=2, max_position_embeddings=64, sliding_window=None)),
    "bloom": ("BloomConfig", "BloomForCausalLM", dict(hidden_size=64, n_layer=2, n_head=4)),
}


def run(*cmd, ranks: int = 1) -> str:
    mpirun = ["mpirun", "--allow-run-as-root", "--oversubscribe", "-np", str(ranks)] if ranks > 1 else []
    proc = subprocess.run(mpirun + [str(c) for c in cmd], capture_output=True, text=True)
    if proc.returncode != 0:
        sys.exit(f"{Path(str(cmd[0])).name} failed:\n{proc.stdout[-2000:]}{proc.stderr[-2000:]}")
    return proc.stdout


def make_tiny_model(family: str, out: Path) -> None:
    """A randomly initialised model of `family` with the default data's byte-level BPE tokenizer."""
    import torch
    import transformers

    tokenizer = transformers.GPT2TokenizerFast.from_pretrained(ROOT / "data" / "tokenizer")  # vocab.json, merges.txt
    config_class, model_class, kwargs = TINY[family]
    end = tokenizer.convert_tokens_to_ids("<|endoftext|>")
    config = getattr(transformers, config_class)(vocab_size=len(tokenizer), bos_token_id=end, eos_token_id=end,
                                                 **kwargs)
    torch.manual_seed(0)
    getattr(transformers, model_class)(config).save_pretrained(out)
    tokenizer.save_pretrained(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--hf-dir", type=Path, help="a Hugging Face model folder (default: make a tiny one)")
    parser.add_argument("--family", choices=sorted(TINY), default="llama3", help="the tiny model's family")
    parser.add_argument("--work", type=Path, required=True, help="folder for the data, checkpoints and export")
    parser.add_argument("--build", type=Path, default=Path(os.environ.get("MEGATRON_BUILD_DIR", ROOT / "build")))
    parser.add_argument("--train-iters", type=int, default=20)
    parser.add_argument("--seq-length", type=int, default=64)
    args = parser.parse_args()
    bin_dir = args.build / "bin"
    work = args.work
    if work.exists():
        shutil.rmtree(work)
    work.mkdir(parents=True)

    hf = args.hf_dir
    if hf is None:
        hf = work / "hf"
        make_tiny_model(args.family, hf)
    config = json.loads((hf / "config.json").read_text())
    print(f"[1/5] importing {hf} ({config['architectures'][0]})")
    run(bin_dir / "convert_checkpoint", "--import-hf", hf, "--save", work / "imported",
        "--target-tensor-parallel-size", "2")

    print("[2/5] tokenizing the default corpus with the model's tokenizer")
    run(bin_dir / "preprocess_data", "--input", ROOT / "data" / "corpus" / "python_docs.jsonl",
        "--output-prefix", work / "corpus", "--tokenizer-type", "HuggingFaceTokenizer", "--tokenizer-model", hf,
        "--append-eod", "--workers", "2")

    print(f"[3/5] training {args.train_iters} iterations on 2 ranks (TP 2)")
    log = run(bin_dir / "pretrain_gpt", "--use-checkpoint-args", "--load", work / "imported",
              "--save", work / "continued", "--data-path", work / "corpus_text_document",
              "--tokenizer-type", "HuggingFaceTokenizer", "--tokenizer-model", hf,
              "--seq-length", args.seq_length, "--micro-batch-size", "4", "--global-batch-size", "8",
              "--train-iters", args.train_iters, "--lr", "1e-3", "--min-lr", "1e-4", "--lr-warmup-iters", "2",
              "--lr-decay-style", "cosine", "--attention-dropout", "0", "--hidden-dropout", "0",
              "--log-interval", "5", "--eval-iters", "0", "--device", "cpu", ranks=2)
    losses = [float(x) for x in re.findall(r"lm loss: ([0-9.E+-]+)", log)]
    print(f"      lm loss {losses[0]:.3f} -> {losses[-1]:.3f}")

    print("[4/5] exporting")
    run(bin_dir / "convert_checkpoint", "--load", work / "continued", "--export-hf", work / "exported",
        "--hf-model-type", config["model_type"], "--tokenizer-model", hf)

    print("[5/5] generating with transformers")
    import transformers

    tokenizer = transformers.AutoTokenizer.from_pretrained(work / "exported")
    model = transformers.AutoModelForCausalLM.from_pretrained(work / "exported").eval()
    prompt = tokenizer("def ", return_tensors="pt")
    out = model.generate(**prompt, max_new_tokens=16, do_sample=False, pad_token_id=tokenizer.eos_token_id)
    print("      " + repr(tokenizer.decode(out[0])))


if __name__ == "__main__":
    main()
