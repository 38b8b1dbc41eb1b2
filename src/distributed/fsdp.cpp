#include "megatron/distributed/fsdp.h"

#include "after_accumulation.h"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/function_hook.h>
#include <torch/csrc/autograd/functions/accumulate_grad.h>
#include <torch/csrc/autograd/graph_task.h>
#include <torch/csrc/autograd/variable.h>

#include <c10/util/Exception.h>

#include <algorithm>
#include <deque>
#include <mutex>

namespace megatron::distributed {

struct FsdpUnits::State {
  struct Unit {
    ParamAndGradBuffer* buffer = nullptr;
    std::vector<const ParamShards*> shards;  // by region
    bool kept = false;
    int chunk = 0;
    int64_t prev = -1, next = -1;             // neighbours in the chunk's forward order
    std::vector<at::Tensor> grad_shard;       // by region: this rank's part of the gradient
    std::vector<int64_t> seen;                // by parameter: backward passes since the last reduce
    size_t complete = 0;                      // parameters whose gradient is complete
    std::vector<comm::WorkHandle> gathering;  // the parameter all-gathers in flight
    std::vector<at::Tensor> sent;
    bool reducing = false;  // a reduce-scatter of its gradient is in flight
    bool hooked = false;    // a module calls its hooks: its whole gradient is allocated as its backward begins
    std::vector<std::vector<std::pair<int64_t, int64_t>>> sequence_parallel;  // by region: (offset, numel) in the shard
  };
  struct Reduction {
    size_t unit;
    std::vector<comm::WorkHandle> work;
    std::vector<at::Tensor> shards;
  };

  std::shared_ptr<comm::ProcessGroup> dp, tp;
  bool shard_params = false, prefetch = false;
  std::vector<Unit> units;
  std::deque<Reduction> reductions;  // in launch order
  int64_t accumulations = 0;         // 0: no start(); everything is reduced in finish()
  int64_t first_layer = -1;          // the first unit of the first chunk, prefetched by the kept unit
  int first_chunk = 0;
  bool one_chunk = true;
  int64_t gathers = 0;
  std::mutex mutex;  // the hooks may run on the autograd engine's device threads

  static bool in_backward() { return torch::autograd::get_current_graph_task_id() != -1; }

  void launch_gather(Unit& u) {
    if (!shard_params || !u.gathering.empty() || u.buffer->params_allocated()) return;
    u.buffer->allocate_params();
    u.sent.resize(u.shards.size());
    for (size_t r = 0; r < u.shards.size(); ++r) u.gathering.push_back(u.shards[r]->all_gather_params_async(u.sent[r]));
    ++gathers;
  }

  // ZeRO-2 under --overlap-param-gather: the updated shards into the unit's (whole) parameters,
  // waited for by its forward's gather().
  void launch_param_sync(Unit& u) {
    TORCH_CHECK(u.gathering.empty(), "[fsdp] a unit's parameter gather launched while its last is in flight");
    u.sent.resize(u.shards.size());
    for (size_t r = 0; r < u.shards.size(); ++r) u.gathering.push_back(u.shards[r]->all_gather_params_async(u.sent[r]));
  }

  void wait_gather(Unit& u) {
    for (auto& w : u.gathering) w->wait();
    u.gathering.clear();
    u.sent.clear();
  }

  void gather(Unit& u) {
    launch_gather(u);
    wait_gather(u);
  }

  void release(Unit& u) {
    if (!shard_params) return;
    wait_gather(u);
    u.buffer->release_params();
  }

  void before_forward(size_t index) {
    std::lock_guard<std::mutex> lock(mutex);
    Unit& u = units[index];
    gather(u);
    // Not in a recompute under backward: the next layer's backward comes before its forward. The
    // kept unit's forward begins the model's: the first layer comes next (with one chunk; with
    // several the kept unit begins each, not only the first).
    const int64_t next = u.kept ? (one_chunk ? first_layer : -1) : u.next;
    if (prefetch && next >= 0 && !in_backward()) launch_gather(units[static_cast<size_t>(next)]);
  }

  void after_forward(size_t index, const at::Tensor& output, const std::weak_ptr<State>& self) {
    std::lock_guard<std::mutex> lock(mutex);
    Unit& u = units[index];
    if (u.kept) return;
    const bool backward_follows = output.defined() && output.requires_grad();
    if (backward_follows)
      output.register_hook([self, index](const at::Tensor&) {
        if (auto s = self.lock()) s->pre_backward(index);
      });
    // A recompute runs the forward inside backward, whose pass follows at once. A chunk's last
    // unit stays whole until its backward: next on the last pipeline stage, after the other
    // micro-batches in flight elsewhere (one layer per chunk).
    if (!in_backward() && !(backward_follows && u.next < 0)) release(u);
  }

  // The gradient of the unit's output has arrived: its backward is next.
  void pre_backward(size_t index) {
    std::lock_guard<std::mutex> lock(mutex);
    Unit& u = units[index];
    drain_until(index);  // the previous micro-batch's reduce-scatter reads the gradient buffer
    gather(u);
    u.buffer->allocate_grads();
    if (prefetch && u.prev >= 0) launch_gather(units[static_cast<size_t>(u.prev)]);
  }

  void on_accumulated(size_t index, size_t param) {
    std::lock_guard<std::mutex> lock(mutex);
    Unit& u = units[index];
    if (accumulations == 0) return;
    const int64_t threshold = shard_params ? 1 : accumulations;
    if (++u.seen[param] != threshold) return;
    if (++u.complete == u.seen.size()) reduce(index);
  }

  // Launches the unit's reduce-scatter, releases its parameters, and finishes the reductions
  // launched before it (so that at most two gradients are whole at a time).
  void reduce(size_t index) {
    Unit& u = units[index];
    Reduction red{index, {}, {}};
    for (const auto* shards : u.shards) {
      red.shards.push_back(at::empty({shards->shard_numel()}, u.grad_shard.front().options()));
      red.work.push_back(shards->reduce_scatter_grads_async(red.shards.back()));
    }
    u.reducing = true;
    std::fill(u.seen.begin(), u.seen.end(), 0);
    u.complete = 0;
    reductions.push_back(std::move(red));
    release(u);  // its backward is over
    while (reductions.size() > 1) drain_front();
  }

  void drain_front() {
    Reduction red = std::move(reductions.front());
    reductions.pop_front();
    Unit& u = units[red.unit];
    at::NoGradGuard no_grad;
    for (size_t r = 0; r < red.work.size(); ++r) {
      red.work[r]->wait();
      u.grad_shard[r].add_(red.shards[r]);
    }
    u.reducing = false;
    u.buffer->release_grads();  // only this rank's shard stays
  }

  void drain_until(size_t index) {
    while (units[index].reducing) drain_front();
  }
};

namespace {

class UnitHooks : public transformer::ParamGather {
 public:
  UnitHooks(std::weak_ptr<FsdpUnits::State> state, size_t unit) : state_(std::move(state)), unit_(unit) {}
  void before_forward() override {
    if (auto s = state_.lock()) s->before_forward(unit_);
  }
  void after_forward(const at::Tensor& output) override {
    if (auto s = state_.lock()) s->after_forward(unit_, output, state_);
  }

 private:
  std::weak_ptr<FsdpUnits::State> state_;
  size_t unit_;
};

}  // namespace

FsdpUnits::FsdpUnits(std::shared_ptr<comm::ProcessGroup> dp, bool shard_params, bool prefetch,
                     std::shared_ptr<comm::ProcessGroup> tp)
    : state_(std::make_shared<State>()) {
  TORCH_CHECK(dp, "[fsdp] needs a data-parallel group");
  state_->dp = std::move(dp);
  state_->tp = std::move(tp);
  state_->shard_params = shard_params;
  state_->prefetch = prefetch;
}

FsdpUnits::~FsdpUnits() = default;

size_t FsdpUnits::add_unit(ParamAndGradBuffer& buffer, std::vector<const ParamShards*> shards,
                           const std::vector<at::Tensor>& params, int chunk,
                           const std::vector<bool>& sequence_parallel) {
  auto& s = *state_;
  const size_t index = s.units.size();
  State::Unit u;
  u.buffer = &buffer;
  u.shards = std::move(shards);
  u.chunk = chunk;
  for (const auto* sh : u.shards) u.grad_shard.push_back(at::zeros({sh->shard_numel()}, sh->main().options()));
  // Where this rank's shard of each region holds sequence-parallel parameters.
  const auto& regions = buffer.regions();
  for (size_t r = 0; r < regions.size(); ++r) {
    std::vector<std::pair<int64_t, int64_t>> ranges;
    for (const auto& m : regions[r].members)
      if (!sequence_parallel.empty() && sequence_parallel.at(m.index))
        ranges.emplace_back(m.offset, params.at(m.index).numel());
    u.sequence_parallel.push_back(u.shards.at(r)->in_shard(ranges));
  }
  u.seen.assign(params.size(), 0);
  // The previous unit of the same chunk (units come in forward order).
  for (auto k = static_cast<int64_t>(index) - 1; k >= 0; --k) {
    auto& other = s.units[static_cast<size_t>(k)];
    if (other.kept || other.chunk != chunk) continue;
    u.prev = k;
    other.next = static_cast<int64_t>(index);
    break;
  }
  if (s.first_layer < 0) {
    s.first_layer = static_cast<int64_t>(index);
    s.first_chunk = chunk;
  }
  s.one_chunk = s.one_chunk && chunk == s.first_chunk;
  s.units.push_back(std::move(u));
  for (size_t i = 0; i < params.size(); ++i) {
    TORCH_CHECK(params[i].requires_grad() && params[i].is_leaf(), "[fsdp] parameter ", i,
                " of a unit is not a leaf that requires a gradient");
    grad_accumulators_.push_back(detail::after_accumulation(params[i], [weak = std::weak_ptr<State>(state_), index, i] {
      if (auto s = weak.lock()) s->on_accumulated(index, i);
    }));
  }
  return index;
}

size_t FsdpUnits::add_kept_unit(ParamAndGradBuffer& buffer, std::vector<const ParamShards*> shards) {
  State::Unit u;
  u.buffer = &buffer;
  u.shards = std::move(shards);
  u.kept = true;
  state_->units.push_back(std::move(u));
  return state_->units.size() - 1;
}

std::shared_ptr<transformer::ParamGather> FsdpUnits::hooks(size_t unit) {
  std::lock_guard<std::mutex> lock(state_->mutex);
  TORCH_CHECK(unit < state_->units.size(), "[fsdp] no unit ", unit);
  state_->units[unit].hooked = true;
  return std::make_shared<UnitHooks>(state_, unit);
}

void FsdpUnits::start(int64_t accumulations) {
  std::lock_guard<std::mutex> lock(state_->mutex);
  state_->accumulations = accumulations;
  for (auto& u : state_->units) {
    std::fill(u.seen.begin(), u.seen.end(), 0);
    u.complete = 0;
  }
}

void FsdpUnits::zero_grad() {
  auto& s = *state_;
  std::lock_guard<std::mutex> lock(s.mutex);
  while (!s.reductions.empty()) s.drain_front();
  s.accumulations = 0;
  for (auto& u : s.units) {
    if (u.kept) continue;
    for (auto& g : u.grad_shard) g.zero_();
    std::fill(u.seen.begin(), u.seen.end(), 0);
    u.complete = 0;
    // The whole gradient is allocated as the unit's backward begins (ZeRO-2 then keeps it through
    // the step's backward passes); before the step for a unit whose module does not call its hooks.
    if (u.hooked)
      u.buffer->release_grads();
    else
      u.buffer->zero_grad();
  }
}

void FsdpUnits::finish() {
  auto& s = *state_;
  std::lock_guard<std::mutex> lock(s.mutex);
  for (size_t i = 0; i < s.units.size(); ++i) {
    auto& u = s.units[i];
    if (!u.kept && !u.reducing && u.buffer->grads_allocated()) s.reduce(i);
  }
  while (!s.reductions.empty()) s.drain_front();
  for (auto& u : s.units) s.wait_gather(u);
  if (s.tp && s.tp->size() > 1) {
    // Every sequence-parallel piece of every shard, in one all-reduce.
    std::vector<at::Tensor> pieces;
    for (auto& u : s.units)
      for (size_t r = 0; r < u.sequence_parallel.size(); ++r)
        for (const auto& [offset, numel] : u.sequence_parallel[r])
          pieces.push_back(u.grad_shard[r].narrow(0, offset, numel));
    s.tp->all_reduce_coalesced(pieces);
  }
}

const at::Tensor& FsdpUnits::grad_shard(size_t unit, size_t region) const {
  return state_->units.at(unit).grad_shard.at(region);
}

void FsdpUnits::gather_all() {
  auto& s = *state_;
  std::lock_guard<std::mutex> lock(s.mutex);
  for (auto& u : s.units) s.launch_gather(u);
  for (auto& u : s.units) s.wait_gather(u);
}

void FsdpUnits::release_params() {
  auto& s = *state_;
  std::lock_guard<std::mutex> lock(s.mutex);
  for (auto& u : s.units) s.release(u);
}

bool FsdpUnits::hooked(size_t unit) const {
  std::lock_guard<std::mutex> lock(state_->mutex);
  return state_->units.at(unit).hooked;
}

void FsdpUnits::start_param_sync() {
  auto& s = *state_;
  std::lock_guard<std::mutex> lock(s.mutex);
  TORCH_CHECK(!s.shard_params, "[fsdp] start_param_sync is ZeRO-2's; ZeRO-3 gathers in the hooks");
  for (auto& u : s.units)
    if (u.hooked && !u.kept) s.launch_param_sync(u);
}

void FsdpUnits::finish_param_sync() {
  auto& s = *state_;
  std::lock_guard<std::mutex> lock(s.mutex);
  if (!s.shard_params)
    for (auto& u : s.units) s.wait_gather(u);
}

int64_t FsdpUnits::param_syncs_pending() const {
  std::lock_guard<std::mutex> lock(state_->mutex);
  if (state_->shard_params) return 0;
  return std::count_if(state_->units.begin(), state_->units.end(),
                       [](const State::Unit& u) { return !u.gathering.empty(); });
}

int64_t FsdpUnits::units_without_hooks() const {
  std::lock_guard<std::mutex> lock(state_->mutex);
  return std::count_if(state_->units.begin(), state_->units.end(), [](const State::Unit& u) { return !u.hooked; });
}

int64_t FsdpUnits::units_gathered_under_forward() const {
  std::lock_guard<std::mutex> lock(state_->mutex);
  return std::count_if(state_->units.begin(), state_->units.end(),
                       [](const State::Unit& u) { return u.hooked && !u.kept; });
}

int64_t FsdpUnits::gathers() const {
  std::lock_guard<std::mutex> lock(state_->mutex);
  return state_->gathers;
}

}  // namespace megatron::distributed
