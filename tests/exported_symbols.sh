#!/usr/bin/env bash
# The shared library's dynamic symbol table: the public API (what include/megatron declares with
# MEGATRON_API) is exported, the internals under src/ are not.
#   exported_symbols.sh path/to/libmegatron_cpp.so
set -euo pipefail
symbols="$(nm -DC --defined-only "$1")"
fail=0
for s in 'megatron::training::pretrain(' 'megatron::datasets::DataIterator::next' \
         'megatron::comm::ProcessGroup::all_reduce(' 'megatron::models::gpt::GPTModelImpl::forward('; do
  grep -qF "$s" <<<"$symbols" || { echo "[exports] not exported: $s"; fail=1; }
done
for s in 'megatron::training::detail::Trainer::' 'megatron::training::detail::initialize_megatron(' \
         'megatron::training::crc32_update('; do
  if grep -qF "$s" <<<"$symbols"; then echo "[exports] internal but exported: $s"; fail=1; fi
done
echo "[exports] $(grep -c ' megatron::' <<<"$symbols") megatron symbols exported"
exit "$fail"
