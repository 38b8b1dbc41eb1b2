#include "training/loop/rank_lines.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <cstdint>
#include <cstring>

namespace megatron::training::detail {

std::vector<std::string> all_gather_strings(comm::ProcessGroup& group, const std::string& s) {
  const int n = group.size();
  if (n == 1) return {s};
  // The lengths first, then every string padded to the longest.
  at::Tensor lengths = at::empty({n}, at::kLong);
  group.all_gather(lengths, at::full({1}, static_cast<int64_t>(s.size()), at::kLong));
  const int64_t longest = std::max<int64_t>(1, lengths.max().item<int64_t>());
  at::Tensor mine = at::zeros({longest}, at::kByte);
  std::memcpy(mine.data_ptr<uint8_t>(), s.data(), s.size());
  at::Tensor all = at::empty({n * longest}, at::kByte);
  group.all_gather(all, mine);
  std::vector<std::string> out;
  const char* bytes = reinterpret_cast<const char*>(all.data_ptr<uint8_t>());
  for (int r = 0; r < n; ++r) out.emplace_back(bytes + r * longest, static_cast<size_t>(lengths[r].item<int64_t>()));
  return out;
}

std::optional<DifferingColumn> first_differing_column(comm::ProcessGroup& group, const std::vector<int64_t>& mine) {
  const int n = group.size();
  const auto count = static_cast<int64_t>(mine.size());
  at::Tensor all = at::empty({n * count}, at::kLong);
  group.all_gather(all, at::tensor(mine, at::kLong));
  const at::Tensor by_rank = all.view({n, count});
  const at::Tensor differs = (by_rank != by_rank[0]).any(0);
  if (!differs.any().item<bool>()) return std::nullopt;
  DifferingColumn out;
  out.column = differs.nonzero()[0][0].item<int64_t>();
  const at::Tensor column = by_rank.select(1, out.column).contiguous();
  out.by_rank.assign(column.data_ptr<int64_t>(), column.data_ptr<int64_t>() + n);
  return out;
}

void log_in_rank_order(comm::ProcessGroup& group, int writer, LogLevel level, const std::string& line) {
  const auto lines = all_gather_strings(group, line);
  if (group.rank() != writer) return;
  for (const auto& l : lines)
    if (!l.empty()) log(level, l);
}

}  // namespace megatron::training::detail
