#!/usr/bin/env bash
# The whole test suite: set up and build if needed, then ctest (unit, distributed, install),
# then pytest when there are Python tests, a test file per worker on each core (their processes
# leave a core idle a third of the time; the 25 slowest are named, for CI's time budget). Exits
# non-zero on any failure.
#   CTEST_ARGS    extra ctest arguments, e.g. "-L unit" or "-R launcher"
#   PYTEST_WORKERS  pytest-xdist workers (default: the cores; 0 runs in this process)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD_DIR="${BUILD_DIR:-$ROOT/build}"

bash "$ROOT/scripts/build.sh"

# Fixed MKL thread counts: tests compare runs bit for bit (pretrain_gpt sets this itself).
export MKL_DYNAMIC="${MKL_DYNAMIC:-FALSE}"

# shellcheck disable=SC2086
# Label gpu needs a GPU: scripts/gpu_check.sh runs it.
ctest --test-dir "$BUILD_DIR" --output-on-failure -j "$(nproc)" -LE gpu ${CTEST_ARGS:-}

if compgen -G "$ROOT/tests/python/test_*.py" >/dev/null; then
  MEGATRON_BUILD_DIR="$BUILD_DIR" "$ROOT/.venv/bin/python" -m pytest -q --durations=25 \
    -n "${PYTEST_WORKERS:-$(nproc)}" --dist loadfile "$ROOT/tests/python"
fi
