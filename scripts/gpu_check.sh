#!/usr/bin/env bash
# Everything a lent GPU machine should measure, in steps that each stay under 10 minutes and share
# the build directory (the machine has torch's wheel, nvcc, CMake and Ninja; no Debian packages,
# no MPI, no network: bring third_party/gpu-deps, see docs/gpu.md).
#   bash scripts/gpu_check.sh build              # scripts/build_gpu.sh into build-gpu
#   bash scripts/gpu_check.sh measure [OUT]      # GPU tests, SDPA backend, GPT-2 124M bench, a 3-step trace
#   bash scripts/gpu_check.sh bench-1.3b [OUT]   # GPT 1.3B against PyTorch eager and torch.compile
#   bash scripts/gpu_check.sh all [OUT]          # the three in turn
# OUT defaults to $OUT/gpu_check when $OUT is set (the device tool's folder), else gpu_check-out.
# Each step appends to OUT/summary.md; docs/performance.md is the table those numbers go into.
set -euo pipefail
cd "$(dirname "$0")/.."
step="${1:-all}"
out="${2:-${OUT:+$OUT/gpu_check}}"
out="${out:-gpu_check-out}"
python="${PYTHON:-python3}"
build="${BUILD_DIR:-build-gpu}"
export MEGATRON_BUILD_DIR="$PWD/$build" MKL_DYNAMIC=FALSE
mkdir -p "$out"
summary="$out/summary.md"

note() { echo "$*" | tee -a "$summary"; }

build() {
  { time PYTHON="$python" BUILD_DIR="$build" bash scripts/build_gpu.sh; } >"$out/build.log" 2>&1 ||
    { tail -50 "$out/build.log"; echo "gpu_check: the build failed (log: $out/build.log)" >&2; exit 1; }
  note "- build: $(grep real "$out/build.log" | tail -1 | awk '{print $2}') ($build)"
}

measure() {
  [[ -x "$build/bin/pretrain_gpt" ]] || { echo "gpu_check: run 'gpu_check.sh build' first" >&2; exit 1; }
  note "## $(date -u +%F) $(git rev-parse --short HEAD 2>/dev/null || echo '?')"
  note "- device: $(nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>/dev/null || echo unknown)"
  note "- torch: $("$python" -c 'import torch; print(torch.__version__, "CUDA", torch.version.cuda)')"
  # The GPU tests: fused optimizer and cross entropy against the CPU, 20 iterations of pretrain()
  # (fp32 within 1e-4, bf16 within 2% of the CPU losses), one read-back per iteration.
  if ctest --test-dir "$build" -L gpu --output-on-failure >"$out/gpu_tests.log" 2>&1; then
    note "- GPU tests: passed ($(grep -c '^\[       OK' "$out/gpu_tests.log" || true) cases)"
  else
    note "- GPU tests: FAILED (see gpu_tests.log)"
  fi
  # The attention kernel SDPA picks for GPT-2 124M's shapes in bf16, causal.
  "$python" - >"$out/sdpa.txt" 2>&1 <<'EOF' || true
import torch
from torch.nn.attention import SDPBackend
q = torch.randn(16, 12, 1024, 64, device="cuda", dtype=torch.bfloat16)
print("SDPA backend (GPT-2 124M, bf16, causal):", SDPBackend(torch._fused_sdp_choice(q, q, q, is_causal=True)).name)
EOF
  note "- $(tail -1 "$out/sdpa.txt")"
  "$python" tools/bench/gpt_train_bench.py --model gpt2-124m --rounds 2 >"$out/bench_gpt2-124m.txt" 2>&1 ||
    note "- gpt2-124m bench FAILED (see bench_gpt2-124m.txt)"
  { echo '```'; cat "$out/bench_gpt2-124m.txt"; echo '```'; } >>"$summary"
  # Three iterations of GPT-2 124M under the profiler: where the time goes.
  rm -rf "$out/trace"
  "$build/bin/pretrain_gpt" --config configs/gpt2-124m.toml --mock-data --vocab-size 50304 --bf16 \
    --train-iters 6 --lr-warmup-iters 1 --log-interval 3 --eval-iters 0 --micro-batch-size 8 \
    --global-batch-size 8 --profile --use-pytorch-profiler --profile-step-start 3 --profile-step-end 6 \
    --tensorboard-dir "$out/trace" >"$out/trace.log" 2>&1 || note "- trace run FAILED (see trace.log)"
  gzip -f "$out"/trace/*.pt.trace.json 2>/dev/null || true
  note "- trace: $(ls "$out"/trace 2>/dev/null | head -1) ($(grep -o 'max allocated: [0-9.]*' "$out/trace.log" | head -1) MB)"
}

bench_large() {
  "$python" tools/bench/gpt_train_bench.py --model gpt-1.3b --iters 10 >"$out/bench_gpt-1.3b.txt" 2>&1 ||
    note "- gpt-1.3b bench FAILED (see bench_gpt-1.3b.txt)"
  { echo '```'; cat "$out/bench_gpt-1.3b.txt"; echo '```'; } >>"$summary"
}

case "$step" in
  build) build ;;
  measure) measure ;;
  bench-1.3b) bench_large ;;
  all) build; measure; bench_large ;;
  *) echo "usage: gpu_check.sh build|measure|bench-1.3b|all [OUT]" >&2; exit 2 ;;
esac
echo "gpu_check: $step done; results in $out"
