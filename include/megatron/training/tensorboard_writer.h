// TensorBoard scalars (--tensorboard-dir): an event file that TensorBoard and its Python readers
// open, written as torch.utils.tensorboard's SummaryWriter writes one — TFRecord framing around
// Event protos holding a Summary of one simple_value, the first event naming the file version.
#pragma once

#include "megatron/export.h"

#include <cstdint>
#include <cstdio>
#include <string>

namespace megatron::training {

class MEGATRON_API TensorBoardWriter {
 public:
  // Empty dir: writes nothing. Otherwise creates dir and a new events.out.tfevents.<time>.<host>
  // file in it (a clear error naming it when it cannot). Events are flushed every queue_size
  // scalars (SummaryWriter's max_queue), at flush() and on destruction.
  explicit TensorBoardWriter(const std::string& dir = "", int64_t queue_size = 1000);
  ~TensorBoardWriter();
  TensorBoardWriter(const TensorBoardWriter&) = delete;
  TensorBoardWriter& operator=(const TensorBoardWriter&) = delete;

  bool enabled() const { return file_ != nullptr; }
  const std::string& path() const { return path_; }
  void add_scalar(const std::string& tag, double value, int64_t step);
  void flush();

 private:
  void write_record(const std::string& event);
  std::string path_;
  std::FILE* file_ = nullptr;
  int64_t queue_size_ = 1000;
  int64_t queued_ = 0;
};

}  // namespace megatron::training
