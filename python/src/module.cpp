// The megatron_cpp._C module: version, logging, the library's errors as Python exceptions, and
// the areas' bindings (one init_<area> per file).
#include <c10/util/Exception.h>

#include "bindings.h"
#include "megatron/cpu_math.h"
#include "megatron/logging.h"
#include "megatron/memory.h"
#include "megatron/version.h"

PYBIND11_MODULE(_C, m) {
  m.doc() = "megatron-cpp: Megatron-style GPT pretraining on LibTorch";
  m.attr("__version__") = MEGATRON_CPP_VERSION;
  m.attr("torch_version") = MEGATRON_CPP_TORCH_VERSION;

  // The library's checks arrive with the same one-line message (no C++ backtrace), as the
  // Python exception torch would raise for them. Registered after torch's, so tried first.
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const c10::IndexError& e) {
      PyErr_SetString(PyExc_IndexError, e.what_without_backtrace());
    } catch (const c10::ValueError& e) {
      PyErr_SetString(PyExc_ValueError, e.what_without_backtrace());
    } catch (const c10::TypeError& e) {
      PyErr_SetString(PyExc_TypeError, e.what_without_backtrace());
    } catch (const c10::NotImplementedError& e) {
      PyErr_SetString(PyExc_NotImplementedError, e.what_without_backtrace());
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

  m.def("enable_cpu_allocator_cache", &megatron::enable_cpu_allocator_cache, py::arg("max_cached_bytes") = -1,
        "Keeps freed CPU blocks of 16 KiB or more for the next allocation of the same size "
        "(what pretrain() installs). max_cached_bytes < 0 keeps the current limit (8 GiB).");
  m.def("empty_cpu_allocator_cache", &megatron::empty_cpu_allocator_cache, "Returns every cached CPU block to the OS.");
  m.def(
      "cpu_allocator_cache_stats",
      [] {
        const auto s = megatron::cpu_allocator_cache_stats();
        py::dict d;
        d["enabled"] = megatron::cpu_allocator_cache_enabled();
        d["cached_bytes"] = s.cached_bytes;
        d["allocated_bytes"] = s.allocated_bytes;
        d["hits"] = s.hits;
        d["misses"] = s.misses;
        return d;
      },
      "{enabled, cached_bytes, allocated_bytes, hits, misses} of the CPU allocator cache.");

  m.def("warm_up_cpu_math", &megatron::warm_up_cpu_math,
        "Calls each CPU math function LibTorch sends to MKL's vector math library once on one "
        "element, so that its first multi-threaded call cannot race MKL's kernel choice and get "
        "a low-accuracy kernel (pytorch/pytorch#188792). Done on import.");
  // Before any torch op of the caller's runs on several threads.
  megatron::warm_up_cpu_math();

  init_comm(m);
  init_parallel_state(m);
  init_tensor_parallel(m);
  init_transformer(m);
  init_models(m);
  init_tokenizer(m);
  init_datasets(m);
  init_arguments(m);
  init_training(m);
  init_checkpointing(m);
}
