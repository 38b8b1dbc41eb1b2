#!/usr/bin/env bash
# Everything a lent GPU machine should measure, in steps that each stay under 10 minutes and share
# the build directory. The device time is short, so build here and carry the binaries:
#   here:  bash scripts/gpu_check.sh build                    # build-gpu/bin/{pretrain_gpt,gpu_test} (ccache: minutes)
#   there: bash scripts/gpu_check.sh all                      # carry build-gpu/bin build-gpu/lib
#          third_party/gpu-deps/onig third_party/gpu-deps/utf8proc (docs/gpu.md)
#   bash scripts/gpu_check.sh measure [OUT]      # GPU tests, fused kernels against ATen's, SDPA backend, MoE grouped GEMM,
#                                                # GPT-2 124M bench with each kernel switched off in turn (and
#                                                # --domino), a 3-step trace
#   bash scripts/gpu_check.sh tests [OUT]        # only the GPU tests and the fused kernels' bench
#   bash scripts/gpu_check.sh bench-1.3b [OUT]   # GPT 1.3B against PyTorch eager and torch.compile, and FP8
#   bash scripts/gpu_check.sh all [OUT]          # measure and bench-1.3b (about 4.5 minutes on an H200)
# The build also works on the GPU machine itself (torch's wheel, nvcc, CMake, Ninja), only slower.
# OUT defaults to $OUT when it is set (the device tool's folder), else gpu_check-out; at most
# seven files land there. Each step appends to OUT/summary.md; docs/performance.md holds the table.
# Exits non-zero when a GPU test fails (after measuring the rest).
# BENCH_VARIANTS: the flag sets the GPT-2 124M bench also times (default: each fused kernel off, --domino).
set -euo pipefail
cd "$(dirname "$0")/.."
step="${1:-all}"
out="${2:-${OUT:-}}"
out="${out:-gpu_check-out}"
# The build here uses the project's venv (its torch is the cu130 wheel); the GPU machine's python3 has torch.
python="${PYTHON:-$( [[ $step == build && -x .venv/bin/python ]] && echo "$PWD/.venv/bin/python" || echo python3)}"
build="${BUILD_DIR:-build-gpu}"
export MEGATRON_BUILD_DIR="$PWD/$build" MKL_DYNAMIC=FALSE
mkdir -p "$out"
summary="$out/summary.md"

note() { echo "$*" | tee -a "$summary"; }

build() {
  [[ -d third_party/gpu-deps ]] || bash scripts/pack_gpu_deps.sh
  CMAKE_ARGS="-DMEGATRON_WITH_PYTHON=OFF ${CMAKE_ARGS:-}" PYTHON="$python" BUILD_DIR="$build" \
    BUILD_TARGETS="pretrain_gpt gpu_test fusions_bench" bash scripts/build_gpu.sh
  # The commit the binaries come from: the GPU machine's copy of the tree may not know it.
  git describe --always --dirty >"$build/bin/COMMIT"
}

# The binaries find LibTorch, NCCL and the bundled libraries through their RUNPATH where they were
# built; a build carried from another machine finds them in this Python's torch instead.
libraries() {
  local site
  site=$("$python" -c 'import os, torch; print(os.path.dirname(os.path.dirname(torch.__file__)))')
  LD_LIBRARY_PATH="$PWD/$build/lib:$site/torch/lib:$(ls -d "$site"/nvidia/*/lib 2>/dev/null | tr '\n' ':')"
  LD_LIBRARY_PATH+="$PWD/third_party/gpu-deps/onig/lib:$PWD/third_party/gpu-deps/utf8proc/lib:${LD_LIBRARY_PATH:-}"
  export LD_LIBRARY_PATH
  if ldd "$build/bin/pretrain_gpt" | grep "not found"; then
    echo "gpu_check: pretrain_gpt misses the libraries above" >&2; exit 1
  fi
}

tests_failed=0

tests() {
  [[ -x "$build/bin/pretrain_gpt" ]] || { echo "gpu_check: run 'gpu_check.sh build' first" >&2; exit 1; }
  note "## $(date -u +%F), binaries of $(cat "$build/bin/COMMIT" 2>/dev/null || echo 'an unrecorded commit')"
  note "- device: $(nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>/dev/null || echo unknown)"
  note "- torch: $("$python" -c 'import torch; print(torch.__version__, "CUDA", torch.version.cuda)')"
  # The GPU tests: fused optimizer, cross entropy, norms, bias-GELU and FP8 GEMMs against the CPU, 20
  # iterations of pretrain() (fp32 within 1e-4, bf16 within 2% of the CPU losses), one read-back
  # per iteration, the stream an NCCL wait orders. Run directly rather than through CTest, whose
  # files name the build machine's paths.
  if timeout 300 "$build/bin/gpu_test" --gtest_repeat="${GPU_TEST_REPEAT:-1}" >"$out/gpu_tests.log" 2>&1; then
    note "- GPU tests: passed ($(grep -c '^\[       OK' "$out/gpu_tests.log" || true) cases)"
  else
    note "- GPU tests: FAILED (see gpu_tests.log)"
    tests_failed=1
  fi
  # Each fused kernel against the ATen operators it replaces, at GPT-2 124M's shapes (micro-batch 64).
  timeout 120 "$build/bin/fusions_bench" >"$out/fusions.txt" 2>&1 || note "- fusions_bench FAILED (see fusions.txt)"
  { echo '```'; cat "$out/fusions.txt"; echo '```'; } >>"$summary"
}

measure() {
  tests
  # The attention kernel SDPA picks for GPT-2 124M's shapes in bf16, causal.
  "$python" - >"$out/sdpa.txt" 2>&1 <<'EOF' || true
import torch
from torch.nn.attention import SDPBackend
q = torch.randn(16, 12, 1024, 64, device="cuda", dtype=torch.bfloat16)
print("SDPA backend (GPT-2 124M, bf16, causal):", SDPBackend(torch._fused_sdp_choice(q, q, q, is_causal=True)).name)
EOF
  note "- $(tail -1 "$out/sdpa.txt")"
  rm -f "$out/sdpa.txt"  # in the summary: the device tool brings back no more than eight files
  # Each variant's ratio is what switching a fused kernel off costs; --domino at TP 1 is Domino's
  # own cost (half-batch GEMMs and no communication to hide); --fp8-format=hybrid what FP8 GEMMs
  # (delayed scaling) gain over bf16's.
  local variants=() defaults="--no-persist-layer-norm --no-bias-gelu-fusion --domino --fp8-format=hybrid"
  for v in ${BENCH_VARIANTS-$defaults}; do variants+=("--variant=$v"); done
  "$python" tools/bench/gpt_train_bench.py --model gpt2-124m --rounds 2 --kernels 12 "${variants[@]}" \
    >"$out/bench_gpt2-124m.txt" 2>&1 ||
    note "- gpt2-124m bench FAILED (see bench_gpt2-124m.txt)"
  { echo '```'; cat "$out/bench_gpt2-124m.txt"; echo '```'; } >>"$summary"
  # MoE: the local experts as grouped GEMMs (--moe-grouped-gemm) against one GEMM pair per expert.
  MEGATRON_BUILD_DIR="$build" "$python" tools/bench/moe_bench.py --ep-sizes 1 --bf16 --hidden-size 1024 \
    --ffn-hidden-size 2048 --seq-length 1024 --micro-batch-size 8 >"$out/moe_bench.txt" 2>&1 ||
    note "- moe_bench FAILED (see moe_bench.txt)"
  { echo '```'; cat "$out/moe_bench.txt"; echo '```'; } >>"$summary"
  rm -f "$out/moe_bench.txt"
  # Three iterations of GPT-2 124M under the profiler: where the time goes.
  rm -rf "$out/trace"
  "$build/bin/pretrain_gpt" --config configs/gpt2-124m.toml --mock-data --vocab-size 50304 --bf16 \
    --train-iters 6 --lr-warmup-iters 1 --log-interval 3 --eval-iters 0 --micro-batch-size 8 \
    --global-batch-size 8 --profile --use-pytorch-profiler --profile-step-start 3 --profile-step-end 6 \
    --tensorboard-dir "$out/trace" >"$out/trace.log" 2>&1 || note "- trace run FAILED (see trace.log)"
  # One file, at the top of OUT: the device tool brings back no more than eight.
  gzip -c "$out"/trace/*.pt.trace.json >"$out/trace.json.gz" 2>/dev/null && rm -rf "$out/trace" || true
  note "- trace: trace.json.gz ($(grep -o 'max allocated: [0-9.]*' "$out/trace.log" | head -1) MB)"
}

bench_large() {
  # FP8 against bf16 at 1.3B, where the GEMMs dominate (docs/fp8.md's target: >= 1.4x).
  "$python" tools/bench/gpt_train_bench.py --model gpt-1.3b --iters 10 --micro-batch-size 16 \
    --variant=--fp8-format=hybrid >"$out/bench_gpt-1.3b.txt" 2>&1 ||
    note "- gpt-1.3b bench FAILED (see bench_gpt-1.3b.txt)"
  { echo '```'; cat "$out/bench_gpt-1.3b.txt"; echo '```'; } >>"$summary"
}

case "$step" in
  build) build ;;
  tests) libraries; tests ;;
  measure) libraries; measure ;;
  bench-1.3b) libraries; bench_large ;;
  all) libraries; measure; bench_large ;;
  *) echo "usage: gpu_check.sh build|tests|measure|bench-1.3b|all [OUT]" >&2; exit 2 ;;
esac
echo "gpu_check: $step done; results in $out"
if ((tests_failed)); then
  echo "gpu_check: GPU tests FAILED (see $out/gpu_tests.log)" >&2
  exit 1
fi
