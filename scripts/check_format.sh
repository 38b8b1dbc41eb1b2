#!/usr/bin/env bash
# Checks (or with --fix, applies) .clang-format on the project's C++ files; generated files and
# third_party/ are left as their generators wrote them. .ci/run calls it.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
# Tracked files and new ones not yet added (not the ignored: build trees, third_party/gpu-deps).
mapfile -t files < <(git ls-files --cached --others --exclude-standard '*.cpp' '*.h' '*.cu' '*.cuh' |
  grep -v -e '^third_party/' -e '^src/tokenizer/unicode_tables.cpp$')
if [[ "${1:-}" == --fix ]]; then
  clang-format -i "${files[@]}"
else
  clang-format --dry-run --Werror "${files[@]}" || { echo "[format] run scripts/check_format.sh --fix" >&2; exit 1; }
fi
