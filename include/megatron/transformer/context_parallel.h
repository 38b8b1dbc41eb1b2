// Context parallelism (Megatron-Core's --context-parallel-size): the sequence is cut into 2 x CP
// chunks and CP rank i holds chunks i and 2 x CP - 1 - i, so that each rank's share of causal
// attention is the same. Everything but attention is per token; attention exchanges keys and
// values over the CP group in one of three ways (--cp-comm-type):
//   p2p        a ring: key/value blocks pass to the next rank while the current one is computed,
//              merged by their log-sum-exp; the backward passes dK/dV around the ring the same way
//   all_gather keys and values gathered whole (few key/value heads: GQA)
//   a2a        all-to-all: heads scattered, the sequence gathered, full attention, and back (Ulysses)
//   a2a+p2p    hierarchical: a2a within groups of consecutive CP ranks, whose gathered chunks form
//              the two load-balanced chunks of a ring of p2p over the groups
#pragma once

#include "megatron/export.h"

#include <ATen/core/Tensor.h>

#include <memory>
#include <string>
#include <vector>

namespace megatron::comm {
class ProcessGroup;
}

namespace megatron::transformer {

enum class CPCommType { kP2P, kAllGather, kA2A, kA2AP2P };

// "p2p" | "all_gather" | "a2a" | "a2a+p2p"; throws naming the value otherwise.
MEGATRON_API CPCommType parse_cp_comm_type(const std::string& name);
MEGATRON_API const char* to_string(CPCommType type);

// t's dimension `dim` (2 x cp_size chunks) cut to CP rank cp_rank's two chunks, in order.
MEGATRON_API at::Tensor slice_for_context_parallel_rank(const at::Tensor& t, int64_t dim, int cp_size, int cp_rank);

// Causal attention of this rank's queries over the whole sequence, softmax scale 1/sqrt(hn).
// q [b, np, s, hn], k and v [b, ng, s, hn] (s: this rank's two chunks; ng divides np, a query head
// h using key/value head h / (np / ng)) -> [b, np, s, hn]. Differentiable in q, k and v. a2a needs
// np and ng divisible by the group's size; a2a+p2p takes hierarchical_groups = {a2a group of
// consecutive CP ranks, p2p group across them} and np and ng divisible by the first's size.
MEGATRON_API at::Tensor context_parallel_attention(
    const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, CPCommType type,
    const std::shared_ptr<comm::ProcessGroup>& cp_group,
    const std::vector<std::shared_ptr<comm::ProcessGroup>>& hierarchical_groups = {});

}  // namespace megatron::transformer
