// megatron_cpp.rank_layout: Megatron-LM's grouping of ranks for a TP x CP x DP x PP layout.
#include "bindings.h"
#include "megatron/parallel_state.h"

void init_parallel_state(py::module_& m) {
  m.def(
      "rank_layout",
      [](int world_size, int tp, int pp, int cp) {
        auto l = megatron::ParallelState::rank_layout(world_size, tp, pp, cp);
        py::dict d;
        d["tensor_model_parallel"] = l.tensor_model_parallel;
        d["pipeline_model_parallel"] = l.pipeline_model_parallel;
        d["data_parallel"] = l.data_parallel;
        d["context_parallel"] = l.context_parallel;
        d["model_parallel"] = l.model_parallel;
        d["embedding"] = l.embedding;
        d["position_embedding"] = l.position_embedding;
        return d;
      },
      py::arg("world_size"), py::arg("tensor_model_parallel_size") = 1,
      py::arg("pipeline_model_parallel_size") = 1, py::arg("context_parallel_size") = 1,
      "The rank lists of every group of each kind (Megatron-LM's order: TP, CP, DP, PP).");
}
