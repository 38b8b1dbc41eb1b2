// Strings every rank has at the same point: gathered to all, or logged by one rank in rank order.
// A launcher forwards each rank's output in chunks that can end inside a line (Open MPI's reads of
// a rank's output stop at 4096 bytes), so two ranks writing at once can split each other's lines;
// with one rank writing, chunks stay in order and lines stay whole.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "megatron/comm/process_group.h"
#include "megatron/logging.h"

namespace megatron::training::detail {

// Collective over `group`: every rank's `s`, in group rank order, on every rank.
std::vector<std::string> all_gather_strings(comm::ProcessGroup& group, const std::string& s);

// Collective over `group`: every rank's `mine` (the same length on all), compared column by
// column; the first column where some rank differs from rank 0, with each rank's value there, or
// nullopt when all agree. The same answer on every rank.
struct DifferingColumn {
  int64_t column = 0;
  std::vector<int64_t> by_rank;  // the column's value on each group rank
};
std::optional<DifferingColumn> first_differing_column(comm::ProcessGroup& group, const std::vector<int64_t>& mine);

// Collective over `group`: `writer` (a group rank) logs every rank's `line` in rank order; empty
// lines are left out.
void log_in_rank_order(comm::ProcessGroup& group, int writer, LogLevel level, const std::string& line);

}  // namespace megatron::training::detail
