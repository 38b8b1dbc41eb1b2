#include "megatron/transformer/pipeline_split.h"

#include <algorithm>
#include <cctype>
#include <regex>
#include <sstream>
#include <vector>

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

// A layout string's virtual stages, each as its layer letters, or the reason it cannot be read.
// As PipelineParallelLayerLayout.parse_str_to_list: commas are cosmetic, then "(...)*n" and
// "x*n" are unrolled, each pattern in one left-to-right pass.
std::vector<std::string> layout_parts(const std::string& layout, std::string& problem) {
  std::string text;
  for (char c : layout)
    if (c != ',' && !std::isspace(static_cast<unsigned char>(c))) text += c;
  for (const std::regex& pattern : {std::regex(R"(\(([^)]+)\)\*(\d+))"), std::regex(R"((.)\*(\d+))")}) {
    std::string unrolled;
    size_t last = 0;
    for (auto m = std::sregex_iterator(text.begin(), text.end(), pattern); m != std::sregex_iterator(); ++m) {
      unrolled += text.substr(last, static_cast<size_t>(m->position(0)) - last);
      const std::string times = (*m)[2].str();
      if (times.size() > 6) {
        problem = "--pipeline-model-parallel-layout repeats a part " + times + " times";
        return {};
      }
      for (int64_t k = std::stoll(times); k > 0; --k) unrolled += (*m)[1].str();
      last = static_cast<size_t>(m->position(0) + m->length(0));
    }
    text = unrolled + text.substr(last);
  }
  std::vector<std::string> parts(1);
  for (char c : text) {
    if (c == '|') {
      parts.emplace_back();
    } else if (c == 'E' || c == 't' || c == 'L') {
      parts.back() += c;
    } else {
      problem = c == 'm' ? "--pipeline-model-parallel-layout places an MTP layer (m): multi-token prediction is "
                           "not implemented"
                         : std::string("--pipeline-model-parallel-layout ") + layout + ": '" + c +
                               "' is not a layer (E embedding, t transformer layer, L loss)";
      return {};
    }
  }
  return parts;
}

// The layout's problem given the split's sizes: E opening the first stage and L closing the last,
// once each (the model builds the embedding on the first chunk and the loss on the last), and
// as many transformer layers as --num-layers.
std::string layout_problem(const PipelineSplit& s) {
  std::string problem;
  const auto parts = layout_parts(s.layout, problem);
  if (!problem.empty()) return problem;
  std::ostringstream why;
  std::string all;
  for (const auto& p : parts) all += p;
  const auto count = [&all](char c) { return std::count(all.begin(), all.end(), c); };
  if (s.first_stage_layers || s.last_stage_layers || s.account_for_embedding || s.account_for_loss)
    why << "--pipeline-model-parallel-layout excludes --decoder-first/last-pipeline-num-layers and "
           "--account-for-embedding/loss-in-pipeline-split";
  else if (static_cast<int64_t>(parts.size()) != s.pipeline_size * s.virtual_size)
    why << "--pipeline-model-parallel-layout names " << parts.size() << " stages, not --pipeline-model-parallel-size ("
        << s.pipeline_size << ") x the virtual stages per rank (" << s.virtual_size << ")";
  else if (count('E') != 1 || parts.front().rfind('E', 0) != 0 || count('L') != 1 || parts.back().empty() ||
           parts.back().back() != 'L')
    why << "--pipeline-model-parallel-layout " << s.layout
        << ": the embedding (E) must open the first stage and the loss (L) close the last, once each";
  else if (count('t') != s.num_layers)
    why << "--pipeline-model-parallel-layout " << s.layout << " places " << count('t')
        << " transformer layers (t), not --num-layers (" << s.num_layers << ")";
  return why.str();
}

}  // namespace

int64_t PipelineSplit::layout_stages(const std::string& layout, std::string* problem) {
  std::string why;
  const auto parts = layout_parts(layout, why);
  if (problem) *problem = why;
  return static_cast<int64_t>(parts.size());
}

std::string PipelineSplit::problem() const {
  std::ostringstream why;
  const int64_t pp = pipeline_size, vpp = virtual_size;
  if (pp < 1 || vpp < 1 || num_layers < 1) {
    why << "--num-layers (" << num_layers << "), --pipeline-model-parallel-size (" << pp
        << ") and the virtual stages per rank (" << vpp << ") must be positive";
  } else if (!layout.empty()) {
    why << layout_problem(*this);
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
  if (!layout.empty()) {  // the stages in order, virtual rank major, number the layers
    std::string unused;
    const auto parts = layout_parts(layout, unused);
    Range r;
    for (int64_t stage = 0; stage <= vp_rank * pp + pp_rank; ++stage) {
      const auto& part = parts.at(static_cast<size_t>(stage));
      r.offset += r.count;
      r.count = std::count(part.begin(), part.end(), 't');
    }
    return r;
  }
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
