#!/usr/bin/env bash
# Builds on a machine that has only PyTorch's Python wheel (torch 2.11.0+cu130), nvcc, CMake and
# Ninja: no Debian packages and no network. LibTorch comes from that Python's torch; spdlog, fmt,
# CLI11 and GoogleTest from third_party/gpu-deps (scripts/pack_gpu_deps.sh fills it on a machine
# with the packages). There is no MPI: launch torchrun-style (RANK, WORLD_SIZE, LOCAL_RANK,
# MASTER_ADDR, MASTER_PORT); collectives on CUDA tensors go through NCCL.
#   PYTHON=python3 BUILD_DIR=build-gpu [BUILD_TARGETS="pretrain_gpt gpu_test"] bash scripts/build_gpu.sh
set -euo pipefail
cd "$(dirname "$0")/.."
python="${PYTHON:-python3}"
build="${BUILD_DIR:-build-gpu}"
[[ -d third_party/gpu-deps ]] || { echo "build_gpu: third_party/gpu-deps is missing; run scripts/pack_gpu_deps.sh where the Debian packages are" >&2; exit 1; }
"$python" -c "import torch; print('build_gpu: torch', torch.__version__, 'CUDA', torch.version.cuda)"
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DMEGATRON_PYTHON_EXECUTABLE="$(command -v "$python")" \
  -DMEGATRON_DEPS_DIR="$PWD/third_party/gpu-deps" \
  -DMEGATRON_WITH_MPI=OFF -DMEGATRON_WITH_CUDA=ON -DMEGATRON_REQUIRE_NCCL=ON ${CMAKE_ARGS:-}
cmake --build "$build" ${BUILD_TARGETS:+--target $BUILD_TARGETS}
