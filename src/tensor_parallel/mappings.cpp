#include "megatron/tensor_parallel/mappings.h"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/record_function.h>
#include <torch/csrc/autograd/custom_function.h>

#include <numeric>

#include "autograd_group.h"
#include "megatron/tensor_parallel/sharding.h"

namespace megatron::tensor_parallel {
namespace {

using detail::load_group;
using detail::save_group;
using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// The nonblocking collective, waited at once: MPI's nonblocking all-reduce may add more than two
// ranks' partial sums in another order than its blocking one, and the overlapped layers (the
// column-parallel backward, Domino) use the nonblocking one; this keeps them bit-identical.
at::Tensor all_reduce(const at::Tensor& input, const GroupPtr& group) {
  if (group_size(group) == 1) return input;
  at::Tensor out = input.contiguous().clone();
  group->all_reduce_async(out)->wait();
  return out;
}

at::Tensor reduce_scatter_dim0(const at::Tensor& input, const GroupPtr& group) {
  const int n = group_size(group);
  if (n == 1) return input;
  TORCH_CHECK(input.size(0) % n == 0, "[tensor_parallel] reduce-scatter: dim 0 (", input.size(0),
              ") must be divisible by the tensor-parallel size (", n, ")");
  auto sizes = input.sizes().vec();
  sizes[0] /= n;
  at::Tensor out = at::empty(sizes, input.options());
  group->reduce_scatter(out, input.contiguous());
  return out;
}

struct CopyToRegion : torch::autograd::Function<CopyToRegion> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, GroupPtr g) {
    save_group(ctx, g);
    return x.view_as(x);
  }
  static variable_list backward(AutogradContext* ctx, variable_list grad) {
    return {all_reduce(grad[0], load_group(ctx)), at::Tensor()};
  }
};

struct ReduceFromRegion : torch::autograd::Function<ReduceFromRegion> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, GroupPtr g) { return all_reduce(x, g); }
  static variable_list backward(AutogradContext* ctx, variable_list grad) { return {grad[0], at::Tensor()}; }
};

struct ScatterToRegion : torch::autograd::Function<ScatterToRegion> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, GroupPtr g) {
    save_group(ctx, g);
    return split_along_dim(x, g, x.dim() - 1);
  }
  static variable_list backward(AutogradContext* ctx, variable_list grad) {
    return {all_gather_along_dim(grad[0], load_group(ctx), grad[0].dim() - 1), at::Tensor()};
  }
};

struct GatherFromRegion : torch::autograd::Function<GatherFromRegion> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, GroupPtr g) {
    save_group(ctx, g);
    return all_gather_along_dim(x, g, x.dim() - 1);
  }
  static variable_list backward(AutogradContext* ctx, variable_list grad) {
    return {split_along_dim(grad[0], load_group(ctx), grad[0].dim() - 1), at::Tensor()};
  }
};

struct ScatterToSequence : torch::autograd::Function<ScatterToSequence> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, GroupPtr g) {
    save_group(ctx, g);
    return split_along_dim(x, g, 0);
  }
  static variable_list backward(AutogradContext* ctx, variable_list grad) {
    return {all_gather_along_dim(grad[0], load_group(ctx), 0), at::Tensor()};
  }
};

struct GatherFromSequence : torch::autograd::Function<GatherFromSequence> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, GroupPtr g, bool tp_output_grad) {
    save_group(ctx, g);
    ctx->saved_data["tp_output_grad"] = tp_output_grad;
    return all_gather_along_dim(x, g, 0);
  }
  static variable_list backward(AutogradContext* ctx, variable_list grad) {
    auto g = load_group(ctx);
    at::Tensor out =
        ctx->saved_data["tp_output_grad"].toBool() ? reduce_scatter_dim0(grad[0], g) : split_along_dim(grad[0], g, 0);
    return {out, at::Tensor(), at::Tensor()};
  }
};

struct ReduceScatterToSequence : torch::autograd::Function<ReduceScatterToSequence> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, GroupPtr g) {
    save_group(ctx, g);
    return reduce_scatter_dim0(x, g);
  }
  static variable_list backward(AutogradContext* ctx, variable_list grad) {
    return {all_gather_along_dim(grad[0], load_group(ctx), 0), at::Tensor()};
  }
};

// Rows in runs to each rank: output_splits rows arrive from each rank in rank order.
at::Tensor exchange_rows(const at::Tensor& input, const GroupPtr& group, const std::vector<int64_t>& output_splits,
                         const std::vector<int64_t>& input_splits) {
  auto sizes = input.sizes().vec();
  if (!output_splits.empty()) sizes[0] = std::accumulate(output_splits.begin(), output_splits.end(), int64_t{0});
  // A range in --profile traces whose recorded input shape is [rows sent to the other ranks, row
  // width] (a meta tensor, made only while a profiler records): tools/bench/moe_bench.py's bytes.
  const int64_t rows = input.size(0), kept = input_splits.empty() ? rows / group->size() : input_splits[group->rank()];
  RECORD_USER_SCOPE_WITH_INPUTS(
      "all_to_all", std::vector<c10::IValue>{
                        at::empty({rows - kept, rows ? input.numel() / rows : 0}, input.options().device(at::kMeta))});
  at::Tensor out = at::empty(sizes, input.options());
  group->all_to_all(out, input.contiguous(), output_splits, input_splits);
  return out;
}

struct AllToAll : torch::autograd::Function<AllToAll> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, GroupPtr g, std::vector<int64_t> output_splits,
                            std::vector<int64_t> input_splits) {
    save_group(ctx, g);
    ctx->saved_data["output_splits"] = output_splits;
    ctx->saved_data["input_splits"] = input_splits;
    return exchange_rows(x, g, output_splits, input_splits);
  }
  static variable_list backward(AutogradContext* ctx, variable_list grad) {
    // The rows return to where they came from: the splits swap.
    const auto back = exchange_rows(grad[0], load_group(ctx), ctx->saved_data["input_splits"].toIntVector(),
                                    ctx->saved_data["output_splits"].toIntVector());
    return {back, at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

}  // namespace

at::Tensor all_to_all(const GroupPtr& group, const at::Tensor& input, const std::vector<int64_t>& output_splits,
                      const std::vector<int64_t>& input_splits) {
  if (group_size(group) == 1) return input;
  return AllToAll::apply(input, group, output_splits, input_splits);
}

at::Tensor all_gather_along_dim(const at::Tensor& input, const GroupPtr& group, int64_t dim) {
  const int n = group_size(group);
  if (n == 1) return input;
  if (dim < 0) dim += input.dim();
  // all_gather concatenates along dim 0: gather with `dim` moved to the front, then move back.
  at::Tensor front = input.movedim(dim, 0).contiguous();
  auto sizes = front.sizes().vec();
  sizes[0] *= n;
  at::Tensor out = at::empty(sizes, front.options());
  group->all_gather(out, front);
  return out.movedim(0, dim).contiguous();
}

at::Tensor split_along_dim(const at::Tensor& input, const GroupPtr& group, int64_t dim) {
  const int n = group_size(group);
  if (n == 1) return input;
  if (dim < 0) dim += input.dim();
  TORCH_CHECK(input.size(dim) % n == 0, "[tensor_parallel] split: dim ", dim, " (", input.size(dim),
              ") must be divisible by the tensor-parallel size (", n, ")");
  return input.chunk(n, dim)[group_rank(group)].contiguous();
}

at::Tensor copy_to_tensor_model_parallel_region(const at::Tensor& input, const GroupPtr& group) {
  if (group_size(group) == 1) return input;
  return CopyToRegion::apply(input, group);
}
at::Tensor reduce_from_tensor_model_parallel_region(const at::Tensor& input, const GroupPtr& group) {
  if (group_size(group) == 1) return input;
  return ReduceFromRegion::apply(input, group);
}
at::Tensor scatter_to_tensor_model_parallel_region(const at::Tensor& input, const GroupPtr& group) {
  if (group_size(group) == 1) return input;
  return ScatterToRegion::apply(input, group);
}
at::Tensor gather_from_tensor_model_parallel_region(const at::Tensor& input, const GroupPtr& group) {
  if (group_size(group) == 1) return input;
  return GatherFromRegion::apply(input, group);
}
at::Tensor scatter_to_sequence_parallel_region(const at::Tensor& input, const GroupPtr& group) {
  if (group_size(group) == 1) return input;
  return ScatterToSequence::apply(input, group);
}
at::Tensor gather_from_sequence_parallel_region(const at::Tensor& input, const GroupPtr& group,
                                                bool tensor_parallel_output_grad) {
  if (group_size(group) == 1) return input;
  return GatherFromSequence::apply(input, group, tensor_parallel_output_grad);
}
at::Tensor reduce_scatter_to_sequence_parallel_region(const at::Tensor& input, const GroupPtr& group) {
  if (group_size(group) == 1) return input;
  return ReduceScatterToSequence::apply(input, group);
}

// --- sharding -------------------------------------------------------------------------------

at::Tensor ShardLayout::shard(const at::Tensor& full) const {
  if (!is_sharded()) return full.clone();
  std::vector<at::Tensor> pieces;
  for (const auto& block : full.chunk(num_chunks, partition_dim)) {
    TORCH_CHECK(block.size(partition_dim) % size == 0, "[sharding] dim ", partition_dim, " block (",
                block.size(partition_dim), ") must be divisible by the tensor-parallel size (", size, ")");
    pieces.push_back(block.chunk(size, partition_dim)[rank]);
  }
  return at::cat(pieces, partition_dim).contiguous();
}

at::Tensor ShardLayout::unshard(const std::vector<at::Tensor>& shards) const {
  if (!is_sharded()) return shards.at(0).clone();
  TORCH_CHECK(static_cast<int>(shards.size()) == size, "[sharding] expected ", size, " shards, got ", shards.size());
  std::vector<at::Tensor> blocks;
  for (int64_t c = 0; c < num_chunks; ++c) {
    std::vector<at::Tensor> pieces;
    for (const auto& s : shards) pieces.push_back(s.chunk(num_chunks, partition_dim)[c]);
    blocks.push_back(at::cat(pieces, partition_dim));
  }
  return at::cat(blocks, partition_dim);
}

std::vector<int64_t> ShardLayout::full_shape(at::IntArrayRef shard_shape) const {
  auto shape = shard_shape.vec();
  if (is_sharded()) shape[partition_dim] *= size;
  return shape;
}

uint64_t param_seed(uint64_t seed, const std::string& name) {
  // FNV-1a over the name, then a splitmix64 finaliser over (hash ^ seed).
  uint64_t h = 1469598103934665603ULL;
  for (unsigned char c : name) h = (h ^ c) * 1099511628211ULL;
  uint64_t z = h ^ (seed * 0x9E3779B97F4A7C15ULL);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return (z ^ (z >> 31)) & 0x7FFFFFFFFFFFFFFFULL;
}

at::Tensor init_full_tensor(const ParamInit& init, at::IntArrayRef full_shape, uint64_t seed, const std::string& name) {
  auto opts = at::TensorOptions().dtype(at::kFloat).device(at::kCPU);
  switch (init.kind) {
    case ParamInit::kZeros: return at::zeros(full_shape, opts);
    case ParamInit::kOnes: return at::ones(full_shape, opts);
    case ParamInit::kNormal: {
      auto gen = at::make_generator<at::CPUGeneratorImpl>(param_seed(seed, name));
      at::Tensor t = at::empty(full_shape, opts);
      t.normal_(0.0, init.std, gen);
      return t;
    }
  }
  TORCH_INTERNAL_ASSERT(false, "unknown ParamInit kind");
}

namespace {
void copy_shard(at::Tensor& param, const ParamInit& init, const at::Tensor& full, const std::string& name) {
  at::Tensor shard = init.layout.shard(full);
  TORCH_CHECK(shard.sizes() == param.sizes(), "[init] ", name, ": shard shape ", shard.sizes(),
              " does not match the parameter's ", param.sizes());
  at::NoGradGuard no_grad;
  param.copy_(shard);
}
}  // namespace

void init_sharded_param(at::Tensor& param, const ParamInit& init, uint64_t seed, const std::string& name) {
  copy_shard(param, init, init_full_tensor(init, init.layout.full_shape(param.sizes()), seed, name), name);
}

void init_sharded_param_from_default_generator(at::Tensor& param, const ParamInit& init) {
  at::Tensor full = at::empty(init.layout.full_shape(param.sizes()), at::kFloat);
  switch (init.kind) {
    case ParamInit::kZeros: full.zero_(); break;
    case ParamInit::kOnes: full.fill_(1.0); break;
    case ParamInit::kNormal: full.normal_(0.0, init.std); break;
  }
  copy_shard(param, init, full, "parameter");
}

}  // namespace megatron::tensor_parallel
