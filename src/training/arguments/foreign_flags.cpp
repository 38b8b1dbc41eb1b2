#include "training/arguments/foreign_flags.h"

#include <cstring>
#include <initializer_list>

namespace megatron::training::detail {
namespace {

struct Family {
  const char* reason;
  std::initializer_list<const char*> prefixes;  // every flag that starts so
  std::initializer_list<const char*> flags;
};

// Each family once, named by what it is in Megatron-LM; a flag here that pretrain_gpt learns to
// honour moves into the arguments table, which is consulted first.
const Family kFamilies[] = {
    {"text generation and inference serving (Megatron-LM's inference programs), not training",
     {"--inference-", "--mamba-inference-"},
     {"--prompts",
      "--prompt-file",
      "--prompt-file-num-truncate",
      "--temperature",
      "--top_k",
      "--top_p",
      "--top-n-logprobs",
      "--num-tokens-to-generate",
      "--return-log-probs",
      "--output-path",
      "--max-tokens-to-oom",
      "--incoming-requests-per-sec",
      "--incoming-requests-per-step",
      "--enable-chunked-prefill",
      "--flash-decode",
      "--termination-id",
      "--stop-words",
      "--output-every-n-results",
      "--use-legacy-static-engine",
      "--no-record-throughput",
      "--use-coordinator",
      "--decode-only-cuda-graphs",
      "--enable-cuda-graph",
      "--moe-pad-experts-for-cuda-graph-inference",
      "--no-use-tokenizer-model-from-checkpoint-args",
      "--use-flashinfer-fused-rope",
      "--async-mode",
      "--suspend-resume-interval",
      "--suspend-timeout",
      "--padded-vocab-size"}},
    {"reinforcement learning (Megatron-LM's RL loop), not pretraining",
     {"--rl-", "--no-rl-", "--grpo-"},
     {"--langrl-env-config", "--perform-rl-step", "--refit-method", "--moe-enable-routing-replay"}},
    {"Mamba and hybrid models are not built by pretrain_gpt", {"--mamba-", "--hybrid-"}, {"--is-hybrid-model"}},
    {"Megatron-LM's other model builders (mamba, hybrid, multimodal); pretrain_gpt builds GPT",
     {},
     {"--model-provider"}},
    {"encoder and encoder-decoder models (BERT, T5) are not built by pretrain_gpt",
     {"--bert-"},
     {"--encoder-num-layers", "--decoder-num-layers", "--encoder-seq-length", "--decoder-seq-length",
      "--vocab-extra-ids"}},
    {"vision and multimodal models are not built by pretrain_gpt",
     {},
     {"--img-h", "--img-w", "--patch-dim", "--disable-vision-class-token", "--dataloader-seq-length",
      "--use-packed-sequence", "--dataset-provider", "--language-model-checkpoint", "--total-seq-length",
      "--packing-buffer-size"}},
    {"model optimization and distillation (ModelOpt) is not part of megatron-cpp",
     {"--export-"},
     {"--sft", "--sft-tokenizer-prompt-format", "--modelopt-enabled"}},
    {"Weights & Biases needs network access, which this build does not use (--tensorboard-dir writes the same "
     "scalars to an event file)",
     {"--wandb-"},
     {}},
    {"multi-latent attention and YaRN rotary scaling (DeepSeek-V2/V3) are not implemented",
     {"--dsa-indexer-"},
     {"--multi-latent-attention", "--q-lora-rank", "--kv-lora-rank", "--qk-head-dim", "--qk-pos-emb-head-dim",
      "--v-head-dim", "--rotary-scaling-factor", "--mscale", "--mscale-all-dim"}},
    {"multi-token prediction is not implemented", {"--mtp-"}, {}},
    {"the Muon optimizer is not implemented", {"--muon-"}, {"--no-use-layer-wise-param-layout"}},
    {"linear and other experimental attention variants (gated delta net, DSA) are not implemented",
     {"--linear-attention-", "--linear-conv-", "--linear-key-", "--linear-value-", "--linear-num-"},
     {"--experimental-attention-variant", "--attention-output-gate"}},
    {"CUDA graphs are not captured yet", {"--cuda-graph-"}, {}},
    {"FP8 parameters (kept and all-gathered in FP8) and MXFP8 are not implemented; --fp8-format runs FP8 GEMMs on "
     "the model's parameters",
     {},
     {"--fp8-param-gather", "--reuse-grad-buf-for-mxfp8-param-ag", "--moe-router-padding-for-quantization"}},
    {"fill-in-the-middle (FIM) datasets are not implemented", {"--fim-"}, {}},
    {"muP (maximal update parametrization) is not implemented", {"--mup-"}, {"--use-mup"}},
    {"a batch-size schedule by consumed tokens is not implemented (--rampup-batch-size ramps by samples)",
     {},
     {"--step-batch-size-schedule", "--eval-global-batch-size"}},
    {"the rerun state machine's fault injection is not implemented (--rerun-mode validate_results stops on a "
     "NaN or Inf without rerunning)",
     {"--error-injection-"},
     {}},
    {"the straggler detector is not implemented (the timers report each rank's time with --timing-log-option all)",
     {"--straggler-"},
     {"--log-straggler", "--disable-straggler-on-startup"}},
    {"the progress log (progress.txt in --save) is not implemented; --metrics-file records every iteration",
     {},
     {"--log-progress"}},
    {"weight decay on the query and key norms is not implemented (norm weights take none)",
     {},
     {"--apply-wd-to-qk-layernorm"}},
    {"offloading activations or the optimizer to host memory is not implemented",
     {"--cpu-offloading", "--offload-", "--optimizer-offload-"},
     {"--fine-grained-activation-offloading", "--optimizer-cpu-offload", "--use-torch-optimizer-for-cpu-offload",
      "--overlap-cpu-optimizer-d2h-h2d", "--no-pin-cpu-grads", "--no-pin-cpu-params", "--min-offloaded-tensor-size",
      "--activation-offload-fraction", "--fine-grained-offloading-max-inflight-offloads",
      "--delay-offload-until-cuda-graph", "--delta-offload-bytes-across-pp-ranks"}},
    {"Flextron elastic (nested) model training is not implemented",
     {"--flextron", "--budget-", "--linear-scaler-"},
     {"--enable-router", "--binary-mask", "--soft-mask", "--hard-sample-th", "--router-beta",
      "--original-model-sample-prob", "--tau-init", "--tau-decay", "--loss-alpha", "--lr-mult-router", "--router-gbs",
      "--router-inter-dim", "--emb-int-list", "--mlp-int-list", "--moe-expert-int-list", "--slice", "--router-std"}},
    {"GPT-OSS's layers (attention sinks, sliding-window attention, clamped quick-GeGLU, YaRN) are not implemented",
     {"--yarn-", "--no-yarn-"},
     {"--enable-gpt-oss", "--window-size", "--window-attn-skip-freq", "--softmax-type", "--quick-geglu",
      "--glu-linear-offset", "--activation-func-clamp-value", "--rope-type"}},
    {"the MoE latent projection (experts on a smaller hidden size) is not implemented", {}, {"--moe-latent-size"}},
    {"per-layer MoE logging is not implemented (the iteration line has each MoE loss summed over the layers)",
     {},
     {"--moe-per-layer-logging"}},
    {"benchmark routing (random router logits for a balanced load) is not implemented",
     {},
     {"--moe-router-force-load-balancing"}},
    {"energy logging reads NVML's counters, which this build does not use", {}, {"--log-energy"}},
    {"the rerun state machine's large-gradient check is not implemented (a NaN or Inf gradient norm stops the run)",
     {},
     {"--check-for-large-grads", "--result-rejected-tracker-filename"}},
    {"CUDA memory-history snapshots are not written (--log-memory-interval reports the allocator's counters)",
     {},
     {"--record-memory-history", "--memory-snapshot-path"}},
};

}  // namespace

std::string foreign_flag_reason(const std::string& flag) {
  for (const Family& family : kFamilies) {
    for (const char* f : family.flags)
      if (flag == f) return family.reason;
    for (const char* p : family.prefixes)
      if (flag.compare(0, std::strlen(p), p) == 0) return family.reason;
  }
  return "";
}

}  // namespace megatron::training::detail
