"""Reference launch scripts as their users run them: each script's flags, exactly as written, pass
`pretrain_gpt --check-args` at the script's world size, and the same flags with only sizes and
paths scaled down train under mpirun. A flag set that would not start is refused with exit 2 and
a line naming each flag."""
import collections
import gzip
import json
import os
import subprocess

import pytest

import megatron_cpp
from data_helpers import MPIRUN, check_args, program
from test_pretrain_gpt import default_data  # noqa: F401  (the fixture)

# The scripts' command lines with their shell variables expanded to the scripts' own values and
# their positional paths to placeholders. Taken from NVIDIA/Megatron-LM 157006d
# (examples/gpt3/train_gpt3_175b_distributed.sh, examples/llama/train_llama3_8b_h100_fp8.sh, mock
# branch) and microsoft/DeepSpeedExamples 9490126 (training/DeepSpeed-Domino/pretrain_*.sh).
DATA = ["--data-path", "dataset/my-gpt2_text_document", "--vocab-file", "dataset/gpt2-vocab.json",
        "--merge-file", "dataset/gpt2-merges.txt", "--split", "949,50,1"]
GPT3_175B = (
    "--num-layers 96 --hidden-size 12288 --num-attention-heads 96 --seq-length 2048 "
    "--max-position-embeddings 2048 --attention-backend auto "
    "--micro-batch-size 1 --global-batch-size 1536 --rampup-batch-size 16 16 5859375 --train-iters 500000 "
    "--weight-decay 0.1 --adam-beta1 0.9 --adam-beta2 0.95 --init-method-std 0.006 --clip-grad 1.0 --fp16 "
    "--lr 6.0e-5 --lr-decay-style cosine --min-lr 6.0e-6 --lr-warmup-fraction .001 --lr-decay-iters 430000 "
    "--tensor-model-parallel-size 8 --pipeline-model-parallel-size 16").split() + DATA + (
    "--log-interval 100 --save-interval 10000 --eval-interval 1000 --save checkpoints/gpt3 "
    "--load checkpoints/gpt3 --eval-iters 10 --tensorboard-dir tensorboard/gpt3").split()
DOMINO_COMMON = ("--lr 0.00015 --lr-decay-iters 320000 --lr-decay-style cosine --min-lr 1.0e-5 "
                 "--weight-decay 1e-2 --lr-warmup-fraction .01 --clip-grad 1.0").split()
DOMINO_GPT3_2_7B = (
    "--num-layers 12 --hidden-size 2560 --num-attention-heads 32 --seq-length 512 --max-position-embeddings 512 "
    "--micro-batch-size 64 --global-batch-size 64").split() + DOMINO_COMMON + (
    "--train-iters 10 --fp16 --tensor-model-parallel-size 2 --seed 3407").split() + DATA + ["--log-interval", "1"]
DOMINO_GPT3_6_7B = (
    "--num-layers 32 --hidden-size 4096 --num-attention-heads 32 --seq-length 2048 --max-position-embeddings 2048 "
    "--micro-batch-size 8 --global-batch-size 8 --train-iters 80").split() + DOMINO_COMMON + (
    "--no-gradient-accumulation-fusion --fp16 --tensor-model-parallel-size 2").split() + DATA + ["--log-interval", "1"]
DOMINO_LLAMA_7B = (
    "--num-layers 32 --hidden-size 4096 --num-attention-heads 32 --seq-length 1024 --max-position-embeddings 1024 "
    "--position-embedding-type rope --swiglu --ffn-hidden-size 11008 --normalization RMSNorm "
    "--layernorm-epsilon 1e-6 --micro-batch-size 16 --global-batch-size 16 --train-iters 80").split() + (
    DOMINO_COMMON + "--fp16 --tensor-model-parallel-size 2 --seed 3407".split() + DATA +
    "--log-interval 1 --save-interval 10000 --eval-interval 1000 --eval-iters 1".split())
DOMINO_LLAMA_13B = (
    "--llama-model --num-layers 2 --hidden-size 4096 --num-attention-heads 32 --seq-length 1024 "
    "--max-position-embeddings 1024 --position-embedding-type rope --swiglu --ffn-hidden-size 11008 "
    "--disable-bias-linear --normalization RMSNorm --layernorm-epsilon 1e-6 --micro-batch-size 8 "
    "--global-batch-size 8 --train-iters 100").split() + DOMINO_COMMON + (
    "--no-gradient-accumulation-fusion --fp16 --tensor-model-parallel-size 2 --seed 3407 --causal-lm").split() + (
    DATA + "--log-interval 1 --save-interval 10000 --eval-interval 1000 --eval-iters 1".split())
LLAMA3_8B_FP8 = (
    "--use-mcore-models --num-layers 32 --hidden-size 4096 --ffn-hidden-size 14336 --num-attention-heads 32 "
    "--group-query-attention --num-query-groups 8 --kv-channels 128 --seq-length 8192 "
    "--max-position-embeddings 8192 --position-embedding-type rope --rotary-base 1000000 --rotary-percent 1.0 "
    "--attention-dropout 0.0 --hidden-dropout 0.0 --swiglu --init-method-std 0.0134 --attention-backend fused "
    "--apply-layernorm-1p --untie-embeddings-and-output-weights --disable-bias-linear "
    "--micro-batch-size 1 --global-batch-size 128 --train-samples 1953125000 --lr-decay-samples 1949218748 "
    "--lr-warmup-samples 3906252 --lr 0.00015 --min-lr 0.00001 --decoupled-lr 5.0e-4 --decoupled-min-lr 4.5e-5 "
    "--lr-decay-style cosine --clip-grad 1.0 --weight-decay 0.1 --adam-beta1 0.9 --adam-beta2 0.95 --bf16 "
    "--grad-reduce-in-bf16 --cross-entropy-loss-fusion --calculate-per-token-loss --manual-gc "
    "--empty-unused-memory-level 1 --exit-duration-in-mins 235 "
    "--use-distributed-optimizer --overlap-grad-reduce --overlap-param-gather "
    "--fp8-format hybrid --fp8-amax-history-len 1024 --fp8-amax-compute-algo max --fp8-param-gather "
    "--tensor-model-parallel-size 1 --context-parallel-size 1 --sequence-parallel "
    "--mock-data --tokenizer-type NullTokenizer --vocab-size 128256 --data-cache-path cache "
    "--tiktoken-pattern v2").split() + ["--split", "'99,1,0'"] + (
    "--no-create-attention-mask-in-dataloader --no-mmap-bin-files --num-workers 1 "
    "--log-interval 1 --eval-iters 32 --eval-interval 100 --save-interval 1000 --log-throughput --profile "
    "--profile-step-start 4 --profile-step-end 6 --ckpt-format torch_dist --distributed-timeout-minutes 60 "
    "--save checkpoints/llama3 --load checkpoints/llama3 --tensorboard-dir tensorboard/llama3").split()

# name: (flags, the script's world size). The 175B script needs TP 8 x PP 16 = 128 ranks
# (NUM_NODES=16); Domino's run on 2 GPUs.
STARTING = {
    "megatron_lm_gpt3_175b": (GPT3_175B, 128),
    "domino_gpt3_2.7b": (DOMINO_GPT3_2_7B, 2),
    "domino_gpt3_6.7b": (DOMINO_GPT3_6_7B, 2),
    "domino_llama_7b": (DOMINO_LLAMA_7B, 2),
    "domino_llama_13b": (DOMINO_LLAMA_13B, 2),
}


def flag_value(flags, name):
    return flags[flags.index(name) + 1]


@pytest.mark.parametrize("name", sorted(STARTING))
def test_reference_script_passes_check_args_as_written(name):
    flags, world_size = STARTING[name]
    proc = check_args(flags, world_size)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    tp = int(flag_value(flags, "--tensor-model-parallel-size"))
    pp = int(flag_value(flags, "--pipeline-model-parallel-size")) if "--pipeline-model-parallel-size" in flags else 1
    assert (f"pretrain_gpt would start: {world_size} ranks, tensor-parallel {tp}, pipeline-parallel {pp}, "
            f"data-parallel {world_size // (tp * pp)}") in proc.stdout, proc.stdout
    # Each flag that changes nothing here is named once with its reason; no other flag is (the
    # 175B script's --attention-backend auto is the default, so it asks for nothing).
    named = sorted(line.split(":")[1].strip() for line in proc.stdout.splitlines() if line.startswith("no effect: "))
    assert named == NO_EFFECT[name], proc.stdout


NO_EFFECT = {"megatron_lm_gpt3_175b": [], "domino_gpt3_2.7b": [],
             "domino_gpt3_6.7b": ["--no-gradient-accumulation-fusion"], "domino_llama_7b": [],
             "domino_llama_13b": ["--causal-lm", "--llama-model", "--no-gradient-accumulation-fusion"]}


def test_the_175b_script_at_its_own_world_size_is_refused_with_the_reason():
    proc = check_args(GPT3_175B, 8)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "refused: " in proc.stdout and "--tensor-model-parallel-size" in proc.stdout, proc.stdout
    assert "pretrain_gpt would not start with these flags (8 ranks)" in proc.stdout


def test_the_llama3_fp8_script_is_refused_only_for_its_fp8_parameters():
    # Every other flag parses; FP8 parameters are the FP8 issue's.
    proc = check_args(LLAMA3_8B_FP8, 8)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "pretrain_gpt would not start with these flags (8 ranks)" in proc.stdout
    assert "unknown flag" not in proc.stdout
    refused = proc.stdout.split("refused: [arguments] ", 1)[1].splitlines()[0]
    assert refused == ("--fp8-param-gather: FP8 parameters (kept and all-gathered in FP8) and MXFP8 are not "
                       "implemented; --fp8-format runs FP8 GEMMs on the model's parameters"), proc.stdout


# examples/mixtral/train_mixtral_8x7b_distributed.sh of NVIDIA/Megatron-LM d98e8a6, its variables
# expanded; expert-parallel 8 x pipeline-parallel 4 needs at least 32 ranks (4 of its nodes).
MIXTRAL_8X7B = (
    "--use-mcore-models --disable-bias-linear --seq-length 4096 --max-position-embeddings 32768 --num-layers 32 "
    "--hidden-size 4096 --ffn-hidden-size 14336 --num-attention-heads 32 --init-method-std 0.01 "
    "--attention-dropout 0.0 --hidden-dropout 0.0 --normalization RMSNorm --position-embedding-type rope --swiglu "
    "--untie-embeddings-and-output-weights --group-query-attention --num-query-groups 8 --no-masked-softmax-fusion "
    "--no-position-embedding --rotary-base 1000000 --num-experts 8 --moe-router-topk 2 "
    "--moe-router-load-balancing-type aux_loss --moe-aux-loss-coeff 1e-2 --moe-grouped-gemm "
    "--moe-token-dispatcher-type alltoall --overlap-param-gather --overlap-grad-reduce "
    "--tokenizer-type Llama2Tokenizer --tokenizer-model tokenizer.model --data-path data/my_text_document "
    "--split 99990,8,2 --micro-batch-size 1 --global-batch-size 256 --lr 1e-4 --train-iters 500000 "
    "--lr-decay-iters 320000 --lr-decay-style cosine --min-lr 1.0e-5 --weight-decay 0.1 --lr-warmup-iters 500 "
    "--clip-grad 1.0 --bf16 --tensor-model-parallel-size 1 --pipeline-model-parallel-size 4 "
    "--expert-model-parallel-size 8 --use-distributed-optimizer --sequence-parallel --log-interval 1 "
    "--save-interval 10000 --eval-interval 1000 --eval-iters 10 --save checkpoints/mixtral "
    "--load checkpoints/mixtral --tensorboard-dir checkpoints/mixtral/tensorboard --no-load-optim "
    "--no-load-rng").split()


def test_the_mixtral_script_parses_and_would_start_as_written():
    proc = check_args(MIXTRAL_8X7B, 32)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "pretrain_gpt would start: 32 ranks, tensor-parallel 1, pipeline-parallel 4, data-parallel 8 " \
        "(expert-parallel 8)" in proc.stdout, proc.stdout
    # Its experts must fold into the data-parallel ranks: on 16 ranks, 4 are data-parallel.
    proc = check_args(MIXTRAL_8X7B, 16)
    assert proc.returncode == 2 and "--expert-model-parallel-size (8) must divide the data-parallel size (4)" \
        in proc.stdout, proc.stdout + proc.stderr


def test_the_mixtral_script_scaled_down_trains_with_its_experts_over_two_ranks(tmp_path, default_data):  # noqa: F811
    """Its flags as written but for sizes and paths: 2 layers, EP 2 x PP 2 x DP 2 on 4 ranks (eight
    experts, four a rank, tokens all-to-all), bf16, the distributed optimizer with both overlaps; its
    Llama 2 tokenizer a SentencePiece model trained here, its data the first 2000 documents of the
    default corpus in that tokenizer. No evaluation: its 99990,8,2 split leaves so few documents no
    validation or test ones."""
    from data_helpers import run as run_tool
    from test_sentencepiece import CONFIGS, train as train_sentencepiece
    model = train_sentencepiece(tmp_path, "llama2", **CONFIGS["llama2_bpe"])
    corpus = tmp_path / "docs.jsonl"
    with open(os.path.join(os.path.dirname(default_data[1]), "corpus", "python_docs.jsonl")) as f:
        corpus.write_text("".join(line for _, line in zip(range(2000), f)))
    run_tool("preprocess_data", "--input", corpus, "--output-prefix", tmp_path / "mixtral", "--tokenizer-type",
             "Llama2Tokenizer", "--tokenizer-model", model, "--append-eod", "--workers", 2)
    sizes = {**SCALED, "--tensor-model-parallel-size": "1", "--expert-model-parallel-size": "2",
             "--num-query-groups": "2", "--eval-iters": "0"}
    paths = {"--data-path": str(tmp_path / "mixtral_text_document"), "--tokenizer-model": str(model),
             "--save": str(tmp_path / "ckpt"), "--load": str(tmp_path / "ckpt"),
             "--tensorboard-dir": str(tmp_path / "tb")}
    flags = [sizes.get(prev, paths.get(prev, flag)) if prev in sizes or prev in paths else flag
             for prev, flag in zip([None] + MIXTRAL_8X7B[:-1], MIXTRAL_8X7B)]
    proc = subprocess.run(MPIRUN + ["-np", "4", program("pretrain_gpt"), *flags],
                          capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "iteration        3/       3 |" in proc.stdout and " load_balancing_loss: " in proc.stdout, proc.stdout[-3000:]
    # Each expert-parallel rank of each stage wrote its own experts (mp_rank_TT_PPP_EEE).
    assert sorted(p.name for p in (tmp_path / "ckpt" / "iter_0000003").iterdir()) == [
        "mp_rank_00_000_000", "mp_rank_00_000_001", "mp_rank_00_001_000", "mp_rank_00_001_001"]


# BigScience's BLOOM run (bigscience-workshop/bigscience e726b15, train/tr11-176B-ml/tr11-176B-ml.slurm,
# Megatron-DeepSpeed, 24 nodes x 8 GPUs) with its ds_config written out; its data comes from
# Megatron-DeepSpeed's weighted split-path files, which are not read here yet.
BLOOM_DATA = ["--train-weighted-split-paths-path", "data/train-splits.txt",
              "--valid-weighted-split-paths-path", "data/valid-splits.txt"]
BLOOM_176B = ["--tensor-model-parallel-size", "4", "--pipeline-model-parallel-size", "12",
              "--pp-partition-method", "type:transformer|embedding"] + (
    "--num-layers 70 --hidden-size 14336 --num-attention-heads 112 --seq-length 2048 --max-position-embeddings 2048 "
    "--micro-batch-size 2 --rampup-batch-size 192 16 9_765_625 --global-batch-size 2048 --train-samples 220_000_000 "
    "--tokenizer-type PretrainedFromHF --tokenizer-name-or-path bigscience/tokenizer --init-method-std 0.0048 "
    "--embed-layernorm --sync-tp-duplicated-parameters --bf16 --seed 42 --position-embedding-type alibi "
    "--checkpoint-activations --abort-on-unmet-fused-kernel-constraints --kill-switch-path kill-switch "
    "--pad-vocab-size-to 250880 --optimizer adam --adam-beta1 0.9 --adam-beta2 0.95 --adam-eps 1e-8 --lr 6e-5 "
    "--min-lr 6e-6 --lr-decay-style cosine --lr-decay-samples 200_000_000 --lr-warmup-samples 183_105 "
    "--clip-grad 1.0 --weight-decay 1e-1 --exit-duration-in-mins 5990 --log-interval 1 --save-interval 100 "
    "--eval-interval 1000 --eval-iters 1 --tensorboard-dir tensorboard --tensorboard-queue-size 5 "
    "--log-timers-to-tensorboard --log-batch-size-to-tensorboard --log-validation-ppl-to-tensorboard "
    "--save checkpoints --load checkpoints").split() + BLOOM_DATA + (
    "--num-workers 2 --valid-num-workers 0 --data-impl mmap --distributed-backend nccl --deepspeed "
    "--deepspeed_config ds_config.json --zero-stage 0 --deepspeed-activation-checkpointing").split()
BLOOM_DS_CONFIG = {"train_micro_batch_size_per_gpu": 2, "train_batch_size": 2048, "gradient_clipping": 1.0,
                   "zero_optimization": {"stage": 0}, "bf16": {"enabled": True}, "steps_per_print": 2000,
                   "wall_clock_breakdown": False}


def test_the_bloom_script_names_what_it_still_lacks(tmp_path):
    # Two gaps, each named: Megatron-DeepSpeed's weighted split-path data files, and its pipeline
    # split that counts the embedding as a layer (70 layers + 2 over 12 stages). This only shrinks.
    (tmp_path / "ds_config.json").write_text(json.dumps(BLOOM_DS_CONFIG))
    flags = [str(tmp_path / "ds_config.json") if f == "ds_config.json" else f for f in BLOOM_176B]
    proc = check_args(flags, 192)
    assert proc.returncode == 2 and "unknown flags --train-weighted-split-paths-path, " \
        "--valid-weighted-split-paths-path;" in proc.stdout, proc.stdout
    i = flags.index(BLOOM_DATA[0])
    flags = flags[:i] + ["--data-path", "data/prefix"] + flags[i + 4:]
    proc = check_args(flags, 192)
    assert proc.returncode == 2 and "--pp-partition-method type:transformer|embedding: pipeline stages here hold " \
        "an equal share of the transformer layers" in proc.stdout, proc.stdout
    # On 10 stages (7 layers each, 160 ranks) with the even split it names, the rest starts, the
    # Megatron-DeepSpeed-only switches named once each.
    flags[flags.index("--pp-partition-method") + 1] = "type:transformer"
    flags[flags.index("--pipeline-model-parallel-size") + 1] = "10"
    proc = check_args(flags, 160)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "pretrain_gpt would start: 160 ranks, tensor-parallel 4, pipeline-parallel 10, data-parallel 4" in proc.stdout
    named = sorted(line.split(":")[1].strip() for line in proc.stdout.splitlines() if line.startswith("no effect: "))
    assert named == ["--abort-on-unmet-fused-kernel-constraints", "--deepspeed-activation-checkpointing",
                     "--log-batch-size-to-tensorboard", "--pp-partition-method", "--sync-tp-duplicated-parameters"], \
        proc.stdout


# Sizes scaled down, nothing else changed; paths point at the default corpus and tmp_path.
SCALED = {"--num-layers": "2", "--hidden-size": "64", "--num-attention-heads": "4", "--seq-length": "32",
          "--max-position-embeddings": "32", "--ffn-hidden-size": "128", "--micro-batch-size": "2",
          "--global-batch-size": "8", "--train-iters": "3", "--rampup-batch-size": None, "--eval-iters": "1",
          "--tensor-model-parallel-size": "2", "--pipeline-model-parallel-size": "2"}


def scaled_down(flags, data, tmp_path):
    paths = {"--data-path": data[1], "--vocab-file": data[5], "--merge-file": data[7],
             "--save": str(tmp_path / "ckpt"), "--load": str(tmp_path / "ckpt"),
             "--tensorboard-dir": str(tmp_path / "tb")}
    out, i = [], 0
    while i < len(flags):
        flag = flags[i]
        if flag == "--rampup-batch-size":  # three sizes: start, increment, samples
            out += [flag, "4", "4", "8"]
            i += 4
            continue
        out.append(flag)
        if flag in SCALED or flag in paths:
            out.append(SCALED.get(flag) or paths[flag])
            i += 1
        i += 1
    return out


@pytest.mark.parametrize("name", ["megatron_lm_gpt3_175b", "domino_llama_13b"])
def test_reference_script_scaled_down_trains(tmp_path, default_data, name):  # noqa: F811
    flags, _ = STARTING[name]
    scaled = scaled_down(flags, default_data, tmp_path)
    tp = int(flag_value(scaled, "--tensor-model-parallel-size"))
    pp = int(flag_value(scaled, "--pipeline-model-parallel-size")) if "--pipeline-model-parallel-size" in scaled else 1
    proc = subprocess.run(MPIRUN + ["-np", str(tp * pp), program("pretrain_gpt"), *scaled],
                          capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "after training is done" in proc.stdout, proc.stdout[-3000:]
    if "--save" in scaled:
        assert (tmp_path / "ckpt" / "latest_checkpointed_iteration.txt").read_text().strip() == "3"
    # fp16 from Megatron-LM's initial loss scale 2^32 skips these first updates: the iterations
    # and the evaluation still ran.
    assert "iteration        3/       3 |" in proc.stdout and "validation loss at iteration 3" in proc.stdout


def functional_test_configs():
    """Megatron-LM's functional-test flag sets (reference_flags/extract_megatron_lm_configs.py)."""
    path = os.path.join(os.path.dirname(__file__), "reference_flags", "megatron_lm_functional_tests.json.gz")
    with gzip.open(path) as f:
        return json.load(f)["configs"]


# How many of the 333 configs parse with no unknown flag, and how many would start on 8 ranks (the
# functional tests' node), over all and over the GPT ones. These numbers only go up. Measured at
# 290 / 161 and 203 / 133 (268 / 161 and 182 / 133 before FIM, muP, the batch-size schedule, fault
# injection, the straggler detector, --log-progress and --apply-wd-to-qk-layernorm were refused by
# family; the three GPT configs left need --fp8-param-gather; 261 / 152 and 175 / 126 before --num-distributed-optimizer-instances,
# a2a+p2p, --use-torch-fsdp2 and Megatron-FSDP's precisions; 257 / 148 and 171 / 122 before the
# uneven pipeline splits; 163 / 138 and 119 / 112 before the flags of Megatron-LM's other programs
# and of features not built here were refused by family, and before the replica hash check,
# --save-retain-interval, --squared-relu, --logging-level and --timing-log-option; 149 / 121 and 108 / 102 before --verify-integrity, --rerun-mode,
# --async-ckpt-use-cpu-shm and expert TP 1; 104 started before MoE with tensor parallelism and
# sinkhorn routing; 123 / 86 and 89 / 86 before the FP8 flags, --qk-layernorm,
# --use-tp-pp-dp-mapping and the cross-entropy and DDP switches; 106 / 74 parsed before the
# context-parallel flags, 87 before the MoE ones): most that do not parse are inference configs
# (--prompts, --temperature, ...).
AT_LEAST = {"all": (315, 164), "gpt": (203, 133)}


def test_megatron_lm_functional_test_configs_parse():
    configs = functional_test_configs()
    assert len(configs) == 333
    parsed, started, refused = collections.Counter(), collections.Counter(), collections.Counter()
    for name, words in configs.items():
        would_start, report = megatron_cpp.check_args(words, 8)
        unknown = report.split("unknown flag", 1)[1].split("; see")[0] if "unknown flag" in report else ""
        refused.update(part.lstrip("s ").split(" ")[0] for part in unknown.split(", ") if part)
        for group in ("all", "gpt") if name.startswith("gpt/") else ("all",):
            parsed[group] += not unknown
            started[group] += would_start
    summary = {g: (parsed[g], started[g]) for g in AT_LEAST}
    print(summary, refused.most_common(40))
    for group, (least_parsed, least_started) in AT_LEAST.items():
        assert parsed[group] >= least_parsed and started[group] >= least_started, (summary, refused.most_common(40))


MOCK_RUN = ["--num-layers", "2", "--hidden-size", "32", "--num-attention-heads", "4", "--seq-length", "16",
            "--micro-batch-size", "1", "--global-batch-size", "4", "--lr", "1e-3", "--train-iters", "2",
            "--mock-data", "--vocab-size", "256"]


def test_flags_of_megatron_lms_other_programs_are_refused_by_family_with_the_reason():
    proc = check_args(MOCK_RUN + ["--prompts", "a b", "--temperature", "1.0", "--wandb-entity", "me",
                                  "--mtp-num-layers", "1", "--top_k", "1"], 1)
    assert proc.returncode == 2 and "unknown flag" not in proc.stdout, proc.stdout
    refused = proc.stdout.split("refused: [arguments] ", 1)[1].splitlines()[0].split("; ")
    assert refused == ["--prompts, --temperature, --top_k: text generation and inference serving (Megatron-LM's "
                       "inference programs), not training",
                       "--wandb-entity: Weights & Biases needs network access, which this build does not use "
                       "(--tensorboard-dir writes the same scalars to an event file)",
                       "--mtp-num-layers: multi-token prediction is not implemented"], proc.stdout
    # A flag of no family is still unknown, with the closest known one; the families are named too.
    typo = check_args(MOCK_RUN + ["--lr-warmup-iter", "1", "--prompts", "a"], 1)
    assert "unknown flag --lr-warmup-iter (did you mean --lr-warmup-iters?); see pretrain_gpt --help (also refused: " \
        "--prompts: text generation" in typo.stdout, typo.stdout


def test_a_list_given_as_one_word_reads_as_its_numbers():
    # Megatron-LM's YAML configs hand --hierarchical-context-parallel-sizes over as "2 2" or "[2 2]".
    for value in (["2", "2"], ["2 2"], ["[2 2]"], ["[2, 2]"]):
        proc = check_args(MOCK_RUN + ["--context-parallel-size", "4", "--cp-comm-type", "a2a+p2p", "--attention-dropout",
                                      "0", "--hierarchical-context-parallel-sizes", *value], 4)
        assert proc.returncode == 0 and "context-parallel 4" in proc.stdout, (value, proc.stdout)
    bad = check_args(MOCK_RUN + ["--hierarchical-context-parallel-sizes", "[2 x]"], 4)
    assert bad.returncode == 2 and "--hierarchical-context-parallel-sizes" in bad.stdout, bad.stdout


def test_the_switches_that_change_nothing_here_are_named_with_their_reason():
    proc = check_args(MOCK_RUN + ["--te-rng-tracker", "--disable-gloo-process-groups",
                                  "--overlap-param-gather-with-optimizer-step", "--no-check-for-nan-in-loss-and-grad",
                                  "--defer-embedding-wgrad-compute", "--wgrad-deferral-limit", "2", "--tp-comm-overlap",
                                  "--tp-comm-overlap-cfg", "cfg.yaml", "--overlap-p2p-communication-warmup-flush",
                                  "--microbatch-group-size-per-virtual-pipeline-stage", "5"], 1)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    named = sorted(line.split(":")[1].strip() for line in proc.stdout.splitlines() if line.startswith("no effect: "))
    assert named == ["--defer-embedding-wgrad-compute", "--disable-gloo-process-groups",
                     "--microbatch-group-size-per-virtual-pipeline-stage", "--no-check-for-nan-in-loss-and-grad",
                     "--overlap-p2p-communication-warmup-flush", "--overlap-param-gather-with-optimizer-step",
                     "--te-rng-tracker", "--tp-comm-overlap", "--tp-comm-overlap-cfg", "--wgrad-deferral-limit"], \
        proc.stdout
