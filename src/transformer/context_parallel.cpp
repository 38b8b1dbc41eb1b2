// Attention over a sequence split across the context-parallel group (context_parallel.h).
#include "megatron/transformer/context_parallel.h"

#include <ATen/ATen.h>
#include <c10/util/Exception.h>
#include <torch/csrc/autograd/custom_function.h>

#include <cmath>
#include <limits>

#include "../tensor_parallel/autograd_group.h"
#include "megatron/comm/process_group.h"
#include "megatron/tensor_parallel/mappings.h"

namespace megatron::transformer {

using tensor_parallel::GroupPtr;

CPCommType parse_cp_comm_type(const std::string& name) {
  if (name == "p2p") return CPCommType::kP2P;
  if (name == "all_gather") return CPCommType::kAllGather;
  if (name == "a2a") return CPCommType::kA2A;
  if (name == "a2a+p2p") return CPCommType::kA2AP2P;
  TORCH_CHECK(false, "[context_parallel] cp_comm_type must be p2p, all_gather, a2a or a2a+p2p, got '", name, "'");
}

const char* to_string(CPCommType type) {
  switch (type) {
    case CPCommType::kP2P: return "p2p";
    case CPCommType::kAllGather: return "all_gather";
    case CPCommType::kA2A: return "a2a";
    case CPCommType::kA2AP2P: return "a2a+p2p";
  }
  return "?";
}

at::Tensor slice_for_context_parallel_rank(const at::Tensor& t, int64_t dim, int cp_size, int cp_rank) {
  if (cp_size == 1) return t;
  if (dim < 0) dim += t.dim();
  const int64_t len = t.size(dim);
  TORCH_CHECK(len % (2 * cp_size) == 0, "[context_parallel] a sequence of ", len,
              " is not divisible by 2 x context-parallel size (", 2 * cp_size, ")");
  const int64_t c = len / (2 * cp_size);
  return at::cat({t.narrow(dim, cp_rank * c, c), t.narrow(dim, (2 * cp_size - 1 - cp_rank) * c, c)}, dim);
}

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;
constexpr double kInf = std::numeric_limits<double>::infinity();

// Global positions of CP rank `rank`'s rows: its chunks rank and 2N-1-rank, c each.
at::Tensor positions_of(int n, int rank, int64_t c, const at::TensorOptions& options) {
  auto first = at::arange(rank * c, (rank + 1) * c, options.dtype(at::kLong));
  return at::cat({first, first + (2 * n - 1 - 2 * rank) * c});
}

// Every rank's positions, in rank order: the rows an all-gather or all-to-all of the sequence gives.
at::Tensor all_positions(int n, int64_t c, const at::TensorOptions& options) {
  std::vector<at::Tensor> all;
  for (int j = 0; j < n; ++j) all.push_back(positions_of(n, j, c, options));
  return at::cat(all);
}

// [b, ng, s, d] -> [b, np, s, d]: each key/value head serves np/ng consecutive query heads.
at::Tensor expand_heads(const at::Tensor& kv, int64_t np) {
  return kv.size(1) == np ? kv : kv.repeat_interleave(np / kv.size(1), 1);
}

// The gradient of expand_heads: the query heads sharing a key/value head summed.
at::Tensor fold_heads(const at::Tensor& g, int64_t ng) {
  const int64_t np = g.size(1);
  return np == ng ? g : g.view({g.size(0), ng, np / ng, g.size(2), g.size(3)}).sum(2);
}

// --- p2p: the ring ---------------------------------------------------------------------------------

// Step i of the ring holds the keys/values of CP rank j = (r - i) mod N. This rank's queries sit
// at chunks r and 2N-1-r, j's keys at chunks j and 2N-1-j, so causally: step 0 is the local
// block with the causal mask; j < r lets every query see chunk j only; j > r lets only the
// queries of chunk 2N-1-r see both of j's chunks. No step computes a block that is all masked.
struct Step {
  int64_t q_from, kv_len;
  bool causal;
};

Step step_of(int i, int r, int n, int64_t c) {
  if (i == 0) return {0, 2 * c, true};
  const int j = ((r - i) % n + n) % n;
  return j < r ? Step{0, c, false} : Step{c, 2 * c, false};
}

// One block of attention: q [b, np, sq, d] over k, v [b, np, sk, d]; causal: the block on the
// diagonal (sq == sk), query i seeing keys 0..i. On the CPU ATen's flash kernels, which return
// the log-sum-exp and take the final one back, so that no sq x sk matrix is made; elsewhere the
// same in fp32 matmuls (the CUDA flash blocks belong to the GPU work).
struct Block {
  at::Tensor out, lse;  // fp32: [b, np, sq, d], [b, np, sq]
};

at::Tensor block_probabilities(const at::Tensor& q, const at::Tensor& k, const at::Tensor& lse, bool causal,
                               double scale) {
  at::Tensor s = at::matmul(q.to(at::kFloat), k.to(at::kFloat).transpose(-2, -1)).mul_(scale);
  if (causal) s.masked_fill_(at::ones({q.size(-2), k.size(-2)}, q.options().dtype(at::kBool)).triu_(1), -kInf);
  return lse.defined() ? s.sub_(lse.unsqueeze(-1)).exp_() : s;
}

Block block_forward(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, bool causal, double scale) {
  if (q.is_cpu()) {
    auto [out, lse] = at::_scaled_dot_product_flash_attention_for_cpu(q, k, v, 0.0, causal, {}, scale);
    return {out.to(at::kFloat), lse.to(at::kFloat)};
  }
  at::Tensor scores = block_probabilities(q, k, {}, causal, scale);
  at::Tensor lse = scores.logsumexp(-1);
  return {at::matmul(scores.sub_(lse.unsqueeze(-1)).exp_(), v.to(at::kFloat)), lse};
}

// The block's share of dq, dk, dv given the final output and log-sum-exp of its queries.
std::tuple<at::Tensor, at::Tensor, at::Tensor> block_backward(const at::Tensor& dout, const at::Tensor& q,
                                                              const at::Tensor& k, const at::Tensor& v,
                                                              const at::Tensor& out, const at::Tensor& lse, bool causal,
                                                              double scale) {
  if (q.is_cpu())
    return at::_scaled_dot_product_flash_attention_for_cpu_backward(dout, q, k, v, out, lse, 0.0, causal, {}, scale);
  at::Tensor p = block_probabilities(q, k, lse, causal, scale), d = dout.to(at::kFloat);
  at::Tensor delta = (d * out.to(at::kFloat)).sum(-1, true);  // rowsum(dO * O), the softmax's correction
  at::Tensor dv = at::matmul(p.transpose(-2, -1), d);
  at::Tensor ds = p.mul_(at::matmul(d, v.to(at::kFloat).transpose(-2, -1)).sub_(delta));
  return {at::matmul(ds, k.to(at::kFloat)).mul_(scale), at::matmul(ds.transpose(-2, -1), q.to(at::kFloat)).mul_(scale),
          dv};
}

comm::WorkHandle pass_along(comm::ProcessGroup& g, const at::Tensor& send, at::Tensor& recv) {
  const int n = g.size(), r = g.rank();
  return g.batch_isend_irecv({{comm::P2POp::kSend, send, (r + 1) % n}, {comm::P2POp::kRecv, recv, (r - 1 + n) % n}});
}

// The running output and log-sum-exp merged block by block in fp32; the backward recomputes each
// block from the final log-sum-exp (as flash attention does), so nothing of size s x s is kept.
struct RingAttention : torch::autograd::Function<RingAttention> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                            GroupPtr group) {
    auto& g = *group;
    const int n = g.size(), r = g.rank();
    const int64_t np = q.size(1), s = q.size(2), c = s / 2;
    const double scale = 1.0 / std::sqrt(static_cast<double>(q.size(3)));
    at::Tensor out = at::zeros(q.sizes(), q.options().dtype(at::kFloat));
    at::Tensor lse = at::full({q.size(0), np, s}, -kInf, out.options());
    at::Tensor kv = at::stack({k, v}).contiguous(), incoming = at::empty_like(kv);
    for (int i = 0; i < n; ++i) {
      comm::WorkHandle pending = i + 1 < n ? pass_along(g, kv, incoming) : nullptr;  // under this block's compute
      const Step st = step_of(i, r, n, c);
      const int64_t rows = s - st.q_from;
      Block b = block_forward(q.narrow(2, st.q_from, rows), expand_heads(kv[0].narrow(2, 0, st.kv_len), np),
                              expand_heads(kv[1].narrow(2, 0, st.kv_len), np), st.causal, scale);
      at::Tensor o = out.narrow(2, st.q_from, rows), l = lse.narrow(2, st.q_from, rows);
      at::Tensor merged = at::logaddexp(l, b.lse);
      o.mul_((l - merged).exp_().unsqueeze(-1)).add_(b.out.mul_((b.lse - merged).exp_().unsqueeze(-1)));
      l.copy_(merged);
      if (pending) {
        pending->wait();
        std::swap(kv, incoming);
      }
    }
    at::Tensor result = out.to(q.scalar_type());
    ctx->save_for_backward({q, k, v, result, lse});
    tensor_parallel::detail::save_group(ctx, group);
    return result;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const at::Tensor &q = saved[0], &k = saved[1], &v = saved[2], &out = saved[3], &lse = saved[4];
    auto group = tensor_parallel::detail::load_group(ctx);
    auto& g = *group;
    const int n = g.size(), r = g.rank();
    const int64_t np = q.size(1), ng = k.size(1), s = q.size(2), c = s / 2;
    const double scale = 1.0 / std::sqrt(static_cast<double>(q.size(3)));
    at::Tensor dout = grads[0].to(q.scalar_type()).contiguous();
    at::Tensor dq = at::zeros(q.sizes(), q.options().dtype(at::kFloat));
    at::Tensor kv = at::stack({k, v}).contiguous(), incoming = at::empty_like(kv);
    // The key/value gradients of the block in hand travel with it and are home after N passes;
    // each pass runs under the next block's compute, as the key/value blocks' do.
    at::Tensor dkv = at::zeros({2, k.size(0), ng, s, k.size(3)}, dq.options()), dkv_in = at::empty_like(dkv);
    comm::WorkHandle dkv_pending;
    for (int i = 0; i < n; ++i) {
      comm::WorkHandle pending = i + 1 < n ? pass_along(g, kv, incoming) : nullptr;
      const Step st = step_of(i, r, n, c);
      const int64_t rows = s - st.q_from;
      auto [dq_b, dk_b, dv_b] = block_backward(
          dout.narrow(2, st.q_from, rows), q.narrow(2, st.q_from, rows),
          expand_heads(kv[0].narrow(2, 0, st.kv_len), np), expand_heads(kv[1].narrow(2, 0, st.kv_len), np),
          out.narrow(2, st.q_from, rows), lse.narrow(2, st.q_from, rows), st.causal, scale);
      dq.narrow(2, st.q_from, rows).add_(dq_b);
      if (dkv_pending) {  // this block's gradients so far, from the previous rank
        dkv_pending->wait();
        std::swap(dkv, dkv_in);
      }
      dkv[0].narrow(2, 0, st.kv_len).add_(fold_heads(dk_b, ng));
      dkv[1].narrow(2, 0, st.kv_len).add_(fold_heads(dv_b, ng));
      if (pending) {
        pending->wait();
        std::swap(kv, incoming);
      }
      dkv_pending = pass_along(g, dkv, dkv_in);
    }
    dkv_pending->wait();  // this rank's own block's gradients, home
    return {dq.to(q.scalar_type()), dkv_in[0].to(k.scalar_type()), dkv_in[1].to(v.scalar_type()), at::Tensor()};
  }
};

// --- all_gather and a2a ------------------------------------------------------------------------

// [b, n, s, d] -> [b, n, N*s, d]: every rank's rows in rank order (backward: reduce-scatter).
at::Tensor gather_sequence(const at::Tensor& x, const GroupPtr& group) {
  at::Tensor front = x.permute({2, 0, 1, 3}).contiguous();  // the sequence first
  return tensor_parallel::gather_from_sequence_parallel_region(front, group).permute({1, 2, 0, 3});
}

// Ulysses: [b, n, s, d] -> [b, n/N, N*s, d], head block j to rank j, the rows in rank order.
at::Tensor heads_to_sequence(const at::Tensor& x, const GroupPtr& group) {
  const int64_t n = group->size(), b = x.size(0), h = x.size(1) / n, s = x.size(2), d = x.size(3);
  at::Tensor send = x.reshape({b, n, h, s, d}).permute({1, 0, 2, 3, 4}).reshape({n * b, h, s, d});
  at::Tensor got = tensor_parallel::all_to_all(group, send);  // block j: rank j's rows of my heads
  return got.view({n, b, h, s, d}).permute({1, 2, 0, 3, 4}).reshape({b, h, n * s, d});
}

// The inverse: [b, n/N, N*s, d] (rows in rank order) -> [b, n, s, d].
at::Tensor sequence_to_heads(const at::Tensor& y, const GroupPtr& group) {
  const int64_t n = group->size(), b = y.size(0), h = y.size(1), s = y.size(2) / n, d = y.size(3);
  at::Tensor send = y.reshape({b, h, n, s, d}).permute({2, 0, 1, 3, 4}).reshape({n * b, h, s, d});
  at::Tensor got = tensor_parallel::all_to_all(group, send);  // block j: my rows of rank j's heads
  return got.view({n, b, h, s, d}).permute({1, 0, 2, 3, 4}).reshape({b, n * h, s, d});
}

}  // namespace

at::Tensor context_parallel_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, CPCommType type,
                                      const std::shared_ptr<comm::ProcessGroup>& cp_group,
                                      const std::vector<std::shared_ptr<comm::ProcessGroup>>& hierarchical_groups) {
  const int n = cp_group ? cp_group->size() : 1;
  const int64_t np = q.size(1), ng = k.size(1), s = q.size(2);
  TORCH_CHECK(q.dim() == 4 && k.sizes() == v.sizes() && k.size(2) == s && np % ng == 0,
              "[context_parallel] expected q [b, np, s, d] and k, v [b, ng, s, d] with ng dividing np, got ", q.sizes(),
              ", ", k.sizes(), ", ", v.sizes());
  TORCH_CHECK(s % 2 == 0, "[context_parallel] this rank's sequence (", s, ") must be its two chunks, an even length");
  if (n == 1) return at::scaled_dot_product_attention(q, expand_heads(k, np), expand_heads(v, np), {}, 0.0, true);
  const int64_t c = s / 2;
  switch (type) {
    case CPCommType::kP2P: return RingAttention::apply(q, k, v, cp_group);
    case CPCommType::kAllGather: {
      at::Tensor mine = positions_of(n, cp_group->rank(), c, q.options());
      at::Tensor keep = mine.unsqueeze(1) >= all_positions(n, c, q.options()).unsqueeze(0);  // causal by position
      return at::scaled_dot_product_attention(q, expand_heads(gather_sequence(k, cp_group), np),
                                              expand_heads(gather_sequence(v, cp_group), np), keep);
    }
    case CPCommType::kA2A: {
      TORCH_CHECK(np % n == 0 && ng % n == 0, "[context_parallel] a2a needs the attention heads (", np,
                  ") and key/value heads (", ng, ") of this rank divisible by the context-parallel size (", n, ")");
      // The gathered rows are in rank order; sorted by position, full causal attention applies.
      at::Tensor order = at::argsort(all_positions(n, c, q.options())), back = at::argsort(order);
      auto full = [&](const at::Tensor& x) { return heads_to_sequence(x, cp_group).index_select(2, order); };
      at::Tensor context = at::scaled_dot_product_attention(full(q), expand_heads(full(k), np / n),
                                                            expand_heads(full(v), np / n), {}, 0.0, true);
      return sequence_to_heads(context.index_select(2, back), cp_group);
    }
    case CPCommType::kA2AP2P: {
      TORCH_CHECK(hierarchical_groups.size() == 2 && hierarchical_groups[0] && hierarchical_groups[1] &&
                      hierarchical_groups[0]->size() * hierarchical_groups[1]->size() == n,
                  "[context_parallel] a2a+p2p needs two hierarchical groups (a2a, p2p) whose sizes multiply to the "
                  "context-parallel size (",
                  n, ")");
      const GroupPtr &inner = hierarchical_groups[0], &outer = hierarchical_groups[1];
      const int a = inner->size();
      TORCH_CHECK(np % a == 0 && ng % a == 0, "[context_parallel] a2a+p2p needs the attention heads (", np,
                  ") and key/value heads (", ng, ") of this rank divisible by its a2a size (", a, ")");
      // The a2a group is CP ranks g*a .. g*a+a-1 (g: this rank's place in the p2p group); its
      // chunks sorted by position are chunks g and 2p-1-g of a ring of p over chunks a times as
      // long, which the p2p ring then attends over with a/N of the heads.
      const int g = outer->rank();
      std::vector<at::Tensor> held;
      for (int i = 0; i < a; ++i) held.push_back(positions_of(n, g * a + i, c, q.options()));
      at::Tensor order = at::argsort(at::cat(held)), back = at::argsort(order);
      auto gathered = [&](const at::Tensor& x) { return heads_to_sequence(x, inner).index_select(2, order); };
      at::Tensor context = RingAttention::apply(gathered(q), gathered(k), gathered(v), outer);
      return sequence_to_heads(context.index_select(2, back), inner);
    }
  }
  TORCH_CHECK(false, "[context_parallel] unknown cp_comm_type");
}

}  // namespace megatron::transformer
