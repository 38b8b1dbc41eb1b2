"""pytest setup for tests/python: the megatron_cpp package of the build tree ($MEGATRON_BUILD_DIR,
default build/) comes first on sys.path, ahead of any pip-installed copy; torch's CPU math
kernels are settled before the tests use them on several threads."""
import os
import sys

import torch

BUILD_DIR = os.environ.get("MEGATRON_BUILD_DIR", os.path.join(os.path.dirname(__file__), "..", "..", "build"))
sys.path.insert(0, os.path.join(BUILD_DIR, "python"))

# torch sends float/double exp, log, tanh, ... on CPU to MKL's vector math library, whose kernel
# choice races on a function's first multi-threaded call (pytorch/pytorch#188792): the references
# computed here settle it on one element first, as the library does.
for _dtype in (torch.float32, torch.float64):
    _x = torch.full((1,), 0.5, dtype=_dtype)
    for _f in (torch.acos, torch.asin, torch.atan, torch.cos, torch.erf, torch.erfc, torch.erfinv, torch.exp,
               torch.log, torch.log10, torch.log2, torch.sin, torch.sqrt, torch.tan, torch.tanh, torch.trunc):
        _f(_x)
