"""megatron-core's optimizers (the package pinned from PyPI, CPU, gloo) over one of our torch_dist
checkpoints, as a subprocess of test_torch_dist_optimizer.py:

    torchrun --nproc-per-node TP megatron_core_optimizer.py LOAD_DIR SAVE_DIR OUT MODEL_JSON [bf16] [distributed]

Loads the iteration folder LOAD_DIR as Megatron-LM's load_checkpoint does: its GPTModel's and its
optimizer's sharded_state_dict (the layout named by the checkpoint's content_metadata),
dist_checkpointing.load, then each one's load_state_dict; and saves both into SAVE_DIR as its
save_checkpoint does (dist_checkpointing.save), the rest of the common state carried over. With
`distributed`, it saves SAVE_DIR in the layout loaded and, beside it (the checkpoint folder's name
with "_dp"), in its default bucket layout, dp_reshardable.
The optimizer: torch's AdamW (megatron-core's without Transformer Engine or Apex) under its
FP32Optimizer or Float16OptimizerWithFloat16Params over its _get_param_groups, each constructed as
its __init__ does but for the CUDA checks; with `distributed`, get_megatron_optimizer's own
DistributedOptimizer over its DistributedDataParallel, with CUDA's device, stream and tensor-type
names answered for the CPU. OUT.<rank>: without `distributed`, this rank's optimizer state by
parameter name and its groups.
"""
from __future__ import annotations

import json
import os
import sys

import torch
from megatron_core_driver import build_model

from megatron.core import dist_checkpointing
import megatron.core.optimizer as optimizer_package
from megatron.core.distributed import DistributedDataParallel, DistributedDataParallelConfig
from megatron.core.optimizer import OptimizerConfig, _get_param_groups, get_megatron_optimizer
from megatron.core.optimizer import distrib_optimizer as distrib_optimizer_module
from megatron.core.optimizer import optimizer as optimizer_module
from megatron.core.optimizer.optimizer import Float16OptimizerWithFloat16Params, FP32Optimizer, MegatronOptimizer

torch.cuda.synchronize = lambda *a, **k: None  # its writer's and buffers' calls on a CPU run
torch.cuda.current_device = lambda: "cpu"


def init_state_fn(opt, config=None):
    """megatron-core's, for torch's Adam: zero moments where a parameter has none yet."""
    for group in opt.param_groups:
        for p in group["params"]:
            if len(opt.state[p]) == 0:
                opt.state[p]["exp_avg"] = torch.zeros_like(p.data)
                opt.state[p]["exp_avg_sq"] = torch.zeros_like(p.data)


class CpuFloat16Optimizer(Float16OptimizerWithFloat16Params):
    """Its __init__ without the CUDA tensor-type checks and CUDA scalars (a CPU run): the 16-bit
    parameters' fp32 copies take their place in the inner optimizer, as its __init__ does. The
    state-dict methods under test are its own."""

    def __init__(self, optimizer, config):
        MegatronOptimizer.__init__(self, optimizer, config, init_state_fn)
        self.grad_scaler = None
        self.float16_groups, self.fp32_from_float16_groups, self.fp32_from_fp32_groups = [], [], []
        for group in self.optimizer.param_groups:
            halves, masters, fp32s = [], [], []
            for i, param in enumerate(group["params"]):
                if param.dtype == torch.bfloat16:
                    main = param.detach().clone().float()
                    group["params"][i] = main
                    param.main_param = main
                    halves.append(param)
                    masters.append(main)
                else:
                    fp32s.append(param)
            self.float16_groups.append(halves)
            self.fp32_from_float16_groups.append(masters)
            self.fp32_from_fp32_groups.append(fp32s)
        self.is_stub_optimizer = False


class CpuFP32Optimizer(FP32Optimizer):
    """Its __init__ but the CUDA loss-scale scalar."""

    def __init__(self, optimizer, config):
        MegatronOptimizer.__init__(self, optimizer, config, init_state_fn)
        self._scale = torch.ones(1)
        self.is_stub_optimizer = False


class CpuTorch:
    """torch for megatron-core's optimizer modules, its CUDA scalars made on the CPU."""

    def __getattr__(self, name):
        return getattr(torch, name)

    @staticmethod
    def tensor(*args, device=None, **kwargs):
        return torch.tensor(*args, **kwargs)


class FusedAdamStandIn(torch.optim.AdamW):
    """Transformer Engine's FusedAdam as a checkpoint sees it: moments per parameter, the step in
    its groups (torch's AdamW keeps a step per parameter)."""

    def __init__(self, params, adam_w_mode: bool = True, **kwargs):
        super().__init__(params, **kwargs)

    def __setstate__(self, state):
        torch.optim.Optimizer.__setstate__(self, state)


def distributed_optimizer(model, config: OptimizerConfig):
    """get_megatron_optimizer's DistributedOptimizer (in its ChainedOptimizer) over its DDP, its
    state allocated as after a step (a fresh one has none to take the loaded state's shape from).
    A stand-in for Transformer Engine's FusedAdam, which Megatron-LM runs with: megatron-core's
    path for torch's AdamW copies a per-parameter step into this layout's tensors, which it never
    saved."""
    optimizer_module.torch = distrib_optimizer_module.torch = CpuTorch()
    distrib_optimizer_module.HAVE_APEX_OR_TE = distrib_optimizer_module.USING_TE_OPTIMIZER = True
    optimizer_package.USING_PYTORCH_OPTIMIZER, optimizer_package.Adam = False, FusedAdamStandIn
    cpu_type = torch.Tensor.type
    torch.Tensor.type = lambda t, *a, **k: cpu_type(t, *a, **k) if a or k else cpu_type(t).replace("torch.", "torch.cuda.", 1)
    ddp = DistributedDataParallel(model.config, DistributedDataParallelConfig(use_distributed_optimizer=True), model)
    chained = get_megatron_optimizer(config, [ddp])
    torch.Tensor.type = cpu_type
    for sub in chained.chained_optimizers:
        for group in sub.optimizer.param_groups:
            for p in group["params"]:
                sub.optimizer.state[p] = {"exp_avg": torch.zeros_like(p), "exp_avg_sq": torch.zeros_like(p)}
    return chained


def state_by_name(model, optimizer) -> dict:
    """The inner optimizer's state and groups, by the model's parameter names (fp32 copies as fp32_param)."""
    names = {id(p): n for n, p in model.named_parameters()}
    model_param_of = {id(m): h for halves, masters in zip(getattr(optimizer, "float16_groups", []),
                                                           getattr(optimizer, "fp32_from_float16_groups", []))
                      for h, m in zip(halves, masters)}
    inner = optimizer.optimizer
    mine = {"groups": [{k: v for k, v in g.items() if k != "params"} for g in inner.param_groups], "state": {}}
    for group in inner.param_groups:
        for p in group["params"]:
            model_param = model_param_of.get(id(p), p)
            entry = {k: v.clone() for k, v in inner.state[p].items()}
            if model_param is not p:
                entry["fp32_param"] = p.detach().clone()
            mine["state"][names[id(model_param)]] = entry
    return mine


def main() -> None:
    load_dir, save_dir, out, model_json = sys.argv[1:5]
    bf16, distributed = "bf16" in sys.argv[5:], "distributed" in sys.argv[5:]
    spec = json.loads(open(model_json).read())
    model = build_model(spec, **({"bf16": True, "params_dtype": torch.bfloat16} if bf16 else {}))
    if bf16:  # Megatron-LM's Float16Module casts the whole model, its local norms included
        model.bfloat16()
    config = OptimizerConfig(optimizer="adam", lr=2e-3, min_lr=2e-4, weight_decay=0.01, bf16=bf16,
                             use_distributed_optimizer=distributed)
    if distributed:
        optimizer = distributed_optimizer(model, config)
    else:
        adam = torch.optim.AdamW(_get_param_groups([model], config, None), lr=config.lr,
                                 weight_decay=config.weight_decay, betas=(config.adam_beta1, config.adam_beta2),
                                 eps=config.adam_eps)
        optimizer = CpuFloat16Optimizer(adam, config) if bf16 else CpuFP32Optimizer(adam, config)

    # load_checkpoint: the layout the checkpoint names, the sharded state dicts, their tensors, the
    # common state merged, then each one's load_state_dict.
    common = dist_checkpointing.load_common_state_dict(load_dir)
    metadata = dist_checkpointing.load_content_metadata(preloaded_state_dict=common) or {}
    model_sd = model.sharded_state_dict()
    state = dist_checkpointing.load(
        {"model": model_sd, "optimizer": optimizer.sharded_state_dict(model_sd, True, metadata=metadata)}, load_dir)
    model.load_state_dict(state["model"], strict=True)
    optimizer.load_state_dict(state["optimizer"])
    if not distributed:
        torch.save(state_by_name(model, optimizer), f"{out}.{torch.distributed.get_rank()}")

    # save_checkpoint: the same sharded state dicts, and the common state it keeps beside them.
    carried = {k: v for k, v in common.items() if k not in ("model", "optimizer", "content_metadata")}

    def save(folder: str, layout: dict) -> None:
        model_sd = model.sharded_state_dict()
        os.makedirs(folder, exist_ok=True)
        dist_checkpointing.save({**carried, "model": model_sd,
                                 "optimizer": optimizer.sharded_state_dict(model_sd, metadata=layout)},
                                folder, content_metadata=layout)
        if torch.distributed.get_rank() == 0:
            with open(os.path.join(os.path.dirname(folder), "latest_checkpointed_iteration.txt"), "w") as f:
                f.write(str(common["iteration"]))

    if not distributed:
        save(save_dir, metadata)
        return
    # --distrib-optim-fully-reshardable-mem-efficient: its gather over gloo, not NCCL.
    save(save_dir, {**metadata, "distrib_optim_fully_reshardable_mem_efficient": True})
    save(os.path.join(os.path.dirname(save_dir) + "_dp", os.path.basename(save_dir)),
         {**metadata, "distrib_optim_sharding_type": "dp_reshardable"})


if __name__ == "__main__":
    main()
    torch.distributed.barrier()
    torch.distributed.destroy_process_group()
