#!/usr/bin/env python3
"""Training throughput of pretrain_gpt next to a plain PyTorch-Python loop of the same model
(tests/python/gpt_reference.py with torch's fused kernels), eager and torch.compile, in the same
run on the same device: ms/iteration, tokens/s, TFLOP/s, MFU, peak GPU memory, and the ratios.

Same shapes, AdamW, gradient clipping, micro-batch accumulation, no dropout; bf16 on CUDA
(pretrain_gpt: bf16 model with fp32 main weights; PyTorch: autocast over fp32 weights, as nanoGPT),
fp32 on CPU. FLOPs per token follow PaLM (appendix B): 6 N + 12 L H Q T, with N the parameters
without the position embedding; MFU divides by --peak-tflops (989 for an H100/H200 in bf16,
dense). Rounds alternate; the best of each side counts. With --kernels N (CUDA), one more run of
each side records its last two iterations with the PyTorch profiler and prints the GPU time per
iteration by kind of kernel, and each side's N longest kernels: where the ratios come from.

    .venv/bin/python tools/bench/gpt_train_bench.py --model gpt2-124m          # on a GPU
    .venv/bin/python tools/bench/gpt_train_bench.py --config configs/gpt2-tiny.toml --device cpu
"""
from __future__ import annotations

import argparse
import gc
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

try:
    import tomllib  # Python 3.11+
except ImportError:  # the configs are flat `key = value` lines: enough for them
    tomllib = None

import torch

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "python"))
from gpt_reference import GPT, Config  # noqa: E402

MODELS = {
    "gpt2-124m": ROOT / "configs" / "gpt2-124m.toml",
    "gpt-1.3b": ROOT / "configs" / "gpt-1.3b.toml",
}
PEAK_TFLOPS = {"H200": 989.0, "H100": 989.0, "A100": 312.0}  # bf16 dense


def read_config(path: Path) -> dict:
    if tomllib is not None:
        return tomllib.loads(path.read_text())
    c = {}
    for line in path.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if "=" in line:
            key, value = (x.strip() for x in line.split("=", 1))
            c[key] = value.strip('"') if value.startswith('"') else (
                value == "true" if value in ("true", "false") else (float(value) if any(ch in value for ch in ".e") else int(value)))
    return c


def default_binary() -> str:
    """pretrain_gpt from MEGATRON_BUILD_DIR, else build-gpu (scripts/build_gpu.sh), else build."""
    build = os.environ.get("MEGATRON_BUILD_DIR")
    if build is None:
        build = ROOT / "build-gpu" if (ROOT / "build-gpu" / "bin" / "pretrain_gpt").exists() else ROOT / "build"
    return str(Path(build) / "bin" / "pretrain_gpt")


def flops_per_token(c: dict, vocab: int) -> float:
    h, layers, s = c["hidden-size"], c["num-layers"], c["seq-length"]
    n = vocab * h + layers * (12 * h * h + 13 * h) + 2 * h  # embedding (tied), blocks, final norm
    return 6 * n + 12 * layers * h * s


def cpp_ms_per_iteration(binary: Path, c: dict, a: argparse.Namespace,
                         trace: Path | None = None, extra: list[str] | None = None) -> tuple[float, float | None]:
    """ms per iteration of the second half, and the peak allocated MB that pretrain_gpt reports on CUDA.
    With trace, the last two iterations' Kineto trace is copied there; extra flags go last."""
    with tempfile.TemporaryDirectory() as tmp:
        metrics = Path(tmp) / "metrics.jsonl"
        cmd = [str(binary), "--num-layers", str(c["num-layers"]), "--hidden-size", str(c["hidden-size"]),
               "--num-attention-heads", str(c["num-attention-heads"]), "--seq-length", str(c["seq-length"]),
               "--max-position-embeddings", str(c["seq-length"]), "--micro-batch-size", str(a.micro_batch_size),
               "--global-batch-size", str(a.global_batch_size), "--train-iters", str(a.iters),
               "--lr", str(c.get("lr", 6e-4)), "--lr-warmup-iters", "1", "--weight-decay", str(c.get("weight-decay", 0.1)),
               "--clip-grad", str(c.get("clip-grad", 1.0)), "--attention-dropout", "0", "--hidden-dropout", "0",
               "--mock-data", "--vocab-size", str(a.vocab), "--log-interval", str(max(1, a.iters // 2)),
               "--eval-iters", "0", "--device", a.device, "--metrics-file", str(metrics)]
        if a.dtype == "bf16":
            cmd.append("--bf16")
        if a.tf32:
            cmd.append("--tf32")
        if trace is not None:
            cmd += ["--profile", "--use-pytorch-profiler", "--profile-step-start", str(a.iters - 2),
                    "--profile-step-end", str(a.iters), "--tensorboard-dir", str(Path(tmp) / "tb")]
        cmd += extra or []
        env = dict(os.environ, LOCAL_RANK="0")
        if a.device.startswith("cuda"):  # this process's cached blocks would crowd pretrain_gpt out
            gc.collect()
            torch.cuda.empty_cache()
        run = subprocess.run(cmd, capture_output=True, text=True, env=env)
        if run.returncode != 0:
            hint = (" (out of memory: try a smaller --micro-batch-size)" if "out of memory" in run.stderr.lower()
                    else "")
            sys.exit(f"gpt_train_bench: pretrain_gpt failed{hint}:\n{run.stderr[-3000:]}")
        if trace is not None:
            shutil.copy(next((Path(tmp) / "tb").glob("*.pt.trace.json")), trace)
        records = [json.loads(line) for line in metrics.read_text().splitlines()]
        peak = re.search(r"max allocated: ([0-9.]+)", run.stdout + run.stderr)
        return records[-1]["elapsed_ms"], float(peak.group(1)) if peak else None  # the second half: past start-up


def python_ms_per_iteration(c: dict, a: argparse.Namespace, compiled: bool,
                            trace: Path | None = None) -> tuple[float, float | None]:
    torch.manual_seed(0)
    h = c["hidden-size"]
    cfg = Config(vocab_size=a.vocab, hidden_size=h, num_layers=c["num-layers"], num_heads=c["num-attention-heads"],
                 num_kv_heads=c["num-attention-heads"], ffn_hidden_size=4 * h, max_seq_len=c["seq-length"], fused=True)
    device = torch.device(a.device)
    model = GPT(cfg).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=c.get("lr", 6e-4), weight_decay=c.get("weight-decay", 0.1),
                            fused=device.type == "cuda")
    step_model = torch.compile(model) if compiled else model
    mbs, gbs, s = a.micro_batch_size, a.global_batch_size, c["seq-length"]
    micro = gbs // mbs
    data = torch.randint(0, a.vocab, (micro, mbs, s + 1), device=device)
    autocast = torch.autocast(device.type, dtype=torch.bfloat16, enabled=a.dtype == "bf16")
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats()
    times = []
    profiler = torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU,
                                                  torch.profiler.ProfilerActivity.CUDA])
    for i in range(a.iters):
        if trace is not None and i == a.iters - 2:
            profiler.start()
        if device.type == "cuda":
            torch.cuda.synchronize()
        start = time.perf_counter()
        opt.zero_grad(set_to_none=False)
        for m in range(micro):
            with autocast:
                loss = step_model(data[m, :, :-1], data[m, :, 1:]).float().mean() / micro
            loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), c.get("clip-grad", 1.0))
        opt.step()
        if device.type == "cuda":
            torch.cuda.synchronize()
        times.append(time.perf_counter() - start)
    if trace is not None:
        profiler.stop()
        profiler.export_chrome_trace(str(trace))
    half = times[len(times) // 2:]
    peak = torch.cuda.max_memory_allocated() / 2**20 if device.type == "cuda" else None
    return 1000 * sum(half) / len(half), peak


def largest_micro_batch(c: dict, a: argparse.Namespace) -> int:
    """The largest power of two up to 64 with which one eager PyTorch step fits in memory."""
    for mbs in (64, 32, 16, 8, 4, 2, 1):
        trial = argparse.Namespace(**{**vars(a), "micro_batch_size": mbs, "global_batch_size": mbs, "iters": 1})
        try:
            python_ms_per_iteration(c, trial, compiled=False)
            return mbs
        except torch.OutOfMemoryError:
            torch.cuda.empty_cache()
    sys.exit("gpt_train_bench: not even a micro-batch of 1 fits")


# Kinds of GPU kernel, matched in order against the kernel's name (cuBLAS/cuDNN, ATen, Triton, ours).
KERNEL_KINDS = [
    ("attention", ("sdpa", "flash", "fmha", "attention", "cudnn")),
    ("GEMM", ("gemm", "nvjet", "cutlass", "xmma", "sm90_")),
    ("optimizer", ("multi_tensor_apply", "adam")),
    ("cross entropy", ("cross_entropy", "log_softmax", "nll_loss", "megatron::tensor_parallel")),
    ("LayerNorm", ("layer_norm", "gammabeta", "layernorm", "norm_forward_kernel", "norm_backward_kernel")),
    ("reduction", ("reduce_kernel", "triton_red", "triton_per", "column_sum_kernel")),
    ("element-wise", ("elementwise", "triton_poi", "fill", "copy", "cat", "dropout", "bias_gelu")),
]


def kernel_summary(trace: Path, iterations: int) -> tuple[dict, list]:
    """GPU ms per iteration by kind, and (ms, launches, name) per kernel name, from a Kineto trace."""
    events = json.loads(trace.read_text())["traceEvents"]
    per_name: dict[str, list] = {}
    for e in events:
        if e.get("ph") == "X" and e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset"):
            entry = per_name.setdefault(e["name"], [0.0, 0])
            entry[0] += e["dur"] / 1000 / iterations
            entry[1] += 1 / iterations
    kinds: dict[str, float] = {}
    for name, (ms, _) in per_name.items():
        low = name.lower()
        kind = next((k for k, keys in KERNEL_KINDS if any(key in low for key in keys)), "other")
        kinds[kind] = kinds.get(kind, 0.0) + ms
    top = sorted(((ms, n, name) for name, (ms, n) in per_name.items()), reverse=True)
    return kinds, top


def print_kernels(traces: dict, top_n: int) -> None:
    summaries = {side: kernel_summary(path, 2) for side, path in traces.items()}
    kinds = [k for k, _ in KERNEL_KINDS] + ["other"]
    print("\nGPU ms per iteration by kind of kernel (last two iterations, PyTorch profiler):")
    width = max(18, *(len(side) + 2 for side in summaries))
    print(f"{'':15}" + "".join(f"{side:>{width}}" for side in summaries))
    for kind in kinds + ["total"]:
        row = [sum(s[0].values()) if kind == "total" else s[0].get(kind, 0.0) for s in summaries.values()]
        print(f"{kind:15}" + "".join(f"{ms:{width}.2f}" for ms in row))
    for side, (_, top) in summaries.items():
        print(f"\n{side}: the {top_n} longest kernels (ms per iteration, launches per iteration)")
        for ms, n, name in top[:top_n]:
            print(f"  {ms:8.2f} {n:6.0f}  {name[:110]}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", choices=sorted(MODELS), default="gpt2-124m")
    ap.add_argument("--config", help="a pretrain_gpt TOML config instead of --model")
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--dtype", choices=["bf16", "fp32"], help="default: bf16 on CUDA, fp32 on CPU")
    ap.add_argument("--micro-batch-size", type=int, help="default: the config's on CPU, the largest that fits on CUDA")
    ap.add_argument("--global-batch-size", type=int, help="default: the micro-batch size")
    ap.add_argument("--vocab", type=int, default=50304, help="vocabulary (a multiple of 128: no padding)")
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--compile", action=argparse.BooleanOptionalAction, default=None,
                    help="also time torch.compile (default: on CUDA)")
    ap.add_argument("--tf32", action="store_true", help="TF32 for fp32 matmuls on both sides")
    ap.add_argument("--peak-tflops", type=float, help="for MFU (default: from the GPU's name)")
    ap.add_argument("--kernels", type=int, metavar="N",
                    help="profile each side once more and print GPU time by kind and its N longest kernels (CUDA)")
    ap.add_argument("--variant", action="append", default=[], metavar="FLAGS",
                    help="also time pretrain_gpt with these flags added, e.g. --variant=--domino (repeatable); "
                         "its ratio is its ms/iter over plain pretrain_gpt's: the flags' cost")
    ap.add_argument("--binary", default=default_binary(),
                    help="default: $MEGATRON_BUILD_DIR/bin, else build-gpu/bin, else build/bin")
    a = ap.parse_args()
    config = Path(a.config) if a.config else MODELS[a.model]
    c = read_config(config)
    cuda = a.device.startswith("cuda")
    a.dtype = a.dtype or ("bf16" if cuda else "fp32")
    if a.compile is None:
        a.compile = cuda
    torch.backends.cuda.matmul.allow_tf32 = a.tf32
    if a.micro_batch_size is None:
        a.micro_batch_size = largest_micro_batch(c, a) if cuda else c["micro-batch-size"]
    a.global_batch_size = a.global_batch_size or a.micro_batch_size
    peak = a.peak_tflops
    if peak is None and cuda:
        name = torch.cuda.get_device_name()
        peak = next((v for k, v in PEAK_TFLOPS.items() if k in name), None)

    # Each side's timing; with trace, its last two iterations' Kineto trace goes there.
    measures = {"pretrain_gpt": lambda trace=None: cpp_ms_per_iteration(Path(a.binary), c, a, trace)}
    for flags in a.variant:  # f bound per variant, not to the loop's last value
        measures[f"pretrain_gpt {flags}"] = (
            lambda trace=None, f=flags.split(): cpp_ms_per_iteration(Path(a.binary), c, a, trace, extra=f))
    measures["PyTorch eager"] = lambda trace=None: python_ms_per_iteration(c, a, compiled=False, trace=trace)
    if a.compile:
        measures["PyTorch compile"] = lambda trace=None: python_ms_per_iteration(c, a, compiled=True, trace=trace)
    sides = {name: [] for name in measures}
    peaks = {}
    for _ in range(a.rounds):
        for name, measure in measures.items():
            ms, peaks[name] = measure()
            sides[name].append(ms)

    tokens = a.global_batch_size * c["seq-length"]
    fpt = flops_per_token(c, a.vocab)
    device_name = torch.cuda.get_device_name() if cuda else f"CPU, {torch.get_num_threads()} threads"
    print(f"# {config.name}: {c['num-layers']} layers, hidden {c['hidden-size']}, seq {c['seq-length']}, "
          f"micro-batch {a.micro_batch_size}, global batch {a.global_batch_size}, vocab {a.vocab}, {a.dtype}"
          f"{', tf32' if a.tf32 else ''}; {device_name}; {fpt / 1e9:.2f} GFLOP/token (PaLM)"
          + (f"; MFU against {peak:.0f} TFLOP/s" if peak else ""))
    width = max(18, *(len(name) for name in sides))
    print(f"{'':{width}} {'ms/iter':>9} {'tokens/s':>11} {'TFLOP/s':>8} {'MFU':>6} {'peak MB':>9} {'pretrain_gpt / this':>20}")
    ours = tokens / min(sides["pretrain_gpt"]) * 1000
    for name, times in sides.items():
        best = min(times)
        tok_s = tokens / best * 1000
        tflops = tok_s * fpt / 1e12
        mfu = f"{100 * tflops / peak:5.1f}%" if peak else "     -"
        memory = f"{peaks[name]:9.0f}" if peaks.get(name) is not None else "        -"
        print(f"{name:{width}} {best:9.1f} {tok_s:11.0f} {tflops:8.2f} {mfu:>6} {memory} {ours / tok_s:20.3f}")

    if a.kernels:
        if not cuda:
            sys.exit("gpt_train_bench: --kernels needs a CUDA device")
        with tempfile.TemporaryDirectory() as tmp:
            traces = {name: Path(tmp) / f"side{i}.json" for i, name in enumerate(measures)}
            for name, measure in measures.items():
                measure(traces[name])
            print_kernels(traces, a.kernels)


if __name__ == "__main__":
    main()
