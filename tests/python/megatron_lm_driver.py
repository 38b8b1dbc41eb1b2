"""Megatron-LM's own code (a snapshot of its repository, MEGATRON_LM_DIR) on CPU, as a subprocess of
test_megatron_lm_checkpoints.py: it parses the flags, builds its GPT model with the local layer spec
and loads or saves a --ckpt-format torch checkpoint (torch_dist where FLAGS say so) with
megatron.training.checkpointing.

    [torchrun --nproc-per-node TP x PP] megatron_lm_driver.py load CKPT_DIR IDS OUT -- FLAGS...
                                                               load, then its logits of IDS into OUT
                                                               (with PP > 1 each rank's weights into OUT.rankR)
    megatron_lm_driver.py save CKPT_DIR IDS OUT -- FLAGS...   save at --train-iters with 8 samples
                                                               per iteration consumed, logits into OUT
    megatron_lm_driver.py save-optim CKPT_DIR IDS OUT -- ...  the same with its optimizer state after two
                                                               AdamW steps, that state by name into OUT
    megatron_lm_driver.py load-optim CKPT_DIR IDS OUT -- ...  load with its FP32Optimizer (its parameter groups
                                                               under torch's AdamW), then the optimizer state by
                                                               name and its groups' learning rates into OUT
    [torchrun --nproc-per-node DP] megatron_lm_driver.py save-distopt CKPT_DIR IDS OUT -- ...
                                                               save-optim's steps with its DistributedOptimizer
                                                               over its DDP's buffers (distrib_optim.pt beside
                                                               model_optim_rng.pt, or the torch_dist layout FLAGS
                                                               choose), the fp32 main parameters and
                                                               moments gathered over DP by name into OUT
"""
from __future__ import annotations

import contextlib
import os
import sys
import typing

if not hasattr(typing, "override"):  # Python < 3.12; Megatron-LM's hybrid model imports it
    typing.override = lambda f: f
sys.path.insert(0, os.environ["MEGATRON_LM_DIR"])
for name, value in (("RANK", "0"), ("WORLD_SIZE", "1"), ("LOCAL_RANK", "0")):
    os.environ.setdefault(name, value)

import torch  # noqa: E402
from megatron.core import parallel_state as mpu  # noqa: E402
from megatron.core import tensor_parallel  # noqa: E402
from megatron.core.models.gpt import GPTModel  # noqa: E402
from megatron.core.models.gpt.gpt_layer_specs import get_gpt_layer_local_spec  # noqa: E402
from megatron.training import arguments, checkpointing  # noqa: E402
from megatron_forward import gathered_logits  # noqa: E402


def one_rank_read_metadata(read):
    """Megatron-LM all-reduces the tracker's iteration in a CUDA tensor; this CPU job is one rank."""
    def wrapped(path):
        initialized = torch.distributed.is_initialized
        torch.distributed.is_initialized = lambda: False
        try:
            return read(path)
        finally:
            torch.distributed.is_initialized = initialized
    return wrapped


def stepped_scheduler(optimizer, args):
    """Its scheduler (cosine over the run, constant weight decay) where 8 samples an iteration put it."""
    from megatron.core.optimizer_param_scheduler import OptimizerParamScheduler
    samples = 8 * args.train_iters
    scheduler = OptimizerParamScheduler(optimizer, init_lr=0.0, max_lr=args.lr, min_lr=args.min_lr, lr_warmup_steps=0,
                                        lr_decay_steps=samples, lr_decay_style="cosine",
                                        start_wd=args.weight_decay, end_wd=args.weight_decay,
                                        wd_incr_steps=samples, wd_incr_style="constant")
    scheduler.step(samples)
    return scheduler


def adam_steps(model, args):
    """fp32_optimizer's FP32Optimizer after two steps of its AdamW on random gradients; its
    scheduler; the state by parameter name."""
    optimizer, _ = fp32_optimizer(model, args)
    adam = optimizer.optimizer
    generator = torch.Generator().manual_seed(1234 + torch.distributed.get_rank())
    for _ in range(2):
        for p in model.parameters():
            p.grad = torch.randn(p.shape, generator=generator)
        adam.step()
    scheduler = stepped_scheduler(adam, args)
    names = {p: n for n, p in model.named_parameters()}
    state = {names[p]: {k: v.clone() for k, v in adam.state[p].items()} for p in names}
    return optimizer, scheduler, state


def fp32_optimizer(model, args):
    """What its get_megatron_optimizer builds for an fp32 run without Transformer Engine and apex:
    FP32Optimizer over torch's AdamW on its own parameter groups, and its scheduler, which takes
    its settings from the checkpoint."""
    from megatron.core.optimizer import OptimizerConfig, _get_param_groups, get_standard_config_overrides
    from megatron.core.optimizer.optimizer import FP32Optimizer, MegatronOptimizer
    from megatron.core.optimizer_param_scheduler import OptimizerParamScheduler
    config = OptimizerConfig(optimizer="adam", lr=args.lr, min_lr=args.min_lr, weight_decay=args.weight_decay,
                             decoupled_lr=args.decoupled_lr, decoupled_min_lr=args.decoupled_min_lr)
    adam = torch.optim.AdamW(_get_param_groups([model], config, get_standard_config_overrides(config)), lr=args.lr,
                             weight_decay=args.weight_decay, betas=(args.adam_beta1, args.adam_beta2),
                             eps=args.adam_eps)
    def init_state_fn(opt, config=None):  # get_megatron_optimizer's, for torch's Adam (torch_dist loads call it)
        for group in opt.param_groups:
            for p in group["params"]:
                if len(opt.state[p]) == 0:
                    opt.state[p]["exp_avg"] = torch.zeros_like(p.data)
                    opt.state[p]["exp_avg_sq"] = torch.zeros_like(p.data)

    optimizer = FP32Optimizer.__new__(FP32Optimizer)  # its __init__ puts the loss scale on a GPU
    MegatronOptimizer.__init__(optimizer, adam, config, init_state_fn)
    optimizer.is_stub_optimizer = False
    scheduler = OptimizerParamScheduler(optimizer, init_lr=0.0, max_lr=args.lr, min_lr=args.min_lr, lr_warmup_steps=0,
                                        lr_decay_steps=1, lr_decay_style="cosine", start_wd=args.weight_decay,
                                        end_wd=args.weight_decay, wd_incr_steps=1, wd_incr_style="constant",
                                        use_checkpoint_opt_param_scheduler=True)
    return optimizer, scheduler


@contextlib.contextmanager
def cpu_as_cuda():
    """While its DistributedOptimizer is built, CPU tensors pass its GPU checks."""
    tensor_type, tensor = torch.Tensor.type, torch.tensor
    # It sorts parameters by param.type() == 'torch.cuda.FloatTensor' / 'torch.cuda.BFloat16Tensor'.
    torch.Tensor.type = lambda self, *a, **k: (tensor_type(self, *a, **k) if a or k
                                                else tensor_type(self).replace("torch.", "torch.cuda.", 1))
    # MixedPrecisionOptimizer.__init__ puts its unit loss scale and overflow flag on device='cuda'.
    torch.tensor = lambda *a, device=None, **k: tensor(*a, device="cpu" if device == "cuda" else device, **k)
    try:
        yield
    finally:
        torch.Tensor.type, torch.tensor = tensor_type, tensor


def distributed_adam_steps(model, config, args):
    """As its training builds them with --use-distributed-optimizer (get_model, setup_model_and_optimizer):
    Float16Module with --bf16, its DDP over contiguous buffers, get_megatron_optimizer's
    DistributedOptimizer over torch's AdamW; two steps on random gradients (seeded per rank)
    written into the DDP's gradient buffer, as its reduce-scatter leaves them, through its own
    prepare_grads and step_with_ready_grads (its step's gradient clipping needs a GPU); save-optim's
    scheduler; the fp32 main parameters and moments gathered over DP by name."""
    from megatron.core.optimizer import get_megatron_optimizer
    from megatron.core.transformer.module import Float16Module
    from megatron.training.training import (get_megatron_ddp_config, get_megatron_optimizer_config,
                                            resolve_ddp_bucket_size, wrap_model_chunks_with_ddp)
    for p in model.parameters():
        tensor_parallel.set_defaults_if_not_set_tensor_model_parallel_attributes(p)
    chunk = Float16Module(config, model) if args.fp16 or args.bf16 else model
    ddp_config = get_megatron_ddp_config(args)
    # Its buckets only with --overlap-grad-reduce (get_model: resolve_ddp_bucket_size), no CUDA stream around DDP.
    ddp_config.bucket_size = resolve_ddp_bucket_size(
        ddp_config, mpu.get_data_parallel_group(with_context_parallel=True), ddp_config.overlap_grad_reduce,
        sum(p.numel() for p in model.parameters()))
    ddp = wrap_model_chunks_with_ddp([chunk], config, ddp_config)
    opt_config, overrides = get_megatron_optimizer_config(args)
    with cpu_as_cuda():
        optimizer = get_megatron_optimizer(opt_config, ddp, overrides)
    generator = torch.Generator().manual_seed(1234 + torch.distributed.get_rank())
    for _ in range(2):
        for p in model.parameters():
            p.main_grad.copy_(torch.randn(p.shape, generator=generator))
        optimizer.prepare_grads()
        optimizer.step_with_ready_grads()  # its step, then the all-gather of the updated shards
    scheduler = stepped_scheduler(optimizer, args)
    # Each rank's shard of each parameter into a zero tensor, summed over DP.
    distopt, = optimizer.chained_optimizers
    group = mpu.get_data_parallel_group_gloo()
    state = {}
    for name, p in model.named_parameters():
        full = {k: torch.zeros(p.numel()) for k in ("param", "exp_avg", "exp_avg_sq")}
        step = torch.zeros(())
        if p in distopt.model_param_gbuf_map:
            r = distopt._get_model_param_range_map(p)["param"]
            tensors = distopt._get_main_param_and_optimizer_states(p)
            for k in full:
                full[k][r.start:r.end] = tensors[k].detach().float()
            step = tensors["step"].float()
        for k in full:
            torch.distributed.all_reduce(full[k], group=group)
            full[k] = full[k].view(p.shape)
        torch.distributed.all_reduce(step, op=torch.distributed.ReduceOp.MAX, group=group)
        state[name] = {**full, "step": step}
    return ddp, optimizer, scheduler, state


def main() -> None:
    mode, ckpt, ids, out = sys.argv[1:5]
    flags = sys.argv[sys.argv.index("--") + 1:]
    sys.argv = [sys.argv[0], "--ckpt-format", "torch", *flags, "--transformer-impl", "local",  # FLAGS may say torch_dist
                "--use-cpu-initialization", "--no-gradient-accumulation-fusion", "--no-masked-softmax-fusion",
                "--no-bias-gelu-fusion", "--no-bias-dropout-fusion", "--no-persist-layer-norm",
                "--distributed-backend", "gloo", "--tokenizer-type", "NullTokenizer", "--mock-data",
                *(["--load", ckpt] if mode.startswith("load") else ["--save", ckpt]),
                *(["--use-distributed-optimizer"] if mode == "save-distopt" else [])]
    checkpointing.read_metadata = one_rank_read_metadata(checkpointing.read_metadata)
    arguments.get_device_arch_version = lambda: 10  # asks the GPU, before its TP advice on CUDA connections
    args = arguments.parse_and_validate_args()  # with --use-checkpoint-args, load_args_from_checkpoint
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    torch.distributed.init_process_group("gloo")
    mpu.initialize_model_parallel(args.tensor_model_parallel_size, args.pipeline_model_parallel_size)
    torch.manual_seed(args.seed)
    config = arguments.core_transformer_config_from_args(args)
    # With pipeline stages its tied embedding is all-reduced between them through .cuda().
    torch.Tensor.cuda = lambda self, *a, **k: self
    # As Megatron-LM's gpt_builder builds it with --transformer-impl local.
    model = GPTModel(config=config, transformer_layer_spec=get_gpt_layer_local_spec(normalization=args.normalization),
                     vocab_size=args.padded_vocab_size, max_sequence_length=args.max_position_embeddings,
                     pre_process=mpu.is_pipeline_first_stage(), post_process=mpu.is_pipeline_last_stage(),
                     share_embeddings_and_output_weights=not args.untie_embeddings_and_output_weights,
                     position_embedding_type=args.position_embedding_type)
    result = {}
    if mode in ("load", "load-optim"):
        optimizer, scheduler = fp32_optimizer(model, args) if mode == "load-optim" else (None, None)
        result["iteration"], _ = checkpointing.load_checkpoint([model], optimizer, scheduler, strict=True)
        result["consumed_train_samples"] = args.consumed_train_samples
        if optimizer is not None:
            names = {p: n for n, p in model.named_parameters()}
            result["optimizer_state"] = {names[p]: dict(s) for p, s in optimizer.optimizer.state.items()}
            result["lrs"] = [g["lr"] for g in optimizer.param_groups]
            result["scheduler_steps"] = scheduler.num_steps
    else:
        # Megatron-LM saves the CUDA generator's state, Philox's seed and offset, which a CPU job has
        # not: the state a GPU job would have after seeding.
        seed_and_offset = torch.tensor([args.seed, 0], dtype=torch.int64).view(torch.uint8)
        torch.cuda.get_rng_state = lambda device="cuda": seed_and_offset.clone()
        args.consumed_train_samples = 8 * args.train_iters
        # Its torch_dist writer waits for the device and reports failures in a tensor placed on it.
        torch.cuda.synchronize = lambda *a, **k: None
        torch.cuda.current_device = lambda: "cpu"
        optimizer = scheduler = None
        chunks = [model]
        if mode == "save-optim":
            optimizer, scheduler, result["optimizer_state"] = adam_steps(model, args)
        elif mode == "save-distopt":  # its DDP's buffers go to the current device, the CPU above
            chunks, optimizer, scheduler, result["optimizer_state"] = distributed_adam_steps(model, config, args)
        checkpointing.save_checkpoint(args.train_iters, chunks, optimizer, scheduler, 0)
    if args.pipeline_model_parallel_size > 1:
        # A stage's forward needs the pipeline schedule: each rank writes its weights instead.
        torch.save({k: v for k, v in model.state_dict().items() if isinstance(v, torch.Tensor)},
                   f"{out}.rank{torch.distributed.get_rank()}")
        if torch.distributed.get_rank() == 0:
            torch.save(result, out)
        return
    ids = torch.load(ids)
    result["logits"] = gathered_logits(model, ids)
    result["input_ids"] = ids
    if torch.distributed.get_rank() == 0:
        torch.save(result, out)


if __name__ == "__main__":
    main()
    # Every rank done before gloo's threads go: without it a rank at times aborts as it exits.
    torch.distributed.barrier()
    torch.distributed.destroy_process_group()
