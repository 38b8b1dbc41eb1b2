// Flag parsing: Megatron-LM's names, the TOML config file, derived values, and one clear line
// for every inconsistent combination.
#include "megatron/training/arguments.h"

#include "megatron/training/checkpoint_schema.h"

#include <c10/util/Exception.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <regex>
#include <sstream>

#include "error_of.h"
#include "training/argument_flags.h"

namespace megatron::training {
namespace {

using test_flags::base;
using test_flags::error_of;

std::vector<std::string> with(std::vector<std::string> args, const std::vector<std::string>& more) {
  args.insert(args.end(), more.begin(), more.end());
  return args;
}

TEST(Arguments, MegatronFlagsAndDerivedValues) {
  auto a = *parse_arguments(with(base(), {"--global-batch-size", "16", "--tensor-model-parallel-size", "2",
                                          "--lr-decay-style", "cosine", "--bf16"}),
                            4);
  EXPECT_EQ(a.num_layers, 2);
  EXPECT_EQ(a.data_parallel_size, 2);
  EXPECT_EQ(a.num_microbatches, 4);  // 16 / (2 x 2)
  EXPECT_EQ(a.max_position_embeddings, 32);
  EXPECT_EQ(a.lr_decay_style, "cosine");
  EXPECT_TRUE(a.bf16);
  EXPECT_DOUBLE_EQ(*a.lr, 1e-3);
  EXPECT_EQ(*a.train_iters, 10);
}

TEST(Arguments, TomlConfigWithFlagsOverriding) {
  const std::string path = ::testing::TempDir() + "/megatron_args.toml";
  {
    std::ofstream f(path);
    f << "num-layers = 6\nhidden-size = 128\nlr = 0.01\nbf16 = true\ndata-path = [\"0.3\", \"a\", \"0.7\", \"b\"]\n";
  }
  auto a = *parse_arguments(
      {"--config", path, "--num-layers", "3", "--num-attention-heads", "4", "--seq-length", "8", "--micro-batch-size",
       "1", "--train-iters", "1", "--tokenizer-type", "NullTokenizer", "--vocab-size", "50"},
      1);
  EXPECT_EQ(a.num_layers, 3);  // the flag wins
  EXPECT_EQ(a.hidden_size, 128);
  EXPECT_DOUBLE_EQ(*a.lr, 0.01);
  EXPECT_TRUE(a.bf16);
  EXPECT_EQ(a.data_path, (std::vector<std::string>{"0.3", "a", "0.7", "b"}));
  EXPECT_EQ(a.config_file, path);
  std::remove(path.c_str());
}

TEST(Arguments, ShippedConfigsParse) {
  // The tiny one is the main job's (2 ranks), the 124M one is sized for 8.
  for (auto [name, world] : {std::pair{"gpt2-tiny.toml", 2}, std::pair{"gpt2-124m.toml", 8}}) {
    const std::string path = std::string(MEGATRON_SOURCE_DIR) + "/configs/" + name;
    auto a = *parse_arguments({"--config", path, "--mock-data", "--vocab-size", "50257"}, world);
    EXPECT_GT(a.num_layers, 0) << name;
    EXPECT_EQ(a.config_file, path);
  }
  auto big = *parse_arguments({"--config", std::string(MEGATRON_SOURCE_DIR) + "/configs/gpt2-124m.toml", "--mock-data",
                               "--vocab-size", "50257"},
                              8);
  EXPECT_EQ(big.hidden_size, 768);
  EXPECT_EQ(big.num_microbatches, 8);  // 512 / (8 x 8)
  EXPECT_TRUE(big.bf16);
}

TEST(Arguments, InconsistentCombinationsAreOneClearLine) {
  EXPECT_NE(error_of(with(base(), {"--global-batch-size", "10"}), 2)
                .find("--global-batch-size (10) is not divisible by --micro-batch-size (2) x "
                      "data-parallel size (2) = 4"),
            std::string::npos);
  EXPECT_NE(error_of(with(base(), {"--tensor-model-parallel-size", "3"}), 3)
                .find("--num-attention-heads (4) is not divisible by --tensor-model-parallel-size (3)"),
            std::string::npos);
  EXPECT_NE(error_of(with(base(), {"--tensor-model-parallel-size", "2"}), 3)
                .find("world size (3) is not divisible by --tensor-model-parallel-size (2)"),
            std::string::npos);
  EXPECT_NE(error_of(with(base(), {"--train-samples", "100"})).find("exactly one of --train-iters and --train-samples"),
            std::string::npos);
  EXPECT_NE(error_of(with(base(), {"--bf16", "--fp16"})).find("--bf16 and --fp16 exclude each other"),
            std::string::npos);
  EXPECT_NE(error_of({"--num-layers", "2", "--hidden-size", "64", "--num-attention-heads", "4", "--seq-length", "32",
                      "--micro-batch-size", "2", "--train-iters", "10", "--lr", "1e-3"})
                .find("give --data-path (or --mock-data)"),
            std::string::npos);
  EXPECT_NE(error_of({"--num-layers", "2", "--hidden-size", "64", "--num-attention-heads", "4", "--seq-length", "32",
                      "--micro-batch-size", "2", "--train-iters", "10", "--lr", "1e-3", "--data-path", "x",
                      "--tokenizer-type", "GPT2BPETokenizer"})
                .find("GPT2BPETokenizer needs --vocab-file and --merge-file"),
            std::string::npos);
  EXPECT_NE(error_of(with(base(), {"--lr-warmup-iters", "10"}))
                .find("--lr-warmup-iters (10) must be smaller than the decay length (--train-iters = 10)"),
            std::string::npos);
  auto twice = *parse_arguments(with(base(), {"--lr", "5e-4"}), 1);
  EXPECT_DOUBLE_EQ(*twice.lr, 5e-4);  // the last of a repeated flag wins, as with argparse
  auto odd_hidden = base();
  odd_hidden[3] = "66";
  EXPECT_NE(error_of(odd_hidden).find("--hidden-size (66) is not divisible by --num-attention-heads (4)"),
            std::string::npos);
  EXPECT_NE(error_of(with(base(), {"--lr-decay-style", "triangle"})).find("--lr-decay-style"), std::string::npos);
  EXPECT_NE(error_of(with(base(), {"--no-such-flag"})).find("--no-such-flag"), std::string::npos);
}

// base() with another --num-layers.
std::vector<std::string> layers(int n) {
  auto args = base();
  args[1] = std::to_string(n);
  return args;
}

TEST(Arguments, PipelineSplits) {
  // 8 layers over 2 stages of 2 chunks of 2 layers.
  auto a =
      *parse_arguments(with(layers(8), {"--pipeline-model-parallel-size", "2",
                                        "--num-layers-per-virtual-pipeline-stage", "2", "--global-batch-size", "8"}),
                       4);
  EXPECT_EQ(a.data_parallel_size, 2);
  EXPECT_EQ(a.num_microbatches, 2);
  EXPECT_EQ(a.virtual_pipeline_model_parallel_size, 2);
  auto b =
      *parse_arguments(with(layers(8), {"--pipeline-model-parallel-size", "2", "--num-virtual-stages-per-pipeline-rank",
                                        "4", "--global-batch-size", "4"}),
                       2);
  EXPECT_EQ(b.virtual_pipeline_model_parallel_size, 4);
  EXPECT_FALSE(parse_arguments(with(base(), {"--pipeline-model-parallel-size", "2"}), 2)
                   ->virtual_pipeline_model_parallel_size.has_value());

  EXPECT_NE(error_of(with(layers(4), {"--pipeline-model-parallel-size", "3"}), 3)
                .find("--num-layers (4) is not divisible by --pipeline-model-parallel-size (3)"),
            std::string::npos);
  EXPECT_NE(
      error_of(with(layers(8), {"--pipeline-model-parallel-size", "2", "--num-layers-per-virtual-pipeline-stage", "3"}),
               2)
          .find("--num-layers-per-virtual-pipeline-stage (3) does not divide the 4 layers of each pipeline stage"),
      std::string::npos);
  EXPECT_NE(error_of(with(base(), {"--num-layers-per-virtual-pipeline-stage", "1"}))
                .find("needs --pipeline-model-parallel-size > 1"),
            std::string::npos);
  EXPECT_NE(error_of(with(layers(4), {"--pipeline-model-parallel-size", "2", "--num-layers-per-virtual-pipeline-stage",
                                      "1", "--global-batch-size", "6"}),
                     2)
                .find("the number of micro-batches (3 = --global-batch-size / (--micro-batch-size x data-parallel "
                      "size)) to be a multiple of --pipeline-model-parallel-size (2)"),
            std::string::npos);
  EXPECT_NE(error_of(with(layers(4), {"--pipeline-model-parallel-size", "2", "--num-layers-per-virtual-pipeline-stage",
                                      "1", "--num-virtual-stages-per-pipeline-rank", "2"}),
                     2)
                .find("give only one of"),
            std::string::npos);
}

// Flags from Megatron-LM's launch scripts: aliases take their meaning, the switches that change
// nothing here parse and are named for the start-up warning, the exits are checked.
TEST(Arguments, MegatronScriptFlags) {
  auto a = *parse_arguments(with(base(), {"--recompute-activations", "--use-rotary-position-embeddings",
                                          "--exit-interval", "5", "--exit-duration-in-mins", "0.5"}),
                            1);
  EXPECT_EQ(a.recompute_granularity, "selective");
  EXPECT_EQ(a.position_embedding_type, "rope");
  EXPECT_EQ(*a.exit_interval, 5);
  EXPECT_DOUBLE_EQ(*a.exit_duration_in_mins, 0.5);
  EXPECT_TRUE(ignored_megatron_flags(a).empty());

  auto b = *parse_arguments(
      with(base(), {"--use-mcore-models", "--transformer-impl", "transformer_engine", "--use-flash-attn",
                    "--no-masked-softmax-fusion", "--attention-softmax-in-fp32", "--no-gradient-accumulation-fusion",
                    "--overlap-grad-reduce", "--distributed-backend", "nccl", "--attention-backend", "auto",
                    "--timing-log-level", "2", "--no-persist-layer-norm", "--no-bias-gelu-fusion"}),
      1);
  EXPECT_EQ(ignored_megatron_flags(b),
            (std::vector<std::string>{"--use-mcore-models", "--transformer-impl", "--use-flash-attn",
                                      "--no-masked-softmax-fusion", "--attention-softmax-in-fp32",
                                      "--no-gradient-accumulation-fusion", "--timing-log-level"}));
  EXPECT_TRUE(b.overlap_grad_reduce);
  // The fusion switches that pick ATen's kernels on a GPU are settings, not ignored flags.
  EXPECT_TRUE(b.no_persist_layer_norm && b.no_bias_gelu_fusion);
  EXPECT_FALSE(a.no_persist_layer_norm || a.no_bias_gelu_fusion);
  EXPECT_EQ(b.position_embedding_type, "learned_absolute");  // nothing else moved

  EXPECT_NE(error_of(with(base(), {"--recompute-activations", "--recompute-granularity", "full"}))
                .find("--recompute-activations means --recompute-granularity selective, but it is full"),
            std::string::npos);
  EXPECT_NE(error_of(with(base(), {"--exit-interval", "0"})).find("--exit-interval must be positive (got 0)"),
            std::string::npos);
  EXPECT_NE(error_of(with(base(), {"--transformer-impl", "fast"})).find("--transformer-impl"), std::string::npos);

  // Launch scripts append flags: a value given twice takes the last one, as argparse.
  auto twice = *parse_arguments(with(base(), {"--num-layers", "2", "--num-layers", "3", "--split", "1,1,1", "--split",
                                              "2,2,2", "--mock-data", "--mock-data"}),
                                1);
  EXPECT_EQ(twice.num_layers, 3);
  EXPECT_EQ(twice.split, "2,2,2");
  EXPECT_TRUE(twice.mock_data);

  // The local rank in both launchers' spellings (deepspeed appends --local_rank=N).
  EXPECT_FALSE(a.local_rank.has_value());
  EXPECT_EQ(parse_arguments(with(base(), {"--local_rank=3"}), 1)->local_rank.value(), 3);
  EXPECT_EQ(parse_arguments(with(base(), {"--local-rank", "2"}), 1)->local_rank.value(), 2);
  EXPECT_NE(error_of(with(base(), {"--local-rank", "-1"})).find("--local-rank must not be negative (got -1)"),
            std::string::npos);
}

// What Megatron-DeepSpeed and BLOOM-era scripts write: underscored integers, the older names of
// --norm-epsilon and full recompute; and a mistyped flag named in order with the closest one.
// What Megatron-LM's and DeepSpeed-Domino's launch scripts rely on: GPT-2's tokenizer when a
// vocabulary and merges are given, --split with the quotes a script leaves in it, --save-interval
// without --save, --persistent-save-interval, and sequence parallelism dropped at TP 1.
TEST(Arguments, LaunchScriptDefaults) {
  // base() with a corpus in place of its mock data (its last three words).
  std::vector<std::string> data = base();
  data.resize(data.size() - 3);
  data =
      with(data, {"--data-path", "corpus_text_document", "--vocab-file", "vocab.json", "--merge-file", "merges.txt"});
  EXPECT_EQ(parse_arguments(data, 1)->tokenizer_type, "GPT2BPETokenizer");
  EXPECT_EQ(parse_arguments(with(data, {"--tokenizer-type", "NullTokenizer", "--vocab-size", "10"}), 1)->tokenizer_type,
            "NullTokenizer");
  const std::vector<std::string> no_tokenizer(data.begin(), data.end() - 4);  // without the vocabulary and merges
  EXPECT_NE(error_of(no_tokenizer).find("--tokenizer-type is required with --data-path"), std::string::npos);

  EXPECT_EQ(parse_arguments(with(base(), {"--split", "'99,1,0'"}), 1)->split, "99,1,0");
  EXPECT_EQ(parse_arguments(with(base(), {"--split", "\"969, 30, 1\""}), 1)->split, "969, 30, 1");
  EXPECT_NE(error_of(with(base(), {"--split", "'99,x,0'"})).find("--split"), std::string::npos);

  EXPECT_EQ(parse_arguments(with(base(), {"--save-interval", "5"}), 1)->save_interval, 5);
  EXPECT_EQ(parse_arguments(with(base(), {"--persistent-save-interval", "7"}), 1)->save_interval, 7);
  EXPECT_NE(error_of(with(base(), {"--persistent-save-interval", "7", "--save-interval", "5"}))
                .find("--persistent-save-interval (7) and --save-interval (5) are the same setting"),
            std::string::npos);

  EXPECT_EQ(parse_arguments(with(base(), {"--ckpt-format", "torch"}), 1)->ckpt_format, "torch");
  EXPECT_EQ(parse_arguments(with(base(), {"--ckpt-format", "torch_dist"}), 1)->ckpt_format, "torch_dist");
  EXPECT_NE(error_of(with(base(), {"--ckpt-format", "torch_dcp"})).find("--ckpt-format"), std::string::npos);
  EXPECT_NE(error_of(with(base(), {"--empty-unused-memory-level", "3"})).find("--empty-unused-memory-level"),
            std::string::npos);

  EXPECT_FALSE(parse_arguments(with(base(), {"--sequence-parallel"}), 1)->sequence_parallel);
  EXPECT_TRUE(parse_arguments(with(base(), {"--sequence-parallel", "--tensor-model-parallel-size", "2"}), 2)
                  ->sequence_parallel);
}

TEST(Arguments, OlderScriptSpellingsAndUnknownFlags) {
  auto a = *parse_arguments(with(base(), {"--train-iters", "220_000", "--lr-decay-iters=1_000", "--seed", "1_234",
                                          "--layernorm-epsilon", "1e-6", "--checkpoint-activations"}),
                            1);
  EXPECT_EQ(*a.train_iters, 220000);
  EXPECT_EQ(*a.lr_decay_iters, 1000);
  EXPECT_EQ(a.seed, 1234);
  EXPECT_DOUBLE_EQ(a.norm_epsilon, 1e-6);
  EXPECT_EQ(a.recompute_granularity, "full");
  // Only numbers lose underscores: a string value keeps them.
  EXPECT_EQ(parse_arguments(with(base(), {"--data-cache-path", "cache_1_2"}), 1)->data_cache_path, "cache_1_2");
  EXPECT_NE(error_of(with(base(), {"--seed", "1__2"})).find("--seed"), std::string::npos);
  EXPECT_NE(error_of(with(base(), {"--layernorm-epsilon", "1e-6", "--norm-epsilon", "1e-4"}))
                .find("--layernorm-epsilon (1e-06) and --norm-epsilon (0.0001) are the same setting"),
            std::string::npos);
  EXPECT_NE(error_of(with(base(), {"--checkpoint-activations", "--recompute-granularity", "selective"}))
                .find("--checkpoint-activations means --recompute-granularity full, but it is selective"),
            std::string::npos);

  const std::string unknown = error_of(with(base(), {"--hiden-size", "64", "--bogus-flag=3", "--num-layer", "2"}));
  EXPECT_NE(unknown.find("[arguments] unknown flags --hiden-size (did you mean --hidden-size?), --bogus-flag, "
                         "--num-layer (did you mean --num-layers?); see pretrain_gpt --help"),
            std::string::npos)
      << unknown;
}

// The table in arguments_table.h is the one list of settings: a field declared in the struct but
// missing there (or the other way round, or out of order) fails here.
TEST(ArgumentsTable, ListsEveryStructFieldInOrder) {
  std::ifstream in(std::string(MEGATRON_SOURCE_DIR) + "/include/megatron/training/arguments.h");
  ASSERT_TRUE(in);
  std::stringstream text;
  text << in.rdbuf();
  const std::string header = text.str();
  const size_t begin = header.find("struct MEGATRON_API Arguments {"), end = header.find("void validate(", begin);
  ASSERT_NE(begin, std::string::npos);
  ASSERT_NE(end, std::string::npos);
  std::vector<std::string> declared;
  static const std::regex field(R"(^\s+[A-Za-z_:<>, 0-9]+[ >](\w+)(\s*=[^;]*)?;)");
  std::istringstream lines(header.substr(begin, end - begin));
  for (std::string line; std::getline(lines, line);) {
    std::smatch m;
    if (std::regex_search(line, m, field)) declared.push_back(m[1]);
  }
  std::vector<std::string> tabled;
  for (const auto& f : argument_fields()) tabled.push_back(f.name);
  EXPECT_GT(declared.size(), 100u);
  EXPECT_EQ(declared, tabled);
}

// Every flag of the table is bound, documented in --help, and every saved one goes through a
// checkpoint's args dict and back.
TEST(ArgumentsTable, EveryFlagIsBoundHelpedAndSaved) {
  const auto help = arguments_help();
  auto a = *parse_arguments(with(base(), {"--ffn-hidden-size", "96", "--kv-channels", "16", "--lr-warmup-fraction",
                                          "0.1", "--seed", "7", "--data-cache-path", "x"}),
                            1);
  const auto dict = arguments_to_dict(a);
  const Arguments back = arguments_from_dict(dict);
  const auto again = arguments_to_dict(back);
  for (const auto& f : argument_fields()) {
    if (f.group == ArgGroup::derived) {
      EXPECT_TRUE(f.flag.empty()) << f.name;
      EXPECT_EQ(help.find(flag_of(f.name) + " "), std::string::npos) << f.name << " is derived, not a flag";
    } else {
      EXPECT_NE(help.find(f.flag), std::string::npos) << f.flag << " is not in --help";
      EXPECT_NE(std::string(f.help), "") << f.name;
    }
    EXPECT_EQ(dict.contains(f.name), f.saved) << f.name;
    if (f.saved) EXPECT_TRUE(dict.at(f.name) == again.at(f.name)) << f.name << " does not round-trip";
  }
  EXPECT_EQ(back.ffn_hidden_size, std::optional<int64_t>(96));
  EXPECT_EQ(back.seed, 7u);
  EXPECT_EQ(back.data_cache_path, "");  // not saved: where a run reads is not part of the model
}

// Each value is checked against its range in the table, from flags as from the TOML file.
TEST(ArgumentsTable, RangesAreChecked) {
  EXPECT_NE(error_of(with(base(), {"--adam-beta1", "2"})).find("--adam-beta1 must be in [0, 1) (got 2)"),
            std::string::npos);
  EXPECT_NE(error_of(with(base(), {"--adam-eps", "-1"})).find("--adam-eps must be positive (got -1)"),
            std::string::npos);
  EXPECT_NE(error_of(with(base(), {"--hidden-dropout", "1"})).find("--hidden-dropout must be in [0, 1) (got 1)"),
            std::string::npos);
  EXPECT_NE(error_of(with(base(), {"--lr-warmup-fraction", "1.5"}))
                .find("--lr-warmup-fraction must be between 0 and 1 (got 1.5)"),
            std::string::npos);
  EXPECT_NE(error_of(with(base(), {"--weight-decay", "nan"})).find("--weight-decay must not be negative (got nan)"),
            std::string::npos);
  EXPECT_NE(error_of(with(base(), {"--normalization", "BatchNorm"}))
                .find("--normalization must be one of LayerNorm, RMSNorm (got 'BatchNorm')"),
            std::string::npos);
  EXPECT_NE(error_of(with(base(), {"--num-workers", "-1"})).find("--num-workers must not be negative (got -1)"),
            std::string::npos);
  EXPECT_NE(error_of({"--hidden-size", "64", "--num-attention-heads", "4", "--seq-length", "32"})
                .find("--num-layers is required and must be positive (got 0)"),
            std::string::npos);
  const std::string path = ::testing::TempDir() + "/megatron_range.toml";
  {
    std::ofstream f(path);
    f << "clip-grad = -0.5\n";
  }
  EXPECT_NE(error_of(with(base(), {"--config", path})).find("--clip-grad must not be negative (got -0.5)"),
            std::string::npos);
  std::remove(path.c_str());
  // The defaults themselves are valid.
  EXPECT_EQ(error_of(base()), "");
}

TEST(Arguments, HelpListsMegatronGroups) {
  auto help = arguments_help();
  for (const char* flag : {"--tensor-model-parallel-size", "--global-batch-size", "--lr-decay-style", "--data-path",
                           "--vocab-file", "--fp16", "--eval-interval"}) {
    EXPECT_NE(help.find(flag), std::string::npos) << flag;
  }
}

}  // namespace
}  // namespace megatron::training
