// Megatron-Core's token dispatchers (megatron/core/transformer/moe/token_dispatcher.py): how the
// tokens of this rank reach the experts that the router chose for them, on whichever
// expert-parallel rank holds each, and how the experts' outputs come back.
//   allgather: every rank gathers all the expert-parallel group's tokens and runs its local
//              experts on those routed to them; the outputs are summed back by reduce-scatter.
//   alltoall:  each token travels once to the rank holding its expert (all-to-all), and back.
// Both give the same values; they differ in what travels. Within a local expert, tokens come in
// the source rank's order, then ascending token order (Megatron-Core's permute and chunk sort).
#pragma once

#include "megatron/export.h"

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "megatron/transformer/transformer_config.h"

namespace megatron::transformer {

// What the local experts receive: tokens grouped by local expert, tokens_per_expert rows each,
// with the probability each was routed with.
struct MEGATRON_API DispatchedTokens {
  at::Tensor tokens;  // [n, h]
  std::vector<int64_t> tokens_per_expert;
  at::Tensor probs;  // [n]
};

class MEGATRON_API MoETokenDispatcher {
 public:
  virtual ~MoETokenDispatcher() = default;
  // hidden [T, h], probs [T, E] (zero off the routed experts), routing_map [T, E] bool.
  virtual DispatchedTokens token_dispatch(const at::Tensor& hidden, const at::Tensor& probs,
                                          const at::Tensor& routing_map) = 0;
  // The local experts' outputs [n, h] (in token_dispatch's order) -> [T, h], each token's expert
  // outputs summed, in the outputs' dtype.
  virtual at::Tensor token_combine(const at::Tensor& expert_output) = 0;
};

// A dispatcher of config.moe_token_dispatcher_type() for one forward (it keeps what
// token_combine needs from token_dispatch).
MEGATRON_API std::unique_ptr<MoETokenDispatcher> make_token_dispatcher(const TransformerConfig& config);

}  // namespace megatron::transformer
