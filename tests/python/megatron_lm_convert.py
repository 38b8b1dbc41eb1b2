"""Megatron-LM's own tools/checkpoint/convert.py (loader "core", saver "core"), from a snapshot of its
repository (MEGATRON_LM_DIR), run on CPU by test_megatron_lm_checkpoints.py:

    megatron_lm_convert.py [convert.py flags...]

Its code is not changed; what it needs to run here is patched in from outside, each for the reason
given: the CPU-only machine (no GPU, apex or Transformer Engine, Python 3.11), and four places
where the snapshot's converter lags its own library (upstream, not about the checkpoint read).
Exits non-zero if its saver process failed (convert.py itself exits 0 then).
"""
from __future__ import annotations

import os
import sys
import types
import typing

if not hasattr(typing, "override"):  # Python < 3.12; Megatron-LM's hybrid model imports it
    typing.override = lambda f: f
MEGATRON_LM = os.environ["MEGATRON_LM_DIR"]
sys.path[:0] = [MEGATRON_LM, os.path.join(MEGATRON_LM, "tools", "checkpoint")]

import loader_base  # noqa: E402
import loader_core  # noqa: E402
import saver_base  # noqa: E402
import torch  # noqa: E402
from megatron.training import arguments, checkpointing  # noqa: E402
from utils import _ConverterFakeProcessGroup  # noqa: E402

# Upstream (Megatron-LM issue #2845): the GPT loader keeps partial(model_provider, gpt_builder) but
# returns the bare model_provider, which is then called without its builder.
_import_model_provider = loader_core.MegatronCheckpointLoaderLLM.import_model_provider


def import_gpt_model_provider(self):
    _import_model_provider(self)
    return self.model_provider


loader_core.MegatronCheckpointLoaderLLM.import_model_provider = import_gpt_model_provider

# Upstream: GPTModel asks for every data-parallel group, the newer *_WITH_GTP_REMAT ones included,
# of which the converters fake only some; the rest as size-1 groups, as the converters fake theirs.
DATA_PARALLEL_GROUPS = ["_DATA_PARALLEL_GROUP", "_DATA_PARALLEL_GROUP_WITH_CP",
                        "_INTRA_PARTIAL_DATA_PARALLEL_GROUP_WITH_CP", "_DATA_PARALLEL_GROUP_WITH_GTP_REMAT",
                        "_DATA_PARALLEL_GROUP_WITH_CP_WITH_GTP_REMAT",
                        "_INTRA_PARTIAL_DATA_PARALLEL_GROUP_WITH_CP_WITH_GTP_REMAT",
                        "_EXPERT_DATA_PARALLEL_GROUP_WITH_GTP_REMAT"]


def with_data_parallel_groups(initialize):
    def wrapped(self):
        initialize(self)
        from megatron.core import parallel_state
        for name in DATA_PARALLEL_GROUPS:
            if getattr(parallel_state, name) is None:
                setattr(parallel_state, name, _ConverterFakeProcessGroup(size=1))
    return wrapped


# Upstream: with local layers the converters turn persist_layer_norm off only for RMSNorm, while
# the local LayerNorm refuses it too. The machine: without apex, no gradient-accumulation fusion.
def with_local_norm(parse):
    def wrapped(self):
        parse(self)
        if self.margs.transformer_impl == "local":
            self.margs.no_persist_layer_norm = True
        self.margs.gradient_accumulation_fusion = False
    return wrapped


for cls in (loader_base.MegatronCheckpointLoaderBase, saver_base.MegatronCheckpointSaverBase):
    cls.initialize_megatron_env = with_data_parallel_groups(cls.initialize_megatron_env)
    cls.parse_megatron_args = with_local_norm(cls.parse_megatron_args)


# Upstream: a tensor-parallel source needs torch.distributed initialized (the layers take their TP
# size from it), which the saver does for itself and the loader does not: one rank, in memory.
def with_one_rank_world(initialize):
    def wrapped(self):
        if not torch.distributed.is_initialized():
            torch.distributed.init_process_group("gloo", store=torch.distributed.HashStore(), rank=0, world_size=1)
        initialize(self)
    return wrapped


loader_base.MegatronCheckpointLoaderBase.initialize_megatron_env = \
    with_one_rank_world(loader_base.MegatronCheckpointLoaderBase.initialize_megatron_env)


# The machine: the saver checks Transformer Engine's version even for local layers; its path setup stays.
def insert_megatron_path(self):
    sys.path.append(os.path.abspath(os.path.join(os.path.dirname(saver_base.__file__), os.pardir, os.pardir)))
    if self.args.megatron_path is not None:
        sys.path.insert(0, self.args.megatron_path)


saver_base.MegatronCheckpointSaverBase.insert_megatron_path_and_check_te = insert_megatron_path
# The machine: the CUDA generator's state a seeded GPU job has (the saver writes none, --no-save-rng),
# the GPU generation its TP advice asks for, and the tracker read as one rank (it all-reduces the
# iteration in a CUDA tensor), as megatron_lm_driver.py answers them.
torch.cuda.get_rng_state = lambda device="cuda": torch.tensor([1234, 0], dtype=torch.int64).view(torch.uint8)
arguments.get_device_arch_version = lambda: 10
_read_metadata = checkpointing.read_metadata


def read_metadata_as_one_rank(*args, **kwargs):
    initialized = torch.distributed.is_initialized
    torch.distributed.is_initialized = lambda: False
    try:
        return _read_metadata(*args, **kwargs)
    finally:
        torch.distributed.is_initialized = initialized


checkpointing.read_metadata = read_metadata_as_one_rank

import convert  # noqa: E402

# Its processes, to see the saver's exit code.
processes = []


class Process(convert.mp.Process):
    def start(self):
        processes.append(self)
        return super().start()


convert.mp = types.SimpleNamespace(Queue=convert.mp.Queue, Process=Process)

if __name__ == "__main__":
    sys.argv = ["convert.py", *sys.argv[1:]]
    convert.main()
    failed = [p.exitcode for p in processes if p.exitcode != 0]
    if failed:
        sys.exit(f"convert.py's saver failed with exit code {failed[0]}")
