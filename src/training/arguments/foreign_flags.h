// Megatron-LM flags that belong to its other programs (inference, RL, Mamba, T5, multimodal) or to
// model features not built here: refused by family with the reason, never as "unknown".
#pragma once

#include <string>

namespace megatron::training::detail {

// Why pretrain_gpt refuses `flag` ("--prompts"), or "" for a flag of no known family.
std::string foreign_flag_reason(const std::string& flag);

}  // namespace megatron::training::detail
