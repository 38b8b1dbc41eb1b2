#include "megatron/distributed/grad_buckets.h"

#include "after_accumulation.h"

#include <c10/util/Exception.h>

#include <algorithm>
#include <iterator>
#include <mutex>

namespace megatron::distributed {

struct GradBuckets::State {
  at::Tensor grads;   // the buffer's fp32 gradients
  at::Tensor params;  // and its parameters
  std::vector<Bucket> buckets;
  std::vector<size_t> bucket_of;      // by parameter
  std::vector<size_t> forward_order;  // bucket indices by their first parameter
  // This step's bookkeeping; the mutex guards it against an autograd engine that runs hooks on
  // a device thread while the caller reads launched().
  std::mutex mutex;
  bool armed = false;
  bool paused = false;  // no_sync(): complete buckets wait in `ready` until resumed
  int64_t accumulations = 0;
  std::shared_ptr<comm::ProcessGroup> group;
  std::vector<int64_t> seen;                        // backward passes per parameter
  std::vector<size_t> missing;                      // per bucket: parameters not yet complete
  std::vector<std::vector<comm::WorkHandle>> work;  // per bucket, once launched
  at::ScalarType reduce_dtype = at::kFloat;
  std::vector<std::vector<std::pair<at::Tensor, at::Tensor>>> copies;  // per bucket: (range, its reduced copy)
  int64_t launched = 0;
  std::vector<size_t> ready;                              // complete while paused, in completion order
  std::vector<std::vector<comm::WorkHandle>> param_work;  // per bucket: its pending broadcasts

  void launch(size_t b) {
    for (const auto& p : buckets[b].pieces) {
      at::Tensor range = grads.narrow(0, p.offset, p.numel);
      at::Tensor wire = range;
      if (reduce_dtype != range.scalar_type()) {
        wire = range.to(reduce_dtype);
        if (p.owner < 0 || p.owner == group->rank()) copies[b].emplace_back(range, wire);  // where the sum lands
      }
      work[b].push_back(p.owner < 0 ? group->all_reduce_async(wire, comm::ReduceOp::kAvg)
                                    : group->reduce_async(wire, p.owner, comm::ReduceOp::kAvg));
    }
    ++launched;
  }

  void finish_params(size_t b) {
    for (auto& w : param_work[b]) w->wait();
    param_work[b].clear();
  }

  void on_accumulated(size_t param) {
    std::lock_guard<std::mutex> lock(mutex);
    if (!armed || ++seen[param] != accumulations) return;
    const size_t b = bucket_of[param];
    if (--missing[b] != 0) return;
    if (paused)
      ready.push_back(b);
    else
      launch(b);
  }
};

GradBuckets::GradBuckets(const ParamAndGradBuffer& buffer, const std::vector<at::Tensor>& params, int64_t bucket_numel,
                         const std::vector<int64_t>& shard_numel, const std::vector<bool>& all_reduced,
                         at::ScalarType reduce_dtype)
    : state_(std::make_shared<State>()), params_(params) {
  TORCH_CHECK(bucket_numel > 0, "[grad_buckets] the bucket size must be positive, got ", bucket_numel);
  TORCH_CHECK(shard_numel.empty() || shard_numel.size() == buffer.regions().size(), "[grad_buckets] ",
              shard_numel.size(), " shard sizes for ", buffer.regions().size(), " regions");
  auto& s = *state_;
  s.reduce_dtype = reduce_dtype;
  s.grads = buffer.grads();
  s.params = buffer.params();
  s.bucket_of.assign(params.size(), 0);
  // From the end of each region down, closing a bucket once it holds bucket_numel elements and
  // at each region's start, so that a bucket never waits for another region's gradients.
  const auto& regions = buffer.regions();
  for (auto r = regions.rbegin(); r != regions.rend(); ++r) {
    int64_t end = r->offset + r->padded;  // the region's padding rides with its last bucket
    Bucket open;
    for (auto m = r->members.rbegin(); m != r->members.rend(); ++m) {
      open.params.push_back(m->index);
      s.bucket_of[m->index] = s.buckets.size();
      const int64_t begin = r->offset + m->offset;
      if (end - begin >= bucket_numel || std::next(m) == r->members.rend()) {
        open.offset = begin;
        open.numel = end - begin;
        if (!shard_numel.empty()) {  // cut where one rank's shard ends and the next one's begins
          const int64_t shard = shard_numel[static_cast<size_t>(std::distance(r, regions.rend()) - 1)];
          for (int64_t at = begin; at < end;) {
            const int owner = static_cast<int>((at - r->offset) / shard);
            const int64_t stop = std::min(end, r->offset + (owner + 1) * shard);
            open.shards.push_back({at, stop - at, owner});
            at = stop;
          }
        }
        bool whole = shard_numel.empty();
        for (size_t i : open.params) whole = whole || (!all_reduced.empty() && all_reduced.at(i));
        open.pieces = whole ? std::vector<Piece>{{begin, end - begin, -1}} : open.shards;
        s.buckets.push_back(std::move(open));
        open = Bucket();
        end = begin;
      }
    }
  }
  auto first_param = [&s](size_t b) {
    return *std::min_element(s.buckets[b].params.begin(), s.buckets[b].params.end());
  };
  for (size_t b = 0; b < s.buckets.size(); ++b) s.forward_order.push_back(b);
  std::sort(s.forward_order.begin(), s.forward_order.end(),
            [&](size_t a, size_t b) { return first_param(a) < first_param(b); });
  s.param_work.assign(s.buckets.size(), {});
}

GradBuckets::~GradBuckets() = default;

const std::vector<GradBuckets::Bucket>& GradBuckets::buckets() const {
  return state_->buckets;
}

void GradBuckets::enable_overlap() {
  if (!grad_accumulators_.empty()) return;
  for (size_t i = 0; i < params_.size(); ++i) {
    TORCH_CHECK(params_[i].requires_grad() && params_[i].is_leaf(), "[grad_buckets] parameter ", i,
                " is not a leaf that requires a gradient; --overlap-grad-reduce hooks its accumulator");
    grad_accumulators_.push_back(detail::after_accumulation(params_[i], [weak = std::weak_ptr<State>(state_), i] {
      if (auto state = weak.lock()) state->on_accumulated(i);
    }));
  }
}

void GradBuckets::start(std::shared_ptr<comm::ProcessGroup> group, int64_t accumulations) {
  auto& s = *state_;
  std::lock_guard<std::mutex> lock(s.mutex);
  s.armed = !grad_accumulators_.empty() && group && group->size() > 1;
  s.accumulations = accumulations;
  s.group = std::move(group);
  s.seen.assign(params_.size(), 0);
  s.missing.clear();
  for (const auto& b : s.buckets) s.missing.push_back(b.params.size());
  s.work.assign(s.buckets.size(), {});
  s.copies.assign(s.buckets.size(), {});
  s.launched = 0;
  s.ready.clear();
}

void GradBuckets::set_paused(bool paused) {
  auto& s = *state_;
  std::lock_guard<std::mutex> lock(s.mutex);
  s.paused = paused;
  if (paused) return;
  for (size_t b : s.ready) s.launch(b);  // in the order they completed, the same on every rank
  s.ready.clear();
}

void GradBuckets::finish(const std::shared_ptr<comm::ProcessGroup>& group) {
  auto& s = *state_;
  std::lock_guard<std::mutex> lock(s.mutex);
  if (!s.armed) {
    // No overlap this step: every bucket now, with the collective the overlap would have used.
    s.group = group;
    s.work.assign(s.buckets.size(), {});
    s.copies.assign(s.buckets.size(), {});
    s.launched = 0;
  }
  s.armed = false;
  s.ready.clear();  // launched below with the rest
  if (!group || group->size() == 1) return;
  TORCH_CHECK(s.group == group, "[grad_buckets] finish() on another group than start()");
  for (size_t b = 0; b < s.buckets.size(); ++b) {
    if (s.work[b].empty()) s.launch(b);  // parameters without a gradient this step, or no overlap
  }
  for (auto& bucket : s.work)
    for (auto& w : bucket) w->wait();
  for (auto& bucket : s.copies)
    for (auto& [range, wire] : bucket) range.copy_(wire);
  s.work.assign(s.buckets.size(), {});
  s.copies.assign(s.buckets.size(), {});
}

bool GradBuckets::launched_with(size_t param) const {
  std::lock_guard<std::mutex> lock(state_->mutex);
  return state_->work.size() > 0 && !state_->work.at(state_->bucket_of.at(param)).empty();
}

int64_t GradBuckets::launched() const {
  std::lock_guard<std::mutex> lock(state_->mutex);
  return state_->launched;
}

void GradBuckets::start_param_sync(const std::shared_ptr<comm::ProcessGroup>& group) {
  auto& s = *state_;
  std::lock_guard<std::mutex> lock(s.mutex);
  TORCH_CHECK(!s.buckets.empty() && !s.buckets.front().shards.empty(),
              "[grad_buckets] the parameter gather needs the distributed optimizer's shards");
  for (size_t b : s.forward_order) {
    TORCH_CHECK(s.param_work[b].empty(),
                "[grad_buckets] a parameter gather was launched while the last one is "
                "pending; finish_param_sync() first");
    for (const auto& p : s.buckets[b].shards) {
      at::Tensor range = s.params.narrow(0, p.offset, p.numel);
      s.param_work[b].push_back(group->broadcast_async(range, p.owner));
    }
  }
}

void GradBuckets::finish_param_sync() {
  auto& s = *state_;
  std::lock_guard<std::mutex> lock(s.mutex);
  for (size_t b : s.forward_order) s.finish_params(b);
}

std::function<void()> GradBuckets::param_sync_waiter(const std::vector<size_t>& params) const {
  std::vector<size_t> buckets;
  for (size_t p : params) buckets.push_back(state_->bucket_of.at(p));
  std::sort(buckets.begin(), buckets.end());
  buckets.erase(std::unique(buckets.begin(), buckets.end()), buckets.end());
  return [weak = std::weak_ptr<State>(state_), buckets] {
    if (auto s = weak.lock()) {
      std::lock_guard<std::mutex> lock(s->mutex);
      for (size_t b : buckets) s->finish_params(b);
    }
  };
}

int64_t GradBuckets::param_syncs_pending() const {
  std::lock_guard<std::mutex> lock(state_->mutex);
  return std::count_if(state_->param_work.begin(), state_->param_work.end(), [](const auto& w) { return !w.empty(); });
}

}  // namespace megatron::distributed
