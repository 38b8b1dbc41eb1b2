// convert_checkpoint: moves a megatron-cpp checkpoint (training/checkpointing.h) to another
// tensor/pipeline-parallel layout, exports it to Hugging Face (config.json + model.safetensors:
// GPT2LMHeadModel or LlamaForCausalLM), or imports a Hugging Face model as a "release" checkpoint.
// The work is training::convert_checkpoint (training/checkpoint_conversion.h); this is its CLI.
//   convert_checkpoint --load DIR --save OUT --target-tensor-parallel-size 1 --target-pipeline-model-parallel-size 1
//   convert_checkpoint --load DIR --export-hf OUT_DIR
//   convert_checkpoint --import-hf HF_DIR --save OUT [--target-... --make-vocab-size-divisible-by 128]
#include <CLI/CLI.hpp>
#include <c10/util/Exception.h>

#include <cstdio>

#include "megatron/training/checkpoint_conversion.h"
#include "megatron/training/checkpointing.h"

using namespace megatron;

int main(int argc, char** argv) {
  CLI::App app{"Reshard megatron-cpp checkpoints; export to / import from Hugging Face", "convert_checkpoint"};
  std::string load, save, export_hf_dir, import_hf_dir;
  std::optional<int64_t> step, vp_layers;
  int tp = 1, pp = 1;
  int64_t divisible_by = 128;
  app.add_option("--load", load, "checkpoint folder to read (its tracker names the iteration)");
  app.add_option_function<int64_t>("--ckpt-step", [&](const int64_t& v) { step = v; }, "read this iteration instead");
  app.add_option("--save", save, "checkpoint folder to write");
  app.add_option("--target-tensor-parallel-size", tp, "TP size of the written checkpoint")->capture_default_str();
  app.add_option("--target-pipeline-model-parallel-size", pp, "PP size of the written checkpoint")->capture_default_str();
  app.add_option_function<int64_t>("--target-num-layers-per-virtual-pipeline-stage",
                                    [&](const int64_t& v) { vp_layers = v; }, "interleaved schedule of the written checkpoint");
  app.add_option("--export-hf", export_hf_dir, "write config.json + model.safetensors here");
  app.add_option("--import-hf", import_hf_dir, "read a Hugging Face GPT-2 or Llama model from here");
  app.add_option("--make-vocab-size-divisible-by", divisible_by, "vocabulary padding of an imported model")
      ->capture_default_str();
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  try {
    training::ConvertOptions o;
    o.load = load;
    o.ckpt_step = step;
    o.import_hf = import_hf_dir;
    o.make_vocab_size_divisible_by = divisible_by;
    o.export_hf = export_hf_dir;
    o.save = save;
    o.target_tensor_model_parallel_size = tp;
    o.target_pipeline_model_parallel_size = pp;
    o.target_num_layers_per_virtual_pipeline_stage = vp_layers;
    const auto r = training::convert_checkpoint(o);
    if (!export_hf_dir.empty()) std::printf("exported %s to %s\n", load.c_str(), export_hf_dir.c_str());
    if (!save.empty())
      std::printf("wrote %s (TP %d, PP %d%s) to %s\n", training::iteration_dir_name(r.iteration).c_str(), tp, pp,
                  r.has_optimizer_state ? "" : ", no optimizer state", save.c_str());
  } catch (const c10::Error& e) {
    std::fprintf(stderr, "convert_checkpoint: %s\n", e.what_without_backtrace());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "convert_checkpoint: %s\n", e.what());
    return 1;
  }
  return 0;
}
