#include "megatron/distributed/grad_sync.h"

#include <ATen/ATen.h>

namespace megatron::distributed {
namespace {

void reduce_bucket(const std::vector<at::Tensor>& bucket, comm::ProcessGroup& group) {
  if (bucket.empty()) return;
  std::vector<at::Tensor> flat;
  flat.reserve(bucket.size());
  for (const auto& g : bucket) flat.push_back(g.reshape({-1}));
  at::Tensor buffer = at::cat(flat);
  group.all_reduce(buffer, comm::ReduceOp::kAvg);
  int64_t offset = 0;
  for (const auto& g : bucket) {
    g.copy_(buffer.narrow(0, offset, g.numel()).view(g.sizes()));
    offset += g.numel();
  }
}

}  // namespace

void allreduce_gradients(const std::vector<at::Tensor>& grads, comm::ProcessGroup& group, int64_t bucket_numel) {
  if (group.size() == 1) return;
  // Reverse order, like Megatron's buckets: the last layers' gradients are ready first.
  std::map<at::ScalarType, std::vector<at::Tensor>> buckets;
  std::map<at::ScalarType, int64_t> filled;
  for (auto it = grads.rbegin(); it != grads.rend(); ++it) {
    const at::Tensor& g = *it;
    auto& bucket = buckets[g.scalar_type()];
    auto& numel = filled[g.scalar_type()];
    if (!bucket.empty() && numel + g.numel() > bucket_numel) {
      reduce_bucket(bucket, group);
      bucket.clear();
      numel = 0;
    }
    bucket.push_back(g);
    numel += g.numel();
  }
  for (auto& [dtype, bucket] : buckets) reduce_bucket(bucket, group);
}

}  // namespace megatron::distributed
