#!/usr/bin/env bash
# Sets up what is missing (scripts/setup.sh), then configures and builds into build/ with Ninja.
#   BUILD_DIR     build folder (default: build)
#   CMAKE_ARGS    extra configure arguments, e.g. "-DMEGATRON_WITH_CUDA=OFF"
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD_DIR="${BUILD_DIR:-$ROOT/build}"

bash "$ROOT/scripts/setup.sh"

# ccache lives outside the tree so that fresh clones reuse it.
export CCACHE_DIR="${CCACHE_DIR:-$HOME/.cache/ccache}"
# shellcheck disable=SC2086
mkdir -p "$BUILD_DIR"
cmake -S "$ROOT" -B "$BUILD_DIR" -G Ninja ${CMAKE_ARGS:-} >"$BUILD_DIR/configure.log" 2>&1 ||
  { cat "$BUILD_DIR/configure.log"; exit 1; }
grep '^-- \[megatron\]' "$BUILD_DIR/configure.log" || true
cmake --build "$BUILD_DIR"
