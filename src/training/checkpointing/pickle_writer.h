// A pickle written opcode by opcode, for the one file whose Python objects neither torch.save
// nor LibTorch's pickler can express: PyTorch Distributed Checkpoint's .metadata holds dataclasses
// restored through __setstate__ with a tuple (TensorProperties), bare globals (torch.float32) and
// enum members. Protocol 2, no memo: Python's pickle.load reads it, and so does the checked
// unpickler (models/common/unpickler.h) that reads it back here.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace megatron::training::detail {

class PickleWriter {
 public:
  PickleWriter();
  void global(const std::string& module, const std::string& name);  // GLOBAL module.name
  // module.name() with no arguments, its state to follow (then build()): a dataclass.
  void object(const std::string& module, const std::string& name);
  void str(const std::string& s);
  void integer(int64_t v);
  void none();
  void boolean(bool v);
  void mark();
  void tuple();  // from the last mark
  void empty_dict();
  void empty_list();
  void setitems();  // from the last mark into the dict below it
  void appends();   // from the last mark into the list below it
  void reduce();    // callable below, argument tuple on top
  void build();     // object below, state on top
  // torch.Size(values): what DCP stores offsets and sizes as.
  void torch_size(const std::vector<int64_t>& values);
  // STOP; the pickle's bytes.
  std::string finish();

 private:
  std::string out_;
};

}  // namespace megatron::training::detail
