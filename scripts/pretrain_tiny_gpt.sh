#!/usr/bin/env bash
# The main job: set up and build if needed, build the default data (corpus -> BPE tokenizer ->
# .bin/.idx, no downloads), then train a tiny GPT on 2 ranks under mpirun, evaluating on the
# validation and test splits. Metrics go to build/runs/gpt2-tiny/metrics.jsonl.
#   NP=2 (ranks), EXTRA_ARGS="--tensor-model-parallel-size 2" (more pretrain_gpt flags)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD_DIR="${BUILD_DIR:-$ROOT/build}"
NP="${NP:-2}"
RUN_DIR="$BUILD_DIR/runs/gpt2-tiny"

bash "$ROOT/scripts/build.sh"
bash "$ROOT/tools/prepare_default_data.sh" "$BUILD_DIR"

mkdir -p "$RUN_DIR"
# shellcheck disable=SC2086
mpirun --allow-run-as-root --oversubscribe --bind-to none -np "$NP" \
  "$BUILD_DIR/bin/pretrain_gpt" --config "$ROOT/configs/gpt2-tiny.toml" \
  --data-path "$ROOT/data/python_docs_text_document" \
  --tokenizer-type GPT2BPETokenizer \
  --vocab-file "$ROOT/data/tokenizer/vocab.json" --merge-file "$ROOT/data/tokenizer/merges.txt" \
  --data-cache-path "$RUN_DIR/index-cache" \
  --metrics-file "$RUN_DIR/metrics.jsonl" ${EXTRA_ARGS:-}

"$ROOT/.venv/bin/python" "$ROOT/scripts/plot_loss.py" "$RUN_DIR/metrics.jsonl" --output "$RUN_DIR/loss.png" --summary
