#!/usr/bin/env bash
# Fuzzes every target of tests/fuzz with libFuzzer under ASan + UBSan (clang; Debian's clang and
# libclang-rt-dev), one per core, starting from the checked-in corpora, for SECONDS each (default 30; CI runs 10;
# a long run is `bash scripts/fuzz.sh 600`). New inputs and crash reproducers go to
# build-fuzz/findings/<target>/; the summary gives each target's executions and crashes. The seed
# is fixed (FUZZ_SEED, default 1) so that a run can be repeated; FUZZ_SEED=0 draws one.
#   scripts/fuzz.sh [SECONDS] [TARGET...]      BUILD_DIR default build-fuzz
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD_DIR="${BUILD_DIR:-$ROOT/build-fuzz}"
SECONDS_PER_TARGET="${1:-30}"
shift || true
targets=("$@")
[[ ${#targets[@]} -gt 0 ]] ||
  mapfile -t targets < <(sed -n 's/^set(MEGATRON_FUZZ_TARGETS \(.*\))$/\1/p' "$ROOT/tests/fuzz/CMakeLists.txt" | tr ' ' '\n')
BUILD_DIR="$BUILD_DIR" bash "$ROOT/scripts/sanitized_build.sh" "${targets[@]/#/fuzz_}"

# Leaks are not checked: LibTorch keeps process-lifetime singletons that LeakSanitizer would report.
export ASAN_OPTIONS="detect_leaks=0:halt_on_error=1${ASAN_OPTIONS:+:$ASAN_OPTIONS}"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1${UBSAN_OPTIONS:+:$UBSAN_OPTIONS}"
# One fuzzer per core (each is one process on one core), then the summary in the targets' order.
fuzz_one() {
  local target="$1" findings="$BUILD_DIR/findings/$1" length=() rc=0
  mkdir -p "$findings/corpus"
  # Text formats get inputs long enough to nest past the readers' depth bound (src/input_files.h)
  # many times over; the others keep libFuzzer's choice from their corpus.
  case "$target" in
    config_toml | deepspeed_json | hf_tokenizer | tiktoken | gpt2_tokenizer | safetensors) length=(-max_len=65536) ;;
  esac
  # -timeout: an input that takes 30 s is a hang; -rss_limit_mb: one that needs 8 GB is a finding.
  "$BUILD_DIR/bin/fuzz_$target" -max_total_time="$SECONDS_PER_TARGET" -seed="${FUZZ_SEED:-1}" -timeout=30 "${length[@]}" \
    -rss_limit_mb=8192 -malloc_limit_mb=8192 -print_final_stats=1 -artifact_prefix="$findings/" \
    "$findings/corpus" "$ROOT/tests/fuzz/corpus/$target" >"$findings/fuzz.log" 2>&1 || rc=$?
  echo "$rc" >"$findings/fuzz.rc"
}
for target in "${targets[@]}"; do
  while (($(jobs -rp | wc -l) >= $(nproc))); do wait -n || true; done
  fuzz_one "$target" &
done
wait
failed=0
summary=""
for target in "${targets[@]}"; do
  findings="$BUILD_DIR/findings/$target"
  log="$findings/fuzz.log"
  if [[ "$(cat "$findings/fuzz.rc")" == 0 ]]; then
    result="ok"
  else
    result="FAILED (see $log)"
    failed=1
  fi
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  summary+="$(printf '%-16s %10s executions  %s' "$target" "${runs:-?}" "$result")"$'\n'
done
printf 'fuzz: %s s per target\n%s' "$SECONDS_PER_TARGET" "$summary"
exit "$failed"
