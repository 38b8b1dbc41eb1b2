#!/usr/bin/env bash
# The project's default data, built without downloads into data/ (git-ignored):
#   data/corpus/python_docs.jsonl        docstrings of this machine's Python standard library (PSF License)
#   data/tokenizer/{vocab.json,merges.txt}  byte-level BPE trained on it (train_tokenizer)
#   data/python_docs_text_document.{bin,idx}  the corpus tokenized with --append-eod
# Usage: tools/prepare_default_data.sh [BUILD_DIR] (default: build). Skips what already exists.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD_DIR="${1:-$ROOT/build}"
PYTHON="${PYTHON:-$ROOT/.venv/bin/python}"
VOCAB_SIZE="${VOCAB_SIZE:-8192}"
DATA="$ROOT/data"
# One builder at a time: test processes running side by side (pytest -n) may all ask for it.
mkdir -p "$DATA"
exec 9>"$DATA/.prepare.lock"
flock 9

[ -f "$DATA/corpus/python_docs.jsonl" ] ||
  "$PYTHON" "$ROOT/tools/make_corpus.py" --output "$DATA/corpus/python_docs.jsonl"
[ -f "$DATA/tokenizer/merges.txt" ] ||
  "$BUILD_DIR/bin/train_tokenizer" --input "$DATA/corpus/python_docs.jsonl" \
    --output-dir "$DATA/tokenizer" --vocab-size "$VOCAB_SIZE"
[ -f "$DATA/python_docs_text_document.idx" ] ||
  "$BUILD_DIR/bin/preprocess_data" --input "$DATA/corpus/python_docs.jsonl" \
    --output-prefix "$DATA/python_docs" --tokenizer-type GPT2BPETokenizer \
    --vocab-file "$DATA/tokenizer/vocab.json" --merge-file "$DATA/tokenizer/merges.txt" \
    --append-eod --workers "$(nproc)"
echo "[prepare_default_data] --data-path $DATA/python_docs_text_document" \
     "--vocab-file $DATA/tokenizer/vocab.json --merge-file $DATA/tokenizer/merges.txt"
