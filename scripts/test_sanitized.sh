#!/usr/bin/env bash
# The single-process tests under AddressSanitizer and UndefinedBehaviorSanitizer, in their own
# build folder (CI runs it after the test suite). Without MPI every test registered is one process.
#   BUILD_DIR   default build-asan
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD_DIR="${BUILD_DIR:-$ROOT/build-asan}"
PYTHON="${PYTHON:-$ROOT/.venv/bin/python}"

# Debug: the tests are tiny, and unoptimised objects compile faster. Precompiled headers: this
# build is never shared with another clone's, and they halve its time.
cmake -S "$ROOT" -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Debug -DMEGATRON_SANITIZE=ON \
  -DMEGATRON_WITH_MPI=OFF -DMEGATRON_WITH_CUDA=OFF -DMEGATRON_WITH_PYTHON=OFF -DMEGATRON_BUILD_TOOLS=OFF \
  -DMEGATRON_BUILD_EXAMPLES=OFF -DMEGATRON_PRECOMPILE_HEADERS=ON -DMEGATRON_PYTHON_EXECUTABLE="$PYTHON" >/dev/null

# Only the binaries those tests run (test X or X.single runs target X) and the library: the
# multi-rank tests are not registered. The install test builds a program of its own: left out.
# Tests that run a script (library_exports, architecture_rules) name no target: kept out by
# asking Ninja which names are targets.
mapfile -t targets < <(comm -12 \
  <(ctest --test-dir "$BUILD_DIR" -N -L unit -E '^install\.' |
    sed -n 's/^ *Test *#[0-9]*: \([A-Za-z0-9_]*\).*/\1/p' | sort -u) \
  <(ninja -C "$BUILD_DIR" -t targets all | sed -n 's/^\([A-Za-z0-9_]*\): phony$/\1/p' | sort -u))
cmake --build "$BUILD_DIR" --target megatron "${targets[@]}"

# Leaks are not checked: LibTorch keeps process-lifetime singletons that LeakSanitizer would report.
export ASAN_OPTIONS="detect_leaks=0:halt_on_error=1${ASAN_OPTIONS:+:$ASAN_OPTIONS}"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1${UBSAN_OPTIONS:+:$UBSAN_OPTIONS}"
export MKL_DYNAMIC=FALSE
ctest --test-dir "$BUILD_DIR" --output-on-failure -j "$(nproc)" -L unit -E '^install\.'
