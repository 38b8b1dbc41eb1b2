#include "training/arguments/moe_arguments.h"

#include <c10/util/Exception.h>

#include <cctype>
#include <cstdlib>
#include <string>

namespace megatron::training::detail {
namespace {

#define MOE_CHECK(cond, ...) TORCH_CHECK(cond, "[arguments] ", __VA_ARGS__)

// Megatron-LM evaluates the string with Python after checking it holds only digits, commas,
// brackets, parentheses, + and *; this reads exactly that language: lists of integers, joined
// by +, repeated by * with an integer on either side, grouped by parentheses.
class ListExpression {
 public:
  explicit ListExpression(const std::string& text) : s_(text) {}

  std::vector<int64_t> parse() {
    Value v = sum(0);
    skip();
    MOE_CHECK(at_ == s_.size(), "--moe-layer-freq '", s_, "': unexpected '", s_.substr(at_, 1), "' at ", at_ + 1);
    MOE_CHECK(v.is_list, "--moe-layer-freq '", s_, "' is a number, expected a list");
    return v.list;
  }

 private:
  struct Value {
    bool is_list = false;
    int64_t number = 0;
    std::vector<int64_t> list;
  };

  void skip() {
    while (at_ < s_.size() && s_[at_] == ' ') ++at_;
  }
  bool take(char c) {
    skip();
    if (at_ < s_.size() && s_[at_] == c) return ++at_, true;
    return false;
  }
  Value sum(int depth) {
    Value v = product(depth);
    while (take('+')) {
      Value r = product(depth);
      MOE_CHECK(v.is_list && r.is_list, "--moe-layer-freq '", s_, "': + joins two lists");
      v.list.insert(v.list.end(), r.list.begin(), r.list.end());
      MOE_CHECK(v.list.size() <= kMaxEntries, "--moe-layer-freq '", s_, "' lists more than ", kMaxEntries, " layers");
    }
    return v;
  }
  Value product(int depth) {
    Value v = atom(depth);
    while (take('*')) {
      Value r = atom(depth);
      MOE_CHECK(v.is_list != r.is_list, "--moe-layer-freq '", s_, "': * repeats a list a number of times");
      const Value& list = v.is_list ? v : r;
      const int64_t times = v.is_list ? r.number : v.number;
      MOE_CHECK(times >= 0 && list.list.size() * static_cast<uint64_t>(times) <= kMaxEntries, "--moe-layer-freq '", s_,
                "' lists more than ", kMaxEntries, " layers");
      Value out{true, 0, {}};
      for (int64_t i = 0; i < times; ++i) out.list.insert(out.list.end(), list.list.begin(), list.list.end());
      v = std::move(out);
    }
    return v;
  }
  Value atom(int depth) {
    MOE_CHECK(depth < 32, "--moe-layer-freq '", s_, "' nests too deep");
    if (take('(')) {
      Value v = sum(depth + 1);
      MOE_CHECK(take(')'), "--moe-layer-freq '", s_, "': a '(' is not closed");
      return v;
    }
    if (take('[')) {
      Value v{true, 0, {}};
      if (take(']')) return v;
      do {
        v.list.push_back(number());
        MOE_CHECK(v.list.size() <= kMaxEntries, "--moe-layer-freq '", s_, "' lists more than ", kMaxEntries, " layers");
      } while (take(','));
      MOE_CHECK(take(']'), "--moe-layer-freq '", s_, "': a '[' is not closed");
      return v;
    }
    return Value{false, number(), {}};
  }
  int64_t number() {
    skip();
    const size_t begin = at_;
    while (at_ < s_.size() && std::isdigit(static_cast<unsigned char>(s_[at_])) && at_ - begin < 9) ++at_;
    MOE_CHECK(at_ > begin, "--moe-layer-freq '", s_, "': expected a number at ", begin + 1);
    return std::atoll(s_.substr(begin, at_ - begin).c_str());
  }

  static constexpr uint64_t kMaxEntries = 1 << 20;
  const std::string& s_;
  size_t at_ = 0;
};

}  // namespace

std::vector<int64_t> moe_layer_pattern(const std::string& freq, int64_t num_layers) {
  std::vector<int64_t> pattern;
  if (freq.find('[') != std::string::npos) {
    pattern = ListExpression(freq).parse();
    MOE_CHECK(static_cast<int64_t>(pattern.size()) == num_layers, "--moe-layer-freq '", freq, "' lists ",
              pattern.size(), " layers, but --num-layers is ", num_layers);
    for (int64_t p : pattern) MOE_CHECK(p == 0 || p == 1, "--moe-layer-freq '", freq, "': entries are 0 or 1");
    return pattern;
  }
  char* end = nullptr;
  const long long every = std::strtoll(freq.c_str(), &end, 10);
  MOE_CHECK(!freq.empty() && *end == '\0' && every >= 1, "--moe-layer-freq '", freq,
            "': expected a positive integer or a list such as \"[1,0]*2\"");
  for (int64_t i = 0; i < num_layers; ++i) pattern.push_back(i % every == 0 ? 1 : 0);
  return pattern;
}

void resolve_moe_aliases(Arguments& a) {
  if (a.moe_enable_deepep) a.moe_token_dispatcher_type = "flex";
  if (a.moe_token_dispatcher_type == "flex" && a.moe_flex_dispatcher_backend.empty())
    a.moe_flex_dispatcher_backend = "deepep";  // Megatron-Core's default backend
}

void validate_moe(const Arguments& a) {
  if (!a.num_experts) return;
  const int64_t experts = *a.num_experts, topk = a.moe_router_topk;
  MOE_CHECK(topk <= experts, "--moe-router-topk (", topk, ") must not exceed --num-experts (", experts, ")");
  MOE_CHECK(topk > 1 || a.moe_router_score_function != "softmax" || a.moe_router_pre_softmax ||
                a.moe_router_load_balancing_type == "sinkhorn",
            "--moe-router-topk 1 with softmax routing gives every token a probability of 1: use "
            "--moe-router-pre-softmax (as Megatron-LM asks)");
  if (a.moe_router_group_topk) {
    MOE_CHECK(a.moe_router_num_groups, "--moe-router-group-topk needs --moe-router-num-groups");
    const int64_t groups = *a.moe_router_num_groups;
    MOE_CHECK(experts % groups == 0, "--num-experts (", experts, ") must be divisible by --moe-router-num-groups (",
              groups, ")");
    MOE_CHECK(*a.moe_router_group_topk <= groups, "--moe-router-group-topk (", *a.moe_router_group_topk,
              ") must not exceed --moe-router-num-groups (", groups, ")");
    MOE_CHECK(topk % *a.moe_router_group_topk == 0, "--moe-router-topk (", topk,
              ") must be a multiple of --moe-router-group-topk (", *a.moe_router_group_topk,
              "): each chosen group is scored by its top topk / group-topk experts");
  }
  MOE_CHECK(!a.moe_pad_expert_input_to_capacity || a.moe_expert_capacity_factor,
            "--moe-pad-expert-input-to-capacity needs --moe-expert-capacity-factor");
  MOE_CHECK(!a.moe_shared_expert_gate || a.moe_shared_expert_intermediate_size,
            "--moe-shared-expert-gate needs --moe-shared-expert-intermediate-size");
  MOE_CHECK(!a.moe_router_enable_expert_bias || a.moe_router_score_function == "sigmoid",
            "--moe-router-enable-expert-bias needs --moe-router-score-function sigmoid");
  moe_layer_pattern(a.moe_layer_freq, a.num_layers);
  const int64_t ep = a.expert_model_parallel_size;
  MOE_CHECK(experts % ep == 0, "--num-experts (", experts, ") must be divisible by --expert-model-parallel-size (", ep,
            ")");
  // Megatron-LM's rule: the experts' ranks (expert TP x EP) are folded out of the tensor-, context-
  // and data-parallel ones; with expert TP = TP, out of the data- (and context-) parallel ones.
  const int64_t tp = a.tensor_model_parallel_size, etp = a.expert_tensor_parallel_size.value_or(tp);
  const int64_t folded = a.data_parallel_size * a.context_parallel_size;
  if (etp == tp)
    MOE_CHECK(folded % ep == 0, "--expert-model-parallel-size (", ep, ") must divide the data-parallel size (",
              a.data_parallel_size, ")",
              a.context_parallel_size > 1 ? " x --context-parallel-size (" + std::to_string(a.context_parallel_size) +
                                                ") = " + std::to_string(folded)
                                          : std::string());
  MOE_CHECK((tp * folded) % (etp * ep) == 0, "--expert-tensor-parallel-size (", etp,
            ") x --expert-model-parallel-size (", ep, ") must divide the tensor-, context- and data-parallel ranks (",
            tp * folded, ")");
  const int64_t edp = tp * folded / (etp * ep);
  MOE_CHECK(edp % a.num_distributed_optimizer_instances == 0, "--num-distributed-optimizer-instances (",
            a.num_distributed_optimizer_instances, ") must divide the expert-data-parallel size (", edp, ")");
  MOE_CHECK(tp == 1 || a.sequence_parallel,
            "MoE layers with tensor parallelism need --sequence-parallel (as Megatron-LM's)");
  MOE_CHECK(etp == 1 || a.disable_bias_linear,
            "MoE layers with tensor parallelism need --disable-bias-linear (Megatron-LM's rule: biased experts are "
            "not split)");
  MOE_CHECK(a.moe_ffn_hidden_size.value_or(a.ffn_hidden_size.value_or(4 * a.hidden_size)) % etp == 0,
            "--moe-ffn-hidden-size must be divisible by --expert-tensor-parallel-size (", etp, ")");
  MOE_CHECK(a.moe_router_load_balancing_type != "sinkhorn" || a.moe_aux_loss_coeff == 0,
            "--moe-router-load-balancing-type sinkhorn takes no auxiliary loss: --moe-aux-loss-coeff must be 0 (got ",
            a.moe_aux_loss_coeff, ")");
  MOE_CHECK(!a.domino, "--domino with MoE layers is not implemented");
}

}  // namespace megatron::training::detail
