// Helpers for the TP=N vs TP=1 tests: relative error, a TP group made of the whole world.
#pragma once

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <string>

#include "distributed_test.h"
#include "megatron/tensor_parallel/mappings.h"
#include "megatron/tensor_parallel/sharding.h"

namespace megatron::testing {

// max |a - b| / max |b|, so 1e-5 means "equal to 5 significant digits of the largest entry".
inline double rel_error(const at::Tensor& a, const at::Tensor& b) {
  EXPECT_EQ(a.sizes(), b.sizes());
  if (a.sizes() != b.sizes()) return 1e30;
  const double denom = std::max(b.abs().max().item<double>(), 1e-12);
  return (a.to(at::kDouble) - b.to(at::kDouble)).abs().max().item<double>() / denom;
}

#define EXPECT_REL_CLOSE(a, b, tol)                               \
  do {                                                            \
    const double err_ = ::megatron::testing::rel_error((a), (b)); \
    EXPECT_LE(err_, (tol)) << #a << " vs " << #b;                 \
  } while (0)

// The whole world as the TP group (nullptr when there is one rank: no tensor parallelism).
inline tensor_parallel::GroupPtr world_tp_group() {
  auto w = world();
  return w->size() > 1 ? w : nullptr;
}

inline tensor_parallel::ShardLayout layout(int64_t dim, int64_t chunks = 1) {
  auto g = world_tp_group();
  return tensor_parallel::ShardLayout{dim, chunks, tensor_parallel::group_rank(g), tensor_parallel::group_size(g)};
}

// A tensor equal on every rank (seeded CPU generator).
inline at::Tensor seeded_randn(at::IntArrayRef shape, uint64_t seed, double std = 1.0) {
  return tensor_parallel::init_full_tensor(tensor_parallel::ParamInit{tensor_parallel::ParamInit::kNormal, std, {}},
                                           shape, seed, "test");
}

// The full tensor from every rank's shard.
inline at::Tensor gather_shards(const at::Tensor& shard, const tensor_parallel::ShardLayout& l,
                                const tensor_parallel::GroupPtr& g) {
  if (!l.is_sharded()) return shard;
  at::Tensor all = tensor_parallel::all_gather_along_dim(shard.contiguous().unsqueeze(0), g, 0);
  std::vector<at::Tensor> shards;
  for (int64_t r = 0; r < all.size(0); ++r) shards.push_back(all[r]);
  return l.unshard(shards);
}

}  // namespace megatron::testing
