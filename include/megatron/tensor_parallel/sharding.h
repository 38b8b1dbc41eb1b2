// How a parameter's full (TP=1) tensor maps onto tensor-parallel shards, and how it is initialised.
// Initialisation draws the FULL tensor from a generator seeded by (seed, parameter name) and keeps
// this rank's shard, so the same seed gives the same model whatever the TP/PP layout.
#pragma once

#include "megatron/export.h"

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <string>
#include <vector>

namespace megatron::tensor_parallel {

// partition_dim < 0: replicated on every TP rank. Otherwise the full tensor is num_chunks equal
// blocks along partition_dim and each block is split into `size` contiguous pieces; rank r keeps
// piece r of every block (num_chunks = 2 is the gated-MLP fc1 layout [gate; up]).
struct MEGATRON_API ShardLayout {
  int64_t partition_dim = -1;
  int64_t num_chunks = 1;
  int rank = 0;
  int size = 1;

  bool is_sharded() const { return partition_dim >= 0 && size > 1; }
  // full -> this rank's shard (a copy).
  at::Tensor shard(const at::Tensor& full) const;
  // shards of every rank (in rank order) -> full tensor.
  at::Tensor unshard(const std::vector<at::Tensor>& shards) const;
  // Shape of the full tensor given this rank's shard shape.
  std::vector<int64_t> full_shape(at::IntArrayRef shard_shape) const;
};

// Megatron's initialisers: normal(0, std) for weights, zeros for biases, ones for norm weights.
struct MEGATRON_API ParamInit {
  enum Kind { kNormal, kZeros, kOnes };
  Kind kind = kNormal;
  double std = 0.02;
  ShardLayout layout;
};

// A module whose parameters carry their sharding and initialisation (TP layers, norms, ...).
class MEGATRON_API ShardedModule {
 public:
  virtual ~ShardedModule() = default;
  // Local parameter name ("weight", "bias") -> how it is sharded and initialised.
  virtual std::vector<std::pair<std::string, ParamInit>> param_inits() const = 0;
};

// 64-bit seed for one parameter: mixes the model seed with the parameter's (global) name.
MEGATRON_API uint64_t param_seed(uint64_t seed, const std::string& name);

// The full tensor of shape full_shape drawn as `init` says from a CPU generator seeded with
// param_seed(seed, name), in float32 on the CPU.
MEGATRON_API at::Tensor init_full_tensor(const ParamInit& init, at::IntArrayRef full_shape, uint64_t seed,
                                         const std::string& name);

// Initialises `param` (this rank's shard) in place from the full tensor drawn from the default
// CPU generator (Megatron's CPU initialisation: equal on TP ranks seeded alike). Standalone
// layers use this; models re-initialise by name with init_sharded_param.
MEGATRON_API void init_sharded_param_from_default_generator(at::Tensor& param, const ParamInit& init);

// Initialises `param` (this rank's shard) in place from init_full_tensor(...).
MEGATRON_API void init_sharded_param(at::Tensor& param, const ParamInit& init, uint64_t seed, const std::string& name);

}  // namespace megatron::tensor_parallel
