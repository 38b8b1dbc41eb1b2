// The megatron_cpp._C module: version, logging, and the areas' bindings.
#include <c10/util/Exception.h>

#include "bindings.h"
#include "megatron/logging.h"
#include "megatron/version.h"

PYBIND11_MODULE(_C, m) {
  m.doc() = "megatron-cpp: Megatron-style GPT pretraining on LibTorch";
  m.attr("__version__") = MEGATRON_CPP_VERSION;
  m.attr("torch_version") = MEGATRON_CPP_TORCH_VERSION;

  // The library's checks arrive as RuntimeError with the same one-line message, as torch maps
  // c10::Error (whichever of the two modules registers its translator last).
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const c10::Error& e) {
      PyErr_SetString(PyExc_RuntimeError, e.what_without_backtrace());
    }
  });

  m.def(
      "init_logging",
      [](int rank, int world_size, const std::string& level) {
        megatron::init_logging({rank, world_size, level});
      },
      py::arg("rank") = 0, py::arg("world_size") = 1, py::arg("level") = "",
      "Installs the rank-prefixed logger (level: trace, debug, info, warn, error, off; "
      "empty: $MEGATRON_LOG_LEVEL or info).");

  init_comm(m);
  init_parallel_state(m);
}
