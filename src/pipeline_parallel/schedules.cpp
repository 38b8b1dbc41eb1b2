#include "megatron/pipeline_parallel/schedules.h"

#include <ATen/ATen.h>
#include <ATen/record_function.h>
#include <c10/util/Exception.h>
#include <torch/csrc/autograd/autograd.h>
#include <torch/csrc/autograd/engine.h>
#include <torch/csrc/autograd/variable.h>
#include <torch/nn/module.h>

#include <chrono>
#include <deque>

#include "megatron/pipeline_parallel/p2p_communication.h"
#include "megatron/transformer/module.h"

namespace megatron::pipeline_parallel {
namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

// What every schedule shares: running one micro-batch forward or backward through a chunk, and
// the bookkeeping of in-flight micro-batches and compute time.
class Steps {
 public:
  Steps(const ParallelState& ps, const ForwardStepFunc& f, const std::vector<datasets::BatchIterator*>& its,
        const std::vector<torch::nn::Module*>& model, const ScheduleOptions& o)
      : ps_(ps), f_(f), its_(its), model_(model), o_(o), start_(Clock::now()) {
    TORCH_CHECK(!model.empty() && model.size() == its.size(),
                "[schedules] expected one data iterator per model "
                "chunk, got ",
                its.size(), " iterators for ", model.size(), " chunks");
    TORCH_CHECK(o.num_microbatches >= 1, "[schedules] num_microbatches must be >= 1, got ", o.num_microbatches);
    for (size_t i = 0; i < model.size(); ++i)
      TORCH_CHECK(model[i] && its[i], "[schedules] model chunk ", i, " or its data iterator is null");
  }

  // Megatron's forward_step: the chunk's input, the user's forward_step, then on the last stage
  // the loss, divided by num_microbatches so that the gradients accumulate to the mean (with
  // calculate_per_token_loss, times its token count, so that they accumulate to the sum).
  at::Tensor forward(int chunk, const at::Tensor& input, bool is_last_stage) {
    const auto start = Clock::now();
    torch::nn::Module& m = *model_[chunk];
    if (auto* stage = dynamic_cast<transformer::MegatronModule*>(&m)) {
      stage->set_input_tensor(input);
      if (stage->has_moe_layers()) stage->set_moe_aux_loss_scale(moe_aux_loss_scale());
    } else {
      TORCH_CHECK(!input.defined(), "[schedules] model chunk ", chunk,
                  " is not a transformer::MegatronModule, "
                  "so it cannot take activations from the previous pipeline stage");
    }
    RECORD_USER_SCOPE("forward");  // named ranges in --profile traces
    auto [output, loss_func] = f_(*its_[chunk], m);
    if (!o_.forward_only) ++inflight_;
    result_.peak_inflight_microbatches = std::max(result_.peak_inflight_microbatches, inflight_);
    if (is_last_stage) {
      TORCH_CHECK(loss_func, "[schedules] forward_step returned no loss_func on the last pipeline stage");
      RECORD_USER_SCOPE("loss");
      auto [loss, metrics, num_tokens] = loss_func(output);
      TORCH_CHECK(loss.defined() && loss.numel() == 1, "[schedules] loss_func must return a scalar loss, got ",
                  loss.defined() ? loss.sizes() : at::IntArrayRef{});
      // Summed on the loss's device and checked once in finish() (a sum is finite only if every
      // term is): a read per micro-batch would make the host wait for each forward on a GPU.
      loss_sum_ = loss_sum_.defined() ? loss_sum_ + loss.detach() : loss.detach();
      result_.losses_reduced.push_back(std::move(metrics));
      if (o_.calculate_per_token_loss) {
        TORCH_CHECK(num_tokens.defined() && num_tokens.numel() == 1,
                    "[schedules] --calculate-per-token-loss needs loss_func to return the number of tokens its "
                    "loss averages: (loss, num_tokens, metrics)");
        result_.num_tokens.push_back(num_tokens.detach().reshape({}));
        output = loss * result_.num_tokens.back().to(loss.scalar_type());
      } else {
        output = loss / static_cast<double>(o_.num_microbatches);
      }
      if (o_.after_last_loss && static_cast<int64_t>(result_.losses_reduced.size()) == o_.num_microbatches) {
        result_.loss_finite = loss_sum_.isfinite().all();
        o_.after_last_loss(result_);
      }
    } else if (ps_.get_pipeline_model_parallel_world_size() > 1) {
      // Checked here, where the callback can be named; the send would name only a shape.
      const auto want = p2p_config().tensor_shape;
      TORCH_CHECK(output.defined() && output.sizes() == at::IntArrayRef(want),
                  "[schedules] forward_step returned an output of shape ",
                  output.defined() ? c10::str(output.sizes()) : std::string("(none)"), " on pipeline stage ",
                  ps_.get_pipeline_model_parallel_rank(), " (model chunk ", chunk,
                  "); the next stage takes [sequence, micro-batch, hidden] = ", at::IntArrayRef(want),
                  " (the sequence divided by TP under sequence parallelism)");
    }
    result_.compute_ms += ms_since(start);
    return output;
  }

  // Megatron's backward_step: back-propagates `output_grad` (or, on the last stage, the scaled
  // loss) and returns the gradient of the chunk's input to send back.
  at::Tensor backward(const at::Tensor& input, const at::Tensor& output, const at::Tensor& output_grad) {
    const auto start = Clock::now();
    RECORD_USER_SCOPE("backward");
    if (!output_grad.defined()) {
      at::Tensor loss = o_.grad_scale_func ? o_.grad_scale_func(output) : output;
      torch::autograd::backward({loss});
    } else {
      // The output's storage may have been freed after sending (deallocate), so bypass
      // backward()'s shape check and hand the gradient to the engine directly.
      torch::autograd::Engine::get_default_engine().execute({torch::autograd::impl::gradient_edge(output)},
                                                            {output_grad}, /*keep_graph=*/false,
                                                            /*create_graph=*/false, /*accumulate_grad=*/true);
    }
    --inflight_;
    result_.compute_ms += ms_since(start);
    return input.defined() ? input.grad() : at::Tensor();
  }

  // The activation has been sent: its values are no longer needed, only its graph.
  // A handle to the same tensor: set_data swaps the storage under every handle.
  void deallocate(at::Tensor output) const {
    if (!o_.deallocate_pipeline_outputs || !output.defined() || output.is_view() || !output.grad_fn()) return;
    output.set_data(at::empty({1}, output.options()));
  }

  // An input received from the previous stage: a leaf whose gradient goes back to it.
  at::Tensor as_input(at::Tensor received) const {
    if (received.defined() && !o_.forward_only) received.requires_grad_(true);
    return received;
  }

  // Megatron's: the main loss's scale (the fp16 loss scale) over the micro-batches, or without
  // the division under calculate_per_token_loss; on the device, made once per schedule run.
  const at::Tensor& moe_aux_loss_scale() {
    if (moe_aux_loss_scale_.defined()) return moe_aux_loss_scale_;
    const at::Tensor one = at::ones({}, at::TensorOptions().dtype(at::kFloat).device(o_.device));
    moe_aux_loss_scale_ = o_.grad_scale_func ? o_.grad_scale_func(one) : one;
    if (!o_.calculate_per_token_loss)
      moe_aux_loss_scale_ = moe_aux_loss_scale_ / static_cast<double>(o_.num_microbatches);
    return moe_aux_loss_scale_;
  }

  P2PConfig p2p_config() const {
    const int64_t tp = o_.tensor_model_parallel_size;
    TORCH_CHECK(o_.seq_length > 0 && o_.micro_batch_size > 0 && o_.hidden_size > 0,
                "[schedules] pipelining needs seq_length, micro_batch_size and hidden_size, got ", o_.seq_length, ", ",
                o_.micro_batch_size, ", ", o_.hidden_size);
    TORCH_CHECK(!o_.sequence_parallel || o_.seq_length % tp == 0, "[schedules] seq_length (", o_.seq_length,
                ") is not divisible by the tensor-parallel size (", tp, ") with sequence parallelism");
    const int64_t s = o_.sequence_parallel ? o_.seq_length / tp : o_.seq_length;
    return P2PConfig{{s, o_.micro_batch_size, o_.hidden_size}, o_.pipeline_dtype, o_.device};
  }

  ForwardBackwardResult finish() {
    if (loss_sum_.defined()) result_.loss_finite = loss_sum_.isfinite().all();
    result_.total_ms = ms_since(start_);
    return std::move(result_);
  }

  const ParallelState& ps_;
  const ForwardStepFunc& f_;
  const std::vector<datasets::BatchIterator*>& its_;
  const std::vector<torch::nn::Module*>& model_;
  const ScheduleOptions& o_;

 private:
  ForwardBackwardResult result_;
  at::Tensor loss_sum_;  // of the micro-batches' losses so far
  at::Tensor moe_aux_loss_scale_;
  int64_t inflight_ = 0;
  Clock::time_point start_;
};

template <typename T>
T pop_front(std::deque<T>& q) {
  TORCH_INTERNAL_ASSERT(!q.empty(), "pipeline schedule queue underflow");
  T v = std::move(q.front());
  q.pop_front();
  return v;
}

}  // namespace

ForwardBackwardResult forward_backward_no_pipelining(const ParallelState& ps, const ForwardStepFunc& f,
                                                     const std::vector<datasets::BatchIterator*>& its,
                                                     const std::vector<torch::nn::Module*>& model,
                                                     const ScheduleOptions& o) {
  TORCH_CHECK(model.size() == 1, "[schedules] no pipelining runs one model chunk, got ", model.size());
  Steps steps(ps, f, its, model, o);
  // Gradients accumulate in the parameters over the micro-batches.
  for (int64_t i = 0; i < o.num_microbatches; ++i) {
    at::Tensor output = steps.forward(0, {}, true);
    if (!o.forward_only) steps.backward({}, output, {});
  }
  return steps.finish();
}

ForwardBackwardResult forward_backward_pipelining_without_interleaving(const ParallelState& ps,
                                                                       const ForwardStepFunc& f,
                                                                       const std::vector<datasets::BatchIterator*>& its,
                                                                       const std::vector<torch::nn::Module*>& model,
                                                                       const ScheduleOptions& o) {
  TORCH_CHECK(model.size() == 1, "[schedules] 1F1B without interleaving runs one model chunk, got ", model.size());
  Steps steps(ps, f, its, model, o);
  P2PCommunicator p2p(ps, steps.p2p_config());
  const bool last = ps.is_pipeline_last_stage();
  const int64_t stages = ps.get_pipeline_model_parallel_world_size();
  const int64_t rank = ps.get_pipeline_model_parallel_rank();
  // Warm-up: the forwards a stage runs before the first gradient comes back to it.
  const int64_t warmup = o.forward_only ? o.num_microbatches : std::min(stages - rank - 1, o.num_microbatches);
  const int64_t remaining = o.num_microbatches - warmup;
  std::deque<at::Tensor> inputs, outputs;

  for (int64_t i = 0; i < warmup; ++i) {
    at::Tensor input = steps.as_input(p2p.recv_forward());
    at::Tensor output = steps.forward(0, input, last);
    p2p.send_forward(output);
    if (o.forward_only) continue;
    if (!last) steps.deallocate(output);
    inputs.push_back(input);
    outputs.push_back(output);
  }

  // Steady state: one forward, one backward.
  at::Tensor input;
  if (remaining > 0) input = steps.as_input(p2p.recv_forward());
  for (int64_t i = 0; i < remaining; ++i) {
    const bool last_iteration = i == remaining - 1;
    at::Tensor output = steps.forward(0, input, last);
    if (o.forward_only) {
      p2p.send_forward(output);
      if (!last_iteration) input = steps.as_input(p2p.recv_forward());
      continue;
    }
    at::Tensor output_grad = p2p.send_forward_recv_backward(output);
    if (!last) steps.deallocate(output);  // the last stage's output is the loss, kept
    inputs.push_back(input);
    outputs.push_back(output);
    // The oldest micro-batch's backward, then its input's gradient goes back.
    at::Tensor oldest_input = pop_front(inputs);
    at::Tensor oldest_output = pop_front(outputs);
    at::Tensor input_grad = steps.backward(oldest_input, oldest_output, output_grad);
    if (last_iteration) {
      p2p.send_backward(input_grad);
      input = at::Tensor();
    } else {
      input = steps.as_input(p2p.send_backward_recv_forward(input_grad));
    }
  }

  // Cool-down: the backwards of the warm-up micro-batches.
  if (!o.forward_only) {
    for (int64_t i = 0; i < warmup; ++i) {
      at::Tensor oldest_input = pop_front(inputs);
      at::Tensor oldest_output = pop_front(outputs);
      at::Tensor output_grad = p2p.recv_backward();
      p2p.send_backward(steps.backward(oldest_input, oldest_output, output_grad));
    }
  }
  return steps.finish();
}

ForwardBackwardResult forward_backward_pipelining_with_interleaving(const ParallelState& ps, const ForwardStepFunc& f,
                                                                    const std::vector<datasets::BatchIterator*>& its,
                                                                    const std::vector<torch::nn::Module*>& model,
                                                                    const ScheduleOptions& o) {
  Steps steps(ps, f, its, model, o);
  P2PCommunicator p2p(ps, steps.p2p_config());
  const int64_t chunks = static_cast<int64_t>(model.size());
  const int64_t stages = ps.get_pipeline_model_parallel_world_size();
  const int64_t rank = ps.get_pipeline_model_parallel_rank();
  TORCH_CHECK(stages > 1, "[schedules] the interleaved schedule needs more than one pipeline stage");
  TORCH_CHECK(o.num_microbatches % stages == 0, "[schedules] the interleaved schedule needs num_microbatches (",
              o.num_microbatches, ") to be a multiple of the pipeline-parallel size (", stages, ")");
  const bool first_rank = ps.is_pipeline_first_stage(), last_rank = ps.is_pipeline_last_stage();
  auto is_first = [&](int64_t chunk) { return first_rank && chunk == 0; };
  auto is_last = [&](int64_t chunk) { return last_rank && chunk == chunks - 1; };

  const int64_t total = o.num_microbatches * chunks;
  // With as many micro-batches as stages there is no steady state: all forwards come first.
  const bool all_warmup = o.num_microbatches == stages;
  int64_t warmup = total;
  if (!o.forward_only && !all_warmup) warmup = std::min(total, (stages - rank - 1) * 2 + (chunks - 1) * stages);
  const int64_t remaining = total - warmup;

  // Micro-batches go through the chunks in groups of `stages`: forward k runs chunk
  // (k mod stages*chunks) / stages; backwards walk the chunks in reverse.
  auto chunk_id = [&](int64_t k, bool forward) {
    const int64_t group = stages * chunks;
    const int64_t id = ((k % group + group) % group) / stages;  // k may be negative: Python's modulo
    return forward ? id : chunks - id - 1;
  };
  std::vector<std::deque<at::Tensor>> inputs(chunks), outputs(chunks), output_grads(chunks);

  auto forward_k = [&](int64_t k) {
    const int64_t c = chunk_id(k, true);
    if (is_first(c) && inputs[c].size() == outputs[c].size()) inputs[c].push_back(at::Tensor());
    at::Tensor output = steps.forward(static_cast<int>(c), inputs[c].back(), is_last(c));
    outputs[c].push_back(output);
    if (o.forward_only) {
      inputs[c].pop_back();
      outputs[c].pop_back();
    }
    return output;
  };
  auto backward_k = [&](int64_t k) {
    const int64_t c = chunk_id(k, false);
    if (is_last(c) && output_grads[c].empty()) output_grads[c].push_back(at::Tensor());
    at::Tensor input = pop_front(inputs[c]);
    at::Tensor output = pop_front(outputs[c]);
    at::Tensor output_grad = pop_front(output_grads[c]);
    return steps.backward(input, output, output_grad);
  };

  // Warm-up.
  inputs[0].push_back(steps.as_input(p2p.recv_forward()));
  for (int64_t k = 0; k < warmup; ++k) {
    at::Tensor output = forward_k(k);
    const int64_t next_chunk = chunk_id(k + 1, true);
    bool recv_prev = !(first_rank && next_chunk == 0) && k != total - 1;
    if (is_last(chunk_id(k, true))) output = at::Tensor();  // the loss stays here
    if (k == warmup - 1 && !o.forward_only && !all_warmup) {
      auto [input, output_grad] =
          p2p.send_forward_backward_recv_forward_backward(output, {}, recv_prev, /*recv_next=*/!last_rank);
      output_grads[chunks - 1].push_back(output_grad);
      if (recv_prev) inputs[next_chunk].push_back(steps.as_input(input));
    } else {
      at::Tensor input = p2p.send_forward_recv_forward(output, recv_prev);
      if (recv_prev) inputs[next_chunk].push_back(steps.as_input(input));
    }
    if (!o.forward_only) steps.deallocate(output);
  }

  // Steady state.
  for (int64_t k = 0; k < remaining; ++k) {
    const int64_t fk = k + warmup, bk = k;
    at::Tensor output = forward_k(fk);
    at::Tensor input_grad = backward_k(bk);
    if (is_last(chunk_id(fk, true))) output = at::Tensor();
    if (is_first(chunk_id(bk, false))) input_grad = at::Tensor();

    // Which chunk the next received activation and gradient belong to; the first and last
    // stage skip a receive where the ring starts over.
    bool recv_prev = true, recv_next = true;
    int64_t next_forward_chunk, next_backward_chunk;
    if (first_rank) {
      next_forward_chunk = chunk_id(fk - (stages - 1), true);
      if (next_forward_chunk == chunks - 1) recv_prev = false;
      ++next_forward_chunk;
    } else {
      next_forward_chunk = chunk_id(fk + 1, true);
    }
    if (last_rank) {
      next_backward_chunk = chunk_id(bk - (stages - 1), false);
      if (next_backward_chunk == 0) recv_next = false;
      --next_backward_chunk;
    } else {
      next_backward_chunk = chunk_id(bk + 1, false);
    }
    if (k == remaining - 1) recv_prev = false;
    auto [input, output_grad] =
        p2p.send_forward_backward_recv_forward_backward(output, input_grad, recv_prev, recv_next);
    steps.deallocate(output);
    if (recv_prev) inputs[next_forward_chunk].push_back(steps.as_input(input));
    if (recv_next) output_grads[next_backward_chunk].push_back(output_grad);
  }

  // Cool-down.
  if (!o.forward_only) {
    if (all_warmup) output_grads[chunks - 1].push_back(p2p.recv_backward());
    for (int64_t k = remaining; k < total; ++k) {
      at::Tensor input_grad = backward_k(k);
      if (is_first(chunk_id(k, false))) input_grad = at::Tensor();
      const int64_t next_chunk = chunk_id(k + 1, false);
      const bool recv_next = !(last_rank && next_chunk == chunks - 1) && k != total - 1;
      at::Tensor output_grad = p2p.send_backward_recv_backward(input_grad, recv_next);
      if (recv_next) output_grads[next_chunk].push_back(output_grad);
    }
  }
  return steps.finish();
}

ForwardBackwardFunc get_forward_backward_func(const ParallelState& ps) {
  const ParallelState* state = &ps;
  if (ps.get_pipeline_model_parallel_world_size() == 1)
    return [state](const ForwardStepFunc& f, const std::vector<datasets::BatchIterator*>& its,
                   const std::vector<torch::nn::Module*>& model,
                   const ScheduleOptions& o) { return forward_backward_no_pipelining(*state, f, its, model, o); };
  if (ps.get_virtual_pipeline_model_parallel_world_size().value_or(1) > 1)
    return [state](const ForwardStepFunc& f, const std::vector<datasets::BatchIterator*>& its,
                   const std::vector<torch::nn::Module*>& model, const ScheduleOptions& o) {
      return forward_backward_pipelining_with_interleaving(*state, f, its, model, o);
    };
  return [state](const ForwardStepFunc& f, const std::vector<datasets::BatchIterator*>& its,
                 const std::vector<torch::nn::Module*>& model, const ScheduleOptions& o) {
    return forward_backward_pipelining_without_interleaving(*state, f, its, model, o);
  };
}

}  // namespace megatron::pipeline_parallel
