#include "training/loop/rank_lines.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <cstdint>
#include <cstring>

namespace megatron::training::detail {

void log_in_rank_order(comm::ProcessGroup& group, int writer, LogLevel level, const std::string& line) {
  const int n = group.size();
  if (n == 1) {
    if (!line.empty()) log(level, line);
    return;
  }
  // The lengths first, then every line padded to the longest.
  at::Tensor lengths = at::empty({n}, at::kLong);
  group.all_gather(lengths, at::full({1}, static_cast<int64_t>(line.size()), at::kLong));
  const int64_t longest = std::max<int64_t>(1, lengths.max().item<int64_t>());
  at::Tensor mine = at::zeros({longest}, at::kByte);
  std::memcpy(mine.data_ptr<uint8_t>(), line.data(), line.size());
  at::Tensor all = at::empty({n * longest}, at::kByte);
  group.all_gather(all, mine);
  if (group.rank() != writer) return;
  for (int r = 0; r < n; ++r) {
    const int64_t size = lengths[r].item<int64_t>();
    if (size > 0) log(level, std::string(reinterpret_cast<const char*>(all.data_ptr<uint8_t>()) + r * longest, size));
  }
}

}  // namespace megatron::training::detail
