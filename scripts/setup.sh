#!/usr/bin/env bash
# Installs everything the build needs: Debian packages and the Python venv with LibTorch.
# Idempotent: a second run only checks, and returns in a second or two.
#
# Environment:
#   MEGATRON_VENV   where the venv lives (default: ~/.cache/megatron-cpp/venv).
#                   The tree's .venv is a link to it, so fresh clones reuse one LibTorch.
#   MEGATRON_SKIP_APT=1  do not touch system packages (machines without apt or root).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
TORCH_VERSION="2.11.0"
VENV="${MEGATRON_VENV:-$HOME/.cache/megatron-cpp/venv}"

log() { printf '[setup] %s\n' "$*"; }

# --- Debian packages -------------------------------------------------------
APT_PACKAGES=(
  build-essential cmake ninja-build ccache git pkg-config
  python3 python3-venv python3-dev
  openmpi-bin libopenmpi-dev
  libspdlog-dev libfmt-dev libcli11-dev nlohmann-json3-dev libtomlplusplus-dev libonig-dev libutf8proc-dev
  libgloo-dev
  libgtest-dev libgmock-dev
)

missing_packages() {
  local p
  for p in "${APT_PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || echo "$p"
  done
}

if [[ "${MEGATRON_SKIP_APT:-0}" != 1 ]] && command -v dpkg-query >/dev/null; then
  mapfile -t missing < <(missing_packages)
  if ((${#missing[@]})); then
    log "installing Debian packages: ${missing[*]}"
    SUDO=""
    [[ $(id -u) -ne 0 ]] && SUDO="sudo"
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
  fi
fi

# --- Python venv with LibTorch ---------------------------------------------
# Python packages besides torch: the tests' independent references (numpy, HF tokenizers, tiktoken,
# sentencepiece, transformers and safetensors for the Hugging Face export), scikit-build-core for
# `pip install --no-build-isolation .` of the Python package, and pybind11-stubgen for its type
# stubs (scripts/generate_python_stubs.sh; pinned, since its output is checked in); deepspeed only
# for its launcher, which the launch tests run (nothing of it is linked); tensorboard for its
# event-file reader, which reads what --tensorboard-dir writes; nltk for the punkt sentence
# splitter that --split-sentences reproduces (pinned: its versions split differently);
# megatron-core for its datasets and GPT model, which test_megatron_core.py checks ours against
# (pinned: 0.16.1 is the newest that installs on Python 3.11); pytest-xdist runs the Python tests
# on every core (scripts/test.sh).
PY_PACKAGES=(numpy pytest pytest-xdist tokenizers tiktoken sentencepiece matplotlib transformers safetensors scikit-build-core pybind11-stubgen==2.5.5 deepspeed
  tensorboard nltk==3.10.4 megatron-core==0.16.1)

venv_ready() {
  [[ -x "$VENV/bin/python" ]] &&
    "$VENV/bin/python" - "$TORCH_VERSION" "${PY_PACKAGES[@]}" <<'PY' 2>/dev/null
import importlib.metadata as m, sys
want = sys.argv[1]
assert m.version("torch").split("+")[0] == want
for spec in sys.argv[2:]:
    name, _, want_version = spec.partition("==")
    installed = m.version(name)  # raises when missing
    assert not want_version or installed == want_version
PY
}

if ! venv_ready; then
  # The system python may lack ensurepip; pyenv's or Debian's python3-venv provide it.
  PYTHON="${MEGATRON_PYTHON:-$(command -v python3)}"
  log "installing torch==${TORCH_VERSION} ${PY_PACKAGES[*]} into $VENV (LibTorch is ~2.7 GB; pip caches it)"
  mkdir -p "$(dirname "$VENV")"
  [[ -x "$VENV/bin/python" ]] || "$PYTHON" -m venv "$VENV"
  "$VENV/bin/python" -m pip install -q --upgrade pip
  "$VENV/bin/python" -m pip install -q "torch==${TORCH_VERSION}" "${PY_PACKAGES[@]}"
  venv_ready || { log "error: venv at $VENV does not have torch==${TORCH_VERSION} after install"; exit 1; }
fi

# The tree sees the venv as .venv (git-ignored); CMake looks for LibTorch there.
if [[ "$(readlink -f "$ROOT/.venv" 2>/dev/null)" != "$(readlink -f "$VENV")" ]]; then
  if [[ -e "$ROOT/.venv" && ! -L "$ROOT/.venv" ]]; then
    log "error: $ROOT/.venv is a directory, not the venv at $VENV; remove it, or set MEGATRON_VENV=$ROOT/.venv"
    exit 1
  else
    ln -sfn "$VENV" "$ROOT/.venv"
  fi
fi

log "ready: $("$ROOT/.venv/bin/python" -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda)')"
