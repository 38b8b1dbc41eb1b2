#include "megatron/models/common/language_module.h"

#include <c10/util/Exception.h>

namespace megatron::models::common {

int64_t vocab_size_with_padding(int64_t vocab_size, int64_t divisible_by, int64_t tp_size,
                                std::optional<int64_t> pad_vocab_size_to) {
  TORCH_CHECK(vocab_size > 0, "[language_module] vocab_size must be positive, got ", vocab_size);
  TORCH_CHECK(divisible_by >= 1, "[language_module] make_vocab_size_divisible_by must be >= 1, got ", divisible_by);
  TORCH_CHECK(tp_size >= 1, "[language_module] the tensor-parallel size must be >= 1, got ", tp_size);
  TORCH_CHECK(vocab_size <= (int64_t{1} << 40) && divisible_by <= (int64_t{1} << 20) && tp_size <= (int64_t{1} << 20),
              "[language_module] vocab_size ", vocab_size, " padded to a multiple of ", divisible_by, " x ", tp_size,
              " is out of range");
  if (pad_vocab_size_to) {
    TORCH_CHECK(*pad_vocab_size_to >= vocab_size && *pad_vocab_size_to % tp_size == 0,
                "[language_module] --pad-vocab-size-to ", *pad_vocab_size_to, " must be at least the vocabulary (",
                vocab_size, ") and a multiple of the tensor-parallel size (", tp_size, ")");
    return *pad_vocab_size_to;
  }
  const int64_t multiple = divisible_by * tp_size;
  return (vocab_size + multiple - 1) / multiple * multiple;
}

std::string shift_index(const std::string& name, const std::string& part, int64_t delta) {
  const size_t at = name.find(part);
  if (at == std::string::npos) return name;
  const size_t begin = at + part.size(), end = name.find('.', begin);
  const int64_t index = std::stoll(name.substr(begin, end - begin));
  return name.substr(0, begin) + std::to_string(index + delta) + (end == std::string::npos ? "" : name.substr(end));
}

void LanguageModule::initialize_parameter(const ShardedParameter& p, at::Tensor& view) const {
  TORCH_CHECK(false, "[language_module] parameter ", p.name,
              " was created without memory, and this model does not say how to initialise it");
}

}  // namespace megatron::models::common
