// The run's metrics as JSON lines (--metrics-file): one object per logged iteration (the values
// of the iteration line: metrics averaged over the log interval) and per evaluation, flushed as
// written, for scripts/plot_loss.py and other tools.
#pragma once

#include "megatron/export.h"

#include <fstream>
#include <string>

namespace megatron::training {

struct IterationRecord;
struct EvaluationRecord;

class MEGATRON_API MetricsWriter {
 public:
  // Empty path: writes nothing. Otherwise creates (truncates) the file, with a clear error.
  explicit MetricsWriter(const std::string& path = "");
  void write_iteration(const IterationRecord& record, int64_t consumed_samples, double elapsed_ms,
                       double tokens_per_second, double tflops_per_gpu);
  void write_evaluation(const EvaluationRecord& record);

 private:
  void write_line(const std::string& json);
  std::string path_;
  std::ofstream out_;
};

}  // namespace megatron::training
