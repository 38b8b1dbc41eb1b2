// The message a library check throws: tests assert on the text users will read.
#pragma once

#include <c10/util/Exception.h>

#include <string>

namespace megatron::testing {

// The c10::Error message (without backtrace) that fn throws; "" when it does not throw.
template <typename Fn>
std::string error_of(Fn&& fn) {
  try {
    fn();
  } catch (const c10::Error& e) {
    return e.what_without_backtrace();
  }
  return "";
}

}  // namespace megatron::testing
