#!/usr/bin/env bash
# The main job: set up and build if needed, then run the most complete end-to-end path the
# project has, on 2 ranks under mpirun.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD_DIR="${BUILD_DIR:-$ROOT/build}"
NP="${NP:-2}"

bash "$ROOT/scripts/build.sh"

# The installed package, used by a separate program the way a user's training program would.
cmake --install "$BUILD_DIR" --prefix "$BUILD_DIR/install" >/dev/null
cmake -S "$ROOT/examples/downstream" -B "$BUILD_DIR/downstream" -G Ninja \
  -DCMAKE_PREFIX_PATH="$BUILD_DIR/install" >/dev/null
cmake --build "$BUILD_DIR/downstream"
mpirun --allow-run-as-root --oversubscribe -np "$NP" "$BUILD_DIR/downstream/downstream"
