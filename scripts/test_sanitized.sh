#!/usr/bin/env bash
# The single-process tests under AddressSanitizer and UndefinedBehaviorSanitizer, in the
# instrumented clang build that scripts/fuzz.sh also uses (scripts/sanitized_build.sh; CI runs
# this after the test suite). Without MPI every test registered is one process.
#   BUILD_DIR   default build-fuzz
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
export BUILD_DIR="${BUILD_DIR:-$ROOT/build-fuzz}"

# Configure first (an empty build), then ask it which tests there are: only the binaries those
# tests run (test X or X.single runs target X) and the library are built. The install test builds
# a program of its own: left out; so is checkpoint_test, which trains and resumes for three and a
# half minutes here (its file readers run under these sanitizers as fuzz targets, their corpora
# replayed below; it runs unsanitized in the test suite). Tests that run a script
# (library_exports, architecture_rules) name no target: kept out by asking Ninja which names are
# targets.
SKIPPED='^install\.|^checkpoint_test'
bash "$ROOT/scripts/sanitized_build.sh" megatron
mapfile -t targets < <(comm -12 \
  <(ctest --test-dir "$BUILD_DIR" -N -L unit -E "$SKIPPED" |
    sed -n 's/^ *Test *#[0-9]*: \([A-Za-z0-9_]*\).*/\1/p' | sort -u) \
  <(ninja -C "$BUILD_DIR" -t targets all | sed -n 's/^\([A-Za-z0-9_]*\): phony$/\1/p' | sort -u))
bash "$ROOT/scripts/sanitized_build.sh" "${targets[@]}"

# Leaks are not checked: LibTorch keeps process-lifetime singletons that LeakSanitizer would report.
export ASAN_OPTIONS="detect_leaks=0:halt_on_error=1${ASAN_OPTIONS:+:$ASAN_OPTIONS}"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1${UBSAN_OPTIONS:+:$UBSAN_OPTIONS}"
export MKL_DYNAMIC=FALSE
ctest --test-dir "$BUILD_DIR" --output-on-failure -j "$(nproc)" -L unit -E "$SKIPPED"
