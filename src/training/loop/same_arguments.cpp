#include "training/loop/same_arguments.h"

#include <ATen/ATen.h>

#include <functional>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "megatron/program.h"
#include "megatron/training/checkpoint_schema.h"
#include "training/loop/rank_lines.h"

namespace megatron::training::detail {

void check_ranks_have_the_same_arguments(const Arguments& args, comm::ProcessGroup& world) {
  const int n = world.size();
  if (n == 1) return;
  std::vector<std::string> names, values;
  for (const auto& e : arguments_to_dict(args)) {
    std::ostringstream value;
    value << e.value();
    names.push_back(e.key().toStringRef());
    values.push_back(value.str());
  }
  std::vector<int64_t> mine;
  for (size_t i = 0; i < names.size(); ++i)
    mine.push_back(static_cast<int64_t>(std::hash<std::string>{}(names[i] + "=" + values[i])));
  const auto differs = first_differing_column(world, mine);
  if (!differs) return;
  const auto first = static_cast<size_t>(differs->column);
  // Which ranks have which value of that setting, in the order the values first appear.
  const auto seen = all_gather_strings(world, values[first]);
  std::vector<std::string> order;
  std::map<std::string, std::vector<int>> ranks;
  for (int r = 0; r < n; ++r) {
    if (!ranks.count(seen[r])) order.push_back(seen[r]);
    ranks[seen[r]].push_back(r);
  }
  std::ostringstream msg;
  msg << "[arguments] the ranks were launched with different settings: " << flag_of(names[first]) << " is ";
  for (size_t v = 0; v < order.size(); ++v) {
    const auto& who = ranks[order[v]];
    msg << (v == 0 ? "" : ", ") << order[v] << " on rank" << (who.size() > 1 ? "s " : " ");
    for (size_t i = 0; i < who.size() && i < 8; ++i) msg << (i ? ", " : "") << who[i];
    if (who.size() > 8) msg << " and " << who.size() - 8 << " more";
  }
  msg << "; every rank needs the same flags";
  throw program::UsageError(msg.str());
}

}  // namespace megatron::training::detail
