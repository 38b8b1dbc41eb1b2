#include "megatron/training/metrics_writer.h"

#include <c10/util/Exception.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <sstream>

#include "megatron/training/training.h"

namespace megatron::training {
namespace {

// JSON has no NaN/Inf: they are written as null.
std::string number(double v) {
  if (!std::isfinite(v)) return "null";
  char buffer[32];
  std::snprintf(buffer, sizeof(buffer), "%.9g", v);
  return buffer;
}

// Written by hand, field by field, to keep Megatron-LM's order of the keys in each line.
std::string quoted(const std::string& s) {
  return nlohmann::json(s).dump();
}

}  // namespace

MetricsWriter::MetricsWriter(const std::string& path) : path_(path) {
  if (path.empty()) return;
  auto parent = std::filesystem::path(path).parent_path();
  if (!parent.empty()) std::filesystem::create_directories(parent);
  out_.open(path, std::ios::trunc);
  TORCH_CHECK(out_.good(), "[metrics] cannot write --metrics-file ", path);
}

void MetricsWriter::write_line(const std::string& json) {
  if (!out_.is_open()) return;
  out_ << json << '\n';
  out_.flush();
  TORCH_CHECK(out_.good(), "[metrics] writing ", path_, " failed (disk full?)");
}

void MetricsWriter::write_iteration(const IterationRecord& r, int64_t consumed_samples, double elapsed_ms,
                                    double tokens_per_second, double tflops) {
  std::ostringstream j;
  j << "{\"type\": \"train\", \"iteration\": " << r.iteration << ", \"consumed_samples\": " << consumed_samples;
  for (const auto& [k, v] : r.metrics) j << ", " << quoted(k) << ": " << number(v);
  j << ", \"learning_rate\": " << number(r.learning_rate) << ", \"grad_norm\": " << number(r.grad_norm)
    << ", \"loss_scale\": " << number(r.loss_scale) << ", \"skipped\": " << (r.skipped ? "true" : "false");
  if (r.num_zeros) j << ", \"num_zeros\": " << number(*r.num_zeros);
  if (r.params_norm) j << ", \"params_norm\": " << number(*r.params_norm);
  j << ", \"elapsed_ms\": " << number(elapsed_ms) << ", \"tokens_per_second\": " << number(tokens_per_second)
    << ", \"tflops_per_gpu\": " << number(tflops) << "}";
  write_line(j.str());
}

void MetricsWriter::write_evaluation(const EvaluationRecord& r) {
  std::ostringstream j;
  j << "{\"type\": " << quoted(r.split) << ", \"iteration\": " << r.iteration;
  for (const auto& [k, v] : r.metrics) {
    j << ", " << quoted(k) << ": " << number(v) << ", " << quoted(k + " PPL") << ": "
      << number(std::exp(std::min(20.0, v)));
  }
  write_line(j.str() + "}");
}

}  // namespace megatron::training
