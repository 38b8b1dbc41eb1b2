// The tiny GPT the training tests run: mock data, no dropout (its draws differ between
// layouts by design), a padded vocabulary that is the same at TP 1, 2 and 4.
#pragma once

#include "megatron/training/arguments.h"

namespace megatron::testing {

inline training::Arguments tiny_gpt_args() {
  training::Arguments a;
  a.num_layers = 2;
  a.hidden_size = 32;
  a.num_attention_heads = 4;
  a.seq_length = 16;
  a.micro_batch_size = 2;
  a.global_batch_size = 8;
  a.train_iters = 12;
  a.lr = 2e-3;
  a.min_lr = 2e-4;
  a.lr_warmup_iters = 2;
  a.lr_decay_style = "cosine";
  a.mock_data = true;
  a.vocab_size = 256;
  a.make_vocab_size_divisible_by = 32;
  a.attention_dropout = 0;
  a.hidden_dropout = 0;
  a.log_interval = 4;
  a.eval_interval = 6;
  a.eval_iters = 1;
  a.num_workers = 0;
  a.device = "cpu";
  return a;
}

}  // namespace megatron::testing
