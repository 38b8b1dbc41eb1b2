#include "megatron/transformer/pipeline_split.h"

#include <sstream>

namespace megatron::transformer {
namespace {

bool uneven(const PipelineSplit& s) {
  return s.first_stage_layers || s.last_stage_layers;
}

// The stages between an uneven first and last stage, and the layers each holds.
int64_t middle_stages(const PipelineSplit& s) {
  return s.pipeline_size - (s.first_stage_layers ? 1 : 0) - (s.last_stage_layers ? 1 : 0);
}
int64_t middle_layers(const PipelineSplit& s) {
  return s.num_layers - s.first_stage_layers.value_or(0) - s.last_stage_layers.value_or(0);
}

// The uneven split's flags that are given, by name.
std::string uneven_flags(const PipelineSplit& s) {
  std::string out = s.first_stage_layers ? "--decoder-first-pipeline-num-layers" : "";
  if (s.last_stage_layers) out += std::string(out.empty() ? "" : " and ") + "--decoder-last-pipeline-num-layers";
  return out;
}

// The layers counted for an even split: the embedding and the loss count as one each if asked.
int64_t counted_layers(const PipelineSplit& s) {
  return s.num_layers + (s.account_for_embedding ? 1 : 0) + (s.account_for_loss ? 1 : 0);
}

}  // namespace

std::string PipelineSplit::problem() const {
  std::ostringstream why;
  const int64_t pp = pipeline_size, vpp = virtual_size;
  if (pp < 1 || vpp < 1 || num_layers < 1) {
    why << "--num-layers (" << num_layers << "), --pipeline-model-parallel-size (" << pp
        << ") and the virtual stages per rank (" << vpp << ") must be positive";
  } else if (uneven(*this)) {
    const int64_t middle = middle_layers(*this), stages = middle_stages(*this);
    if (account_for_embedding || account_for_loss) {
      why << uneven_flags(*this) << " and "
          << (account_for_embedding ? "--account-for-embedding-in-pipeline-split"
                                    : "--account-for-loss-in-pipeline-split")
          << " exclude each other";
    } else if (pp == 1) {
      why << uneven_flags(*this) << " need --pipeline-model-parallel-size > 1";
    } else if (first_stage_layers.value_or(1) < 1 || last_stage_layers.value_or(1) < 1 || middle < 0) {
      why << "--decoder-first-pipeline-num-layers and --decoder-last-pipeline-num-layers must be positive and "
          << "leave at most --num-layers (" << num_layers << "); got " << first_stage_layers.value_or(0) << " and "
          << last_stage_layers.value_or(0);
    } else if ((middle > 0) != (stages > 0) || (stages && middle % stages != 0)) {
      why << "the " << middle << " layers left after " << uneven_flags(*this) << " do not divide over the " << stages
          << " pipeline stages between them (with none left there must be no stage between)";
    } else if (first_stage_layers.value_or(0) % vpp || last_stage_layers.value_or(0) % vpp ||
               (stages && (middle / stages) % vpp)) {
      why << uneven_flags(*this) << " and the middle stages' layers (first " << first_stage_layers.value_or(0)
          << ", middle " << (stages ? middle / stages : 0) << ", last " << last_stage_layers.value_or(0)
          << ") must divide by --num-virtual-stages-per-pipeline-rank (" << vpp << ")";
    }
  } else {
    const int64_t counted = counted_layers(*this);
    const char* plus = account_for_embedding || account_for_loss ? " (with the embedding and loss counted)" : "";
    if (counted % (pp * vpp) != 0)
      why << "--num-layers (" << num_layers << ")" << plus << " is not divisible by --pipeline-model-parallel-size ("
          << pp << ") x the virtual stages per rank (" << vpp << ")";
  }
  return why.str();
}

PipelineSplit::Range PipelineSplit::layers(int64_t pp_rank, int64_t vp_rank) const {
  const int64_t pp = pipeline_size, vpp = virtual_size;
  if (uneven(*this)) {
    const int64_t first = first_stage_layers.value_or(0), last = last_stage_layers.value_or(0);
    const int64_t stages = middle_stages(*this), per_middle = stages ? middle_layers(*this) / stages : 0;
    const bool is_first = first_stage_layers && pp_rank == 0, is_last = last_stage_layers && pp_rank == pp - 1;
    const int64_t count = (is_first ? first : is_last ? last : per_middle) / vpp;
    const int64_t middle_rank = first_stage_layers ? pp_rank - 1 : pp_rank;
    const int64_t before = pp_rank == 0 ? 0 : first / vpp + middle_rank * (per_middle / vpp);
    return {vp_rank * (num_layers / vpp) + before, count};
  }
  const int64_t counted = counted_layers(*this), per_chunk = counted / (pp * vpp);
  const bool first_chunk = pp_rank == 0 && vp_rank == 0, last_chunk = pp_rank == pp - 1 && vp_rank == vpp - 1;
  const int64_t embedding = account_for_embedding ? 1 : 0;
  const int64_t offset = vp_rank * (counted / vpp) + pp_rank * per_chunk - (first_chunk ? 0 : embedding);
  const int64_t count = per_chunk - (first_chunk ? embedding : 0) - (last_chunk && account_for_loss ? 1 : 0);
  return {offset, count};
}

int64_t PipelineSplit::stage_layers(int64_t pp_rank) const {
  int64_t n = 0;
  for (int64_t v = 0; v < virtual_size; ++v) n += layers(pp_rank, v).count;
  return n;
}

}  // namespace megatron::transformer
