// The error of a collective that could not complete: it outlived --distributed-timeout-minutes,
// or a peer's connection closed under it (the peer died). Programs end on it with
// program::kCollectiveFailed, so that a restart loop can tell it from other failures.
#pragma once

#include <c10/util/Exception.h>

#include <string>

#include "megatron/export.h"

namespace megatron::comm {

class MEGATRON_API CollectiveError : public c10::Error {
 public:
  explicit CollectiveError(std::string message) : c10::Error(std::move(message)) {}
};

}  // namespace megatron::comm
