"""pytest setup for tests/python: the megatron_cpp package of the build tree ($MEGATRON_BUILD_DIR,
default build/) comes first on sys.path, ahead of any pip-installed copy; torch's CPU math
kernels are settled before the tests use them on several threads."""
import os
import sys

BUILD_DIR = os.environ.get("MEGATRON_BUILD_DIR", os.path.join(os.path.dirname(__file__), "..", "..", "build"))
sys.path.insert(0, os.path.join(BUILD_DIR, "python"))


# Its import settles torch's CPU math kernels (warm_up_cpu_math) before any test or torch
# reference here runs them on several threads.
import megatron_cpp  # noqa: E402,F401

# Our checkpoints keep their args as an argparse.Namespace, as Megatron-LM's do (its
# megatron.core.safe_globals registers the same class for torch.load(weights_only=True)).
import argparse  # noqa: E402

import torch  # noqa: E402

torch.serialization.add_safe_globals([argparse.Namespace])
