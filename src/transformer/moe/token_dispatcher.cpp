// The allgather and alltoall token dispatchers. With one expert-parallel rank both are the plain
// permute / unpermute of MoELayer; what they add is the traffic between expert-parallel ranks.
#include "megatron/transformer/moe/token_dispatcher.h"

#include <ATen/ATen.h>

#include "megatron/readback.h"
#include "megatron/tensor_parallel/mappings.h"

namespace megatron::transformer {

namespace tp = megatron::tensor_parallel;

namespace {

// The (token, expert) pairs of routing_map [T, E] in expert-major order, tokens ascending
// (Megatron-Core's permute): each pair's token, and its probability.
struct Permutation {
  at::Tensor token_of;  // [n]
  at::Tensor probs;     // [n]
  int64_t tokens = 0;   // T
};

Permutation permute(const at::Tensor& probs, const at::Tensor& routing_map) {
  const at::Tensor pairs = routing_map.t().flatten().nonzero().squeeze(1);
  return {pairs.remainder(routing_map.size(0)), probs.t().flatten().index_select(0, pairs), routing_map.size(0)};
}

// Each token's rows of `out` (one per pair, in the permutation's order) summed: [T, h].
at::Tensor unpermute(const Permutation& p, const at::Tensor& out) {
  return at::zeros({p.tokens, out.size(1)}, out.options()).index_add(0, p.token_of, out);
}

std::vector<int64_t> to_vector(const at::Tensor& host_counts) {
  const at::Tensor c = host_counts.to(at::kLong).contiguous();
  return {c.data_ptr<int64_t>(), c.data_ptr<int64_t>() + c.numel()};
}

// Megatron-Core's MoEAllGatherTokenDispatcher.
class AllGatherDispatcher : public MoETokenDispatcher {
 public:
  explicit AllGatherDispatcher(const TransformerConfig& config) : config_(config) {}

  DispatchedTokens token_dispatch(const at::Tensor& hidden, const at::Tensor& probs,
                                  const at::Tensor& routing_map) override {
    // Over the ETP x EP ranks: each rank's experts (their expert-TP shard) see every rank's
    // tokens; the backward sums their partial gradients.
    const auto& group = config_.etp_ep_group();
    const at::Tensor x = tp::gather_from_sequence_parallel_region(hidden, group);
    const at::Tensor all_probs = tp::gather_from_sequence_parallel_region(probs, group);
    const at::Tensor all_map = tp::group_size(group) == 1
                                   ? routing_map
                                   : tp::all_gather_along_dim(routing_map.to(at::kByte), group, 0).to(at::kBool);
    const int64_t first = config_.local_expert_offset(), local = config_.num_local_experts();
    const at::Tensor map = all_map.narrow(1, first, local);
    perm_ = permute(all_probs.narrow(1, first, local), map);
    // The host needs the split sizes: one device read per MoE layer and micro-batch.
    return {x.index_select(0, perm_.token_of), to_vector(read_to_host(map.sum(0))), perm_.probs};
  }

  at::Tensor token_combine(const at::Tensor& expert_output) override {
    // Each rank holds its experts' (expert-TP partial) share of every token; the sum over the
    // ranks returns this rank's tokens whole.
    return tp::reduce_scatter_to_sequence_parallel_region(unpermute(perm_, expert_output), config_.etp_ep_group());
  }

 private:
  const TransformerConfig& config_;
  Permutation perm_;
};

// Rows in chunks of `sizes` (in order), put in the order `order` gives.
at::Tensor sort_chunks(const at::Tensor& x, const std::vector<int64_t>& sizes, const std::vector<size_t>& order) {
  if (order.size() <= 1) return x;
  const auto chunks = x.split_with_sizes(sizes);
  std::vector<at::Tensor> sorted;
  for (size_t i : order) sorted.push_back(chunks[i]);
  return at::cat(sorted);
}

// Megatron-Core's MoEAlltoAllTokenDispatcher. Its all-to-all over EP and all-gather over expert
// TP are one all-to-all here, over the ETP x EP group (rank = ep * ETP + etp): a token routed to
// expert-parallel rank r goes to each of r's expert-TP ranks, whose partial outputs come back and
// are summed with the token's other experts.
class AllToAllDispatcher : public MoETokenDispatcher {
 public:
  explicit AllToAllDispatcher(const TransformerConfig& config) : config_(config) {}

  DispatchedTokens token_dispatch(const at::Tensor& hidden, const at::Tensor& probs,
                                  const at::Tensor& routing_map) override {
    const auto& group = config_.etp_ep_group();
    const int ranks = tp::group_size(group), me = tp::group_rank(group);
    const int etp = static_cast<int>(config_.expert_tensor_parallel_size().value_or(1));
    const int64_t local = config_.num_local_experts(), first = config_.local_expert_offset();
    perm_ = permute(probs, routing_map);
    // Every rank's tokens per expert ([ranks, E]), in one device read: the splits of both exchanges.
    const at::Tensor counts = tp::all_gather_along_dim(routing_map.sum(0).unsqueeze(0), group, 0);
    const std::vector<int64_t> all = to_vector(read_to_host(counts));
    const int64_t experts = routing_map.size(1);
    auto count = [&](int rank, int64_t expert) { return all[static_cast<size_t>(rank * experts + expert)]; };
    send_.assign(ranks, 0);
    recv_.assign(ranks, 0);
    chunk_sizes_.clear();
    DispatchedTokens out;
    out.tokens_per_expert.assign(local, 0);
    std::vector<int64_t> begin_of_ep(ranks / etp + 1, 0);  // where each EP rank's experts start in perm_
    for (int r = 0; r < ranks; ++r) {
      for (int64_t l = 0; l < local; ++l) {
        send_[r] += count(me, (r / etp) * local + l);
        const int64_t n = count(r, first + l);
        recv_[r] += n;
        chunk_sizes_.push_back(n);  // arriving from rank r for local expert l, in (r, l) order
        out.tokens_per_expert[l] += n;
      }
      if (r % etp == 0) begin_of_ep[r / etp + 1] = begin_of_ep[r / etp] + send_[r];
    }
    if (etp > 1) {  // each EP rank's run of pairs, once per expert-TP rank of it
      std::vector<at::Tensor> runs;
      for (int r = 0; r < ranks; ++r)
        runs.push_back(at::arange(begin_of_ep[r / etp], begin_of_ep[r / etp + 1], perm_.token_of.options()));
      const at::Tensor copies = at::cat(runs);
      perm_.token_of = perm_.token_of.index_select(0, copies);
      perm_.probs = perm_.probs.index_select(0, copies);
    }
    const at::Tensor tokens = hidden.index_select(0, perm_.token_of);
    if (ranks == 1) {
      out.tokens = tokens;
      out.probs = perm_.probs;
      return out;
    }
    // (rank, expert) chunks -> (expert, rank): each local expert's tokens together.
    by_expert_.clear();
    by_rank_.assign(chunk_sizes_.size(), 0);
    for (int64_t l = 0; l < local; ++l)
      for (int r = 0; r < ranks; ++r) {
        by_rank_[r * local + l] = by_expert_.size();
        by_expert_.push_back(r * local + l);
      }
    out.tokens = sort_chunks(tp::all_to_all(group, tokens, recv_, send_), chunk_sizes_, by_expert_);
    out.probs =
        sort_chunks(tp::all_to_all(group, perm_.probs.unsqueeze(1), recv_, send_), chunk_sizes_, by_expert_).squeeze(1);
    return out;
  }

  at::Tensor token_combine(const at::Tensor& expert_output) override {
    const auto& group = config_.etp_ep_group();
    if (tp::group_size(group) == 1) return unpermute(perm_, expert_output);
    std::vector<int64_t> sorted_sizes;
    for (size_t i : by_expert_) sorted_sizes.push_back(chunk_sizes_[i]);
    const at::Tensor by_rank = sort_chunks(expert_output, sorted_sizes, by_rank_);
    return unpermute(perm_, tp::all_to_all(group, by_rank, send_, recv_));
  }

 private:
  const TransformerConfig& config_;
  Permutation perm_;
  std::vector<int64_t> send_, recv_, chunk_sizes_;
  std::vector<size_t> by_expert_, by_rank_;
};

}  // namespace

std::unique_ptr<MoETokenDispatcher> make_token_dispatcher(const TransformerConfig& config) {
  if (config.moe_token_dispatcher_type() == "alltoall") return std::make_unique<AllToAllDispatcher>(config);
  return std::make_unique<AllGatherDispatcher>(config);
}

}  // namespace megatron::transformer
