// What the loop prints: Megatron-LM's iteration line and its validation/test lines, mirrored as
// JSON lines in --metrics-file and as Megatron-LM's TensorBoard scalars in --tensorboard-dir.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>

#include "megatron/logging.h"
#include "megatron/memory.h"
#include "training/loop/rank_lines.h"
#include "training/loop/trainer.h"

namespace megatron::training::detail {
namespace {

std::string format(const char* fmt, double value) {
  char buffer[64];
  std::snprintf(buffer, sizeof(buffer), fmt, value);
  return buffer;
}

}  // namespace

void Trainer::evaluate_and_print_results(int64_t iteration, const Iterators& its, const std::string& split) {
  auto values = evaluate(its);
  // As Megatron-LM, a checkpoint records how far validation has read, so a resumed run
  // validates on the same samples as an uninterrupted one.
  if (split == "valid") progress_.consumed_valid_samples += args_.eval_iters * *args_.global_batch_size;
  std::string text =
      " validation loss at iteration " + std::to_string(iteration) + (split == "test" ? " on test set" : "") + " | ";
  for (const auto& [key, value] : values) {
    text += key + " value: " + format("%.6E", value) + " | ";
    text += key + " PPL: " + format("%.6E", std::exp(std::min(20.0, value))) + " | ";
  }
  const std::string rule(text.size() + 1, '-');
  log_rank_last(LogLevel::kInfo, rule);
  log_rank_last(LogLevel::kInfo, text);
  log_rank_last(LogLevel::kInfo, rule);
  result_.evaluations.push_back({iteration, split, values});
  // Megatron-LM writes the test split under the same "validation" tags.
  for (const auto& [key, value] : values) {
    const double ppl = std::exp(std::min(20.0, value));
    tensorboard_.add_scalar(key + " validation", value, iteration);
    tensorboard_.add_scalar(key + " validation vs samples", value, progress_.consumed_train_samples);
    if (args_.log_validation_ppl_to_tensorboard) {
      tensorboard_.add_scalar(key + " validation ppl", ppl, iteration);
      tensorboard_.add_scalar(key + " validation ppl vs samples", ppl, progress_.consumed_train_samples);
    }
  }
  tensorboard_.flush();
  if (ps_.get_rank() == ps_.get_world_size() - 1) metrics_writer_.write_evaluation(result_.evaluations.back());
}

void Trainer::tensorboard_log(int64_t iteration, const IterationRecord& record) {
  if (!tensorboard_.enabled() || iteration % args_.tensorboard_log_interval != 0) return;
  const int64_t samples = progress_.consumed_train_samples;
  auto both = [&](const std::string& tag, double value) {
    tensorboard_.add_scalar(tag, value, iteration);
    tensorboard_.add_scalar(tag + " vs samples", value, samples);
  };
  both("learning-rate", record.learning_rate);
  both("batch-size", static_cast<double>(record.global_batch_size));
  for (const auto& [key, value] : record.metrics) both(key, value);
  if (!args_.no_log_loss_scale_to_tensorboard) both("loss-scale", record.loss_scale);
  if (args_.log_world_size_to_tensorboard) both("world-size", static_cast<double>(args_.world_size));
  if (!record.skipped) both("grad-norm", record.grad_norm);
  if (record.num_zeros) both("num-zeros", *record.num_zeros);
  if (record.params_norm) both("params-norm", *record.params_norm);
  if (args_.log_memory_to_tensorboard) {
    if (const auto m = device_memory_stats(ctx_.device)) {
      tensorboard_.add_scalar("mem-reserved-bytes", static_cast<double>(m->reserved), iteration);
      tensorboard_.add_scalar("mem-allocated-bytes", static_cast<double>(m->allocated), iteration);
      tensorboard_.add_scalar("mem-max-allocated-bytes", static_cast<double>(m->max_allocated), iteration);
    }
  }
}

// Megatron-LM's iteration line, averaged over the iterations since the last one.
void Trainer::training_log(int64_t iteration, const std::vector<IterationRecord>& window) {
  std::map<std::string, double> sums;
  int64_t advanced = 0, skipped = 0, nan = 0;
  double elapsed = 0;
  for (const auto& r : window) {
    elapsed += r.elapsed_ms;
    if (r.skipped) {
      ++skipped;
      bool has_nan = false;
      for (const auto& [k, v] : r.metrics) has_nan = has_nan || !std::isfinite(v);
      nan += has_nan;
      continue;
    }
    ++advanced;
    for (const auto& [k, v] : r.metrics) sums[k] += v;
  }
  const auto& optim = *parts_.optimizer;
  const int64_t gbs = window.back().global_batch_size;
  const double ms = elapsed / window.size();
  const double flops = num_floating_point_operations(args_, gbs, parts_.padded_vocab_size);
  const double tflops = flops / (ms / 1000.0) / 1e12 / args_.world_size;
  const double tokens_per_s = gbs * args_.seq_length / (ms / 1000.0);
  const auto& last = window.back();
  std::ostringstream line;
  char head[128];
  std::snprintf(head, sizeof(head), " iteration %8lld/%8lld |", static_cast<long long>(iteration),
                static_cast<long long>(*args_.train_iters));
  line << head << " consumed samples: " << format("%12.0f", static_cast<double>(progress_.consumed_train_samples))
       << " | elapsed time per iteration (ms): " << format("%.1f", ms)
       << " | throughput per GPU (TFLOP/s/GPU): " << format("%.3f", tflops)
       << " | tokens per second: " << format("%.1f", tokens_per_s)
       << " | learning rate: " << format("%.6E", optim.lr());
  if (args_.decoupled_lr) line << " | decoupled learning rate: " << format("%.6E", optim.decoupled_lr());
  line << " | global batch size: " << format("%5.0f", static_cast<double>(gbs)) << " |";
  for (const auto& [k, v] : sums)
    line << " " << k << ": " << format("%.6E", v / std::max<int64_t>(1, advanced)) << " |";
  line << " loss scale: " << format("%.1f", optim.loss_scale()) << " |";
  if (!last.skipped) line << " grad norm: " << format("%.3f", last.grad_norm) << " |";
  if (last.num_zeros) line << " num zeros: " << format("%.1f", *last.num_zeros) << " |";
  if (last.params_norm) line << " params norm: " << format("%.3f", *last.params_norm) << " |";
  line << " number of skipped iterations: " << format("%3.0f", static_cast<double>(skipped))
       << " | number of nan iterations: " << format("%3.0f", static_cast<double>(nan)) << " |";
  log_rank_last(LogLevel::kInfo, line.str());
  log_rank_last(LogLevel::kInfo,
                timers_.report(ps_.get_world_group(), static_cast<double>(window.size()), args_.timing_log_option));
  // Megatron-LM's report_memory, after the first logged iterations and every --log-memory-interval
  // (ranks of the first data-parallel replica), written by the last rank with the iteration line.
  if (!memory_reported_ || (args_.log_memory_interval && iteration % *args_.log_memory_interval == 0)) {
    std::string report;
    const double mb = 1024.0 * 1024.0;
    const std::string head = "[Rank " + std::to_string(ps_.get_rank()) + "] (after " + std::to_string(iteration);
    const auto m = device_memory_stats(ctx_.device);
    if (ps_.get_data_parallel_rank() != 0) {
      // only the first data-parallel replica reports
    } else if (m) {
      report = head + " iterations) memory (MB) | allocated: " + format("%.1f", m->allocated / mb) +
               " | max allocated: " + format("%.1f", m->max_allocated / mb) +
               " | reserved: " + format("%.1f", m->reserved / mb) +
               " | max reserved: " + format("%.1f", m->max_reserved / mb);
    } else if (ctx_.device.is_cpu() && cpu_allocator_cache_enabled()) {
      // CPU ranks: the allocator cache counts the blocks it hands out (16 KiB and more).
      const auto c = cpu_allocator_cache_stats();
      report = head + " iterations) host memory (MB) | allocated: " + format("%.1f", c.allocated_bytes / mb) +
               " | max allocated: " + format("%.1f", c.peak_allocated_bytes / mb);
    }
    log_in_rank_order(ps_.get_world_group(), ps_.get_world_size() - 1, LogLevel::kInfo, report);
  }
  memory_reported_ = true;
  if (args_.log_timers_to_tensorboard) {
    tensorboard_.add_scalar("iteration-time", ms / 1000.0, iteration);
    if (args_.log_throughput) tensorboard_.add_scalar("throughput", tflops, iteration);
    // Megatron-LM's Timers.write: each timer's slowest rank, seconds per iteration.
    for (const auto& [name, max_ms] : timers_.last_max_ms())
      tensorboard_.add_scalar(name + "-time", max_ms / 1000.0, iteration);
  }
  tensorboard_.flush();
  if (ps_.get_rank() == ps_.get_world_size() - 1) {
    IterationRecord logged = last;  // with the interval's averages, as printed
    for (auto& [k, v] : logged.metrics) v = sums.count(k) ? sums[k] / std::max<int64_t>(1, advanced) : v;
    metrics_writer_.write_iteration(logged, progress_.consumed_train_samples, ms, tokens_per_s, tflops);
  }
}

}  // namespace megatron::training::detail
