#include "training/arguments/context_parallel_arguments.h"

#include <c10/util/Exception.h>

#include <algorithm>

namespace megatron::training::detail {

#define CP_CHECK(cond, ...) TORCH_CHECK(cond, "[arguments] ", __VA_ARGS__)

void validate_context_parallel(Arguments& a) {
  const int64_t cp = a.context_parallel_size, tp = a.tensor_model_parallel_size;
  const auto& types = a.cp_comm_type;
  CP_CHECK(types.size() == 1 || static_cast<int64_t>(types.size()) == a.num_layers,
           "--cp-comm-type takes one value or ", "one per layer (--num-layers ", a.num_layers, "), got ", types.size());
  const auto& levels = a.hierarchical_context_parallel_sizes;
  const bool hierarchical = std::find(types.begin(), types.end(), "a2a+p2p") != types.end();
  int64_t product = 1;
  for (int64_t s : levels) product *= s;
  CP_CHECK(!hierarchical || cp == 1 || (levels.size() == 2 && product == cp),
           "--cp-comm-type a2a+p2p needs --hierarchical-context-parallel-sizes A P (the a2a groups' size, then the "
           "p2p ring's) with A x P = --context-parallel-size (",
           cp, ")");
  CP_CHECK(levels.empty() || product == cp, "--hierarchical-context-parallel-sizes multiply to ", product,
           ", not --context-parallel-size (", cp, ")");
  if (cp == 1) return;
  // Each rank holds 2 of 2 x CP equal chunks; sequence parallelism then splits a rank's share over TP.
  CP_CHECK(a.seq_length % (2 * cp) == 0, "--seq-length (", a.seq_length, ") must be divisible by 2 x ",
           "--context-parallel-size (", 2 * cp, ")");
  CP_CHECK(!a.sequence_parallel || (a.seq_length / cp) % tp == 0, "with --sequence-parallel, --seq-length (",
           a.seq_length, ") / --context-parallel-size (", cp, ") must be divisible by --tensor-model-parallel-size (",
           tp, ")");
  for (const auto& t : types) {
    if (t != "a2a" && t != "a2a+p2p") continue;
    const int64_t split = t == "a2a" ? cp : levels[0];
    CP_CHECK((a.num_attention_heads / tp) % split == 0 && (a.num_query_groups / tp) % split == 0, "--cp-comm-type ", t,
             " splits each rank's attention heads (", a.num_attention_heads / tp, ") and key/value heads (",
             a.num_query_groups / tp, ") over ", t == "a2a" ? "--context-parallel-size (" : "its a2a groups (", split,
             "): both must be divisible by it");
  }
  CP_CHECK(a.position_embedding_type != "alibi",
           "--position-embedding-type alibi does not compose with --context-parallel-size > 1 (its bias needs the "
           "whole sequence's positions); use rope or learned_absolute");
  CP_CHECK(!a.reset_attention_mask,
           "--reset-attention-mask does not compose with --context-parallel-size > 1: attention over the split "
           "sequence is causal only");
  CP_CHECK(a.attention_dropout == 0.0, "--attention-dropout (", a.attention_dropout,
           ") must be 0 with --context-parallel-size > 1 (dropout inside the split attention is not implemented)");
  CP_CHECK(!a.domino, "--domino does not compose with --context-parallel-size > 1 yet; drop one");
}

}  // namespace megatron::training::detail
