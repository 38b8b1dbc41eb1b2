#!/usr/bin/env bash
# Generates the megatron_cpp package's type stubs (python/megatron_cpp/**/*.pyi) from the built
# module with pybind11-stubgen; tests/python/test_stubs.py checks the checked-in ones are current.
#   generate_python_stubs.sh [OUT_DIR]   (default: python/, i.e. the checked-in stubs)
#   MEGATRON_BUILD_DIR  the build whose python/ holds the module (default: build)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
OUT="${1:-$ROOT/python}"
BUILD_DIR="${MEGATRON_BUILD_DIR:-$ROOT/build}"
PYTHONPATH="$BUILD_DIR/python${PYTHONPATH:+:$PYTHONPATH}" "$ROOT/.venv/bin/pybind11-stubgen" megatron_cpp \
  --output-dir "$OUT" --exit-code \
  --enum-class-locations "ReduceOp:megatron_cpp._C" \
  --enum-class-locations "DType:megatron_cpp._C" \
  --enum-class-locations "Split:megatron_cpp._C" >/dev/null
# The generator lists a module's imports in no fixed order: sort each file's import block.
"$ROOT/.venv/bin/python" - "$OUT"/megatron_cpp <<'PY'
import pathlib, sys
for path in sorted(pathlib.Path(sys.argv[1]).rglob("*.pyi")):
    lines = open(path).read().split("\n")
    start = next(i for i, l in enumerate(lines) if l.startswith(("import ", "from ")))
    end = start
    while end < len(lines) and lines[end].startswith(("import ", "from ")):
        end += 1
    block = sorted(lines[start:end], key=lambda l: (not l.startswith("from __future__"), l))
    open(path, "w").write("\n".join(lines[:start] + block + lines[end:]))
PY
