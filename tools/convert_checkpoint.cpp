// convert_checkpoint: moves a megatron-cpp checkpoint (training/checkpointing.h) to another
// tensor/pipeline-parallel layout, exports it to Hugging Face (config.json + model.safetensors:
// GPT2LMHeadModel, LlamaForCausalLM, Qwen2ForCausalLM, MistralForCausalLM or BloomForCausalLM), or
// imports a Hugging Face model as a "release" checkpoint.
// The work is training::convert_checkpoint (training/checkpoint_conversion.h); this is its CLI.
//   convert_checkpoint --load DIR --save OUT --target-tensor-parallel-size 1 --target-pipeline-model-parallel-size 1
//   convert_checkpoint --load DIR --export-hf OUT_DIR [--hf-model-type mistral]
//   convert_checkpoint --import-hf HF_DIR --save OUT [--target-... --make-vocab-size-divisible-by 128]
#include <c10/util/Exception.h>

#include <cstdio>

#include "cli.h"
#include "megatron/training/checkpoint_conversion.h"
#include "megatron/training/checkpointing.h"

using namespace megatron;

int main(int argc, char** argv) {
  CLI::App app{"Reshard megatron-cpp checkpoints; export to / import from Hugging Face", "convert_checkpoint"};
  training::ConvertOptions o;  // the flags fill it directly
  app.add_option("--load", o.load, "checkpoint folder to read (its tracker names the iteration)");
  app.add_option_function<int64_t>(
      "--ckpt-step", [&](const int64_t& v) { o.ckpt_step = v; }, "read this iteration instead");
  app.add_option("--save", o.save, "checkpoint folder to write");
  app.add_option("--target-tensor-parallel-size", o.target_tensor_model_parallel_size,
                 "TP size of the written checkpoint")
      ->capture_default_str();
  app.add_option("--target-pipeline-model-parallel-size", o.target_pipeline_model_parallel_size,
                 "PP size of the written checkpoint")
      ->capture_default_str();
  app.add_option("--target-expert-parallel-size", o.target_expert_model_parallel_size,
                 "EP size of the written checkpoint (MoE: the experts split over that many ranks)")
      ->capture_default_str();
  app.add_option_function<int64_t>(
      "--target-expert-tensor-parallel-size", [&](const int64_t& v) { o.target_expert_tensor_parallel_size = v; },
      "expert-TP size of the written checkpoint: the target TP (default) or 1 (each expert whole)");
  app.add_option_function<int64_t>(
      "--target-num-layers-per-virtual-pipeline-stage",
      [&](const int64_t& v) { o.target_num_layers_per_virtual_pipeline_stage = v; },
      "interleaved schedule of the written checkpoint");
  app.add_option("--ckpt-format", o.ckpt_format,
                 "format of --save: torch (per-rank files at the target layout) or torch_dist (megatron-core's "
                 "sharded files, any layout loads them); --load's is read from its files")
      ->capture_default_str();
  app.add_option("--export-hf", o.export_hf, "write config.json + model.safetensors + the tokenizer's files here");
  app.add_option("--vocab-file", o.vocab_file, "GPT-2 vocab.json to export (default: the one trained with)");
  app.add_option("--merge-file", o.merge_file, "GPT-2 merges.txt to export (default: the one trained with)");
  app.add_option("--tokenizer-model", o.tokenizer_model,
                 "HuggingFaceTokenizer's tokenizer.json or folder to export (default: the one trained with)");
  app.add_option("--hf-model-type", o.hf_model_type,
                 "with --export-hf: the model_type to write (gpt2, llama, qwen2, mistral, qwen3, mixtral, qwen2_moe, "
                 "qwen3_moe, bloom; default: the first that fits the checkpoint)");
  app.add_option("--import-hf", o.import_hf,
                 "read a Hugging Face GPT-2, Llama, Qwen2, Mistral, Qwen3, Mixtral, Qwen2-MoE, Qwen3-MoE or BLOOM "
                 "model from here");
  app.add_option("--make-vocab-size-divisible-by", o.make_vocab_size_divisible_by,
                 "vocabulary padding of an imported model")
      ->capture_default_str();
  app.add_flag("--overwrite", o.overwrite, "let --save be a folder that already holds checkpoints (replacing them)");
  return run_tool(app, "convert_checkpoint", argc, argv, [&] {
    const auto r = training::convert_checkpoint(o);
    if (!o.export_hf.empty()) std::printf("exported %s to %s\n", o.load.c_str(), o.export_hf.c_str());
    if (!o.save.empty())
      std::printf("wrote %s (%s, TP %d, PP %d, EP %d%s) to %s\n", training::iteration_dir_name(r.iteration).c_str(),
                  o.ckpt_format.c_str(), o.target_tensor_model_parallel_size, o.target_pipeline_model_parallel_size,
                  o.target_expert_model_parallel_size, r.has_optimizer_state ? "" : ", no optimizer state",
                  o.save.c_str());
    if (!r.optimizer_unread.empty()) std::printf("optimizer state left behind: %s\n", r.optimizer_unread.c_str());
    return 0;
  });
}
