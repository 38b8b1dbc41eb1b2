#!/usr/bin/env bash
# Configures and builds the instrumented build (clang; every object under AddressSanitizer,
# UndefinedBehaviorSanitizer and libFuzzer's coverage, MEGATRON_FUZZ=ON) that both
# scripts/test_sanitized.sh and scripts/fuzz.sh use: one build serves the unit tests and the fuzz
# targets. No MPI: every test it registers is one process.
#   scripts/sanitized_build.sh TARGET...      BUILD_DIR default build-fuzz
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD_DIR="${BUILD_DIR:-$ROOT/build-fuzz}"
command -v clang++ >/dev/null || { apt-get update -qq && apt-get install -y -qq --no-install-recommends clang libclang-rt-dev; }
export CCACHE_DIR="${CCACHE_DIR:-$HOME/.cache/ccache}"
# Unoptimised: objects compile in half the time of -O2 (CI starts cold), and the sanitizers'
# checks do not depend on it. Precompiled headers with their templates instantiated once (CMake's
# default with clang): a third of the time per file; this build is never shared with another clone's.
cmake -S "$ROOT" -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Debug -DCMAKE_C_COMPILER=clang \
  -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DMEGATRON_FUZZ=ON -DMEGATRON_WITH_MPI=OFF \
  -DMEGATRON_WITH_CUDA=OFF -DMEGATRON_WITH_PYTHON=OFF -DMEGATRON_BUILD_TOOLS=OFF -DMEGATRON_BUILD_EXAMPLES=OFF \
  -DMEGATRON_PRECOMPILE_HEADERS=ON -DMEGATRON_PYTHON_EXECUTABLE="${PYTHON:-$ROOT/.venv/bin/python}" >/dev/null
cmake --build "$BUILD_DIR" --target "$@"
