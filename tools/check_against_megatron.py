#!/usr/bin/env python3
"""Compares our sample stream with Megatron-LM's own GPTDataset / BlendedDataset on the same
files, seed, sequence length, split and sample counts: the megatron-core package installed beside
it (setup.sh pins it), or a Megatron-LM checkout (--megatron PATH).

    python3 tools/check_against_megatron.py [--megatron PATH] --build-dir build \\
        --data-path [W1] PREFIX1 [W2 PREFIX2 ...] --seq-length 128 --seed 1234 \\
        --split 949,50,1 --num-samples 2000,200,100 [--samples 300]

A checkout's dataset helpers must be compiled (make -C PATH/megatron/core/datasets; pybind11's
headers also ship inside torch: -I$(python -c 'import torch,os;print(os.path.dirname(torch.__file__))')/include);
the package ships them built.
Exits non-zero on the first differing sample.
"""
import argparse
import os
import subprocess
import sys
import tempfile
import warnings

import numpy as np


class _Tokenizer:
    """The attributes Megatron's dataset config reads from a tokenizer."""
    def __init__(self, vocab_size, eod):
        self.vocab_size = vocab_size
        self.eod = eod
        self.unique_identifiers = {"class": "check_against_megatron", "vocab_size": vocab_size}


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--megatron", help="Megatron-LM checkout (default: the installed megatron-core)")
    p.add_argument("--build-dir", default="build")
    p.add_argument("--data-path", nargs="+", required=True)
    p.add_argument("--seq-length", type=int, required=True)
    p.add_argument("--seed", type=int, default=1234)
    p.add_argument("--split", default="969,30,1")
    p.add_argument("--num-samples", default="1000,100,100", help="train,valid,test")
    p.add_argument("--samples", type=int, default=300, help="samples compared per split")
    p.add_argument("--vocab-size", type=int, default=50257)
    p.add_argument("--eod", type=int, default=50256)
    args = p.parse_args()
    if args.megatron:
        sys.path.insert(0, args.megatron)
    warnings.filterwarnings("ignore")
    from megatron.core.datasets.blended_megatron_dataset_builder import BlendedMegatronDatasetBuilder
    from megatron.core.datasets.gpt_dataset import GPTDataset, GPTDatasetConfig
    import torch
    # Its BlendedDataset asks for the rank when it caches its indices: a process group of one.
    if not torch.distributed.is_initialized():
        torch.distributed.init_process_group("gloo", store=torch.distributed.HashStore(), rank=0, world_size=1)

    words = args.data_path
    weighted = len(words) % 2 == 0 and all(_is_float(w) for w in words[::2])
    blend = (words[1::2], [float(w) for w in words[::2]]) if weighted else (words, None)
    sizes = [int(x) for x in args.num_samples.split(",")]
    work = tempfile.mkdtemp(prefix="check_megatron_")
    config = GPTDatasetConfig(random_seed=args.seed, sequence_length=args.seq_length, blend=blend,
                              split=args.split, tokenizer=_Tokenizer(args.vocab_size, args.eod),
                              reset_position_ids=False, reset_attention_mask=False,
                              eod_mask_loss=False, path_to_cache=os.path.join(work, "megatron"))
    theirs = BlendedMegatronDatasetBuilder(GPTDataset, sizes, lambda: True, config).build()
    ours_dir = os.path.join(work, "ours")
    os.makedirs(ours_dir)
    subprocess.run([os.path.join(args.build_dir, "bin", "dataset_tool"), "gpt-indices",
                    "--data-path", *words, "--seq-length", str(args.seq_length), "--seed",
                    str(args.seed), "--split", args.split, "--num-samples", args.num_samples,
                    "--out", ours_dir, "--max-samples", str(args.samples)], check=True,
                   capture_output=True)
    failed = False
    for name, d in zip(["train", "valid", "test"], theirs):
        path = os.path.join(ours_dir, f"{name}_samples.npy")
        if d is None or len(d) == 0:
            print(f"{name}: absent in Megatron-LM, {'present' if os.path.exists(path) else 'absent'} here")
            continue
        ours = np.load(path)
        n = min(args.samples, len(d))
        same = all(np.array_equal(d[i]["tokens"].numpy(), ours[i, :-1]) and
                   np.array_equal(d[i]["labels"].numpy(), ours[i, 1:]) for i in range(n))
        print(f"{name}: Megatron-LM {len(d)} samples; first {n} {'identical' if same else 'DIFFER'}")
        failed |= not same
    subprocess.run(["rm", "-rf", work])
    sys.exit(1 if failed else 0)


def _is_float(text):
    try:
        float(text)
        return True
    except ValueError:
        return False


if __name__ == "__main__":
    main()
