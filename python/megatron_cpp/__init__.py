"""megatron-cpp: Megatron-style GPT pretraining on LibTorch, from Python.

Built by CMake (MEGATRON_WITH_PYTHON, on when the venv's Python headers exist) into
build/python/megatron_cpp; it uses the LibTorch of the venv it was built against.
"""
from ._C import (  # noqa: F401
    Launcher,
    LauncherEnv,
    __version__,
    init_logging,
    rank_layout,
    torch_version,
)
