// ParallelState (Megatron's parallel_state: groups and ranks of the TP x CP x DP x PP grid) and
// rank_layout, the pure rank arithmetic behind it.
#include "megatron/parallel_state.h"
#include "bindings.h"

void init_parallel_state(py::module_& m) {
  using megatron::ParallelState;
  using megatron::comm::ProcessGroup;
  using Self = std::shared_ptr<ParallelState>;
  using GroupPtr = std::shared_ptr<ProcessGroup>;

  m.def(
      "rank_layout",
      [](int world_size, int tp, int pp, int cp, int ep, std::optional<int> etp, bool tp_pp_dp_mapping) {
        auto l = ParallelState::rank_layout(world_size, tp, pp, cp, ep, etp, tp_pp_dp_mapping);
        py::dict d;
        d["tensor_model_parallel"] = l.tensor_model_parallel;
        d["pipeline_model_parallel"] = l.pipeline_model_parallel;
        d["data_parallel"] = l.data_parallel;
        d["context_parallel"] = l.context_parallel;
        d["model_parallel"] = l.model_parallel;
        d["embedding"] = l.embedding;
        d["position_embedding"] = l.position_embedding;
        d["expert_model_parallel"] = l.expert_model_parallel;
        d["expert_tensor_parallel"] = l.expert_tensor_parallel;
        d["expert_tensor_and_model_parallel"] = l.expert_tensor_and_model_parallel;
        d["expert_data_parallel"] = l.expert_data_parallel;
        return d;
      },
      py::arg("world_size"), py::arg("tensor_model_parallel_size") = 1, py::arg("pipeline_model_parallel_size") = 1,
      py::arg("context_parallel_size") = 1, py::arg("expert_model_parallel_size") = 1,
      py::arg("expert_tensor_parallel_size") = py::none(), py::arg("use_tp_pp_dp_mapping") = false,
      "The rank lists of every group of each kind (Megatron-LM's order: TP, CP, DP, PP; experts ETP, EP, "
      "expert DP, PP; PP before DP with use_tp_pp_dp_mapping).");

  // Groups that ParallelState hands out by reference share its ownership here, so that a group
  // outlives neither the state nor is freed under Python.
  auto alias = [](const Self& self, ProcessGroup& g) { return GroupPtr(self, &g); };
  py::class_<ParallelState, Self>(
      m, "ParallelState",
      "This rank's place in the TP x CP x DP x PP grid and its process groups, in Megatron-LM's "
      "rank order (Megatron's parallel_state, as an object instead of module globals).")
      .def_static(
          "initialize_model_parallel",
          [](GroupPtr world, int tp, int pp, std::optional<int> vpp, int cp, int ep, std::optional<int> etp,
             bool tp_pp_dp_mapping, const std::vector<int>& hierarchical_cp) {
            py::gil_scoped_release release;
            return std::make_shared<ParallelState>(ParallelState::initialize_model_parallel(
                std::move(world), tp, pp, vpp, cp, ep, etp, tp_pp_dp_mapping, hierarchical_cp));
          },
          py::arg("world"), py::arg("tensor_model_parallel_size") = 1, py::arg("pipeline_model_parallel_size") = 1,
          py::arg("virtual_pipeline_model_parallel_size") = py::none(), py::arg("context_parallel_size") = 1,
          py::arg("expert_model_parallel_size") = 1, py::arg("expert_tensor_parallel_size") = py::none(),
          py::arg("use_tp_pp_dp_mapping") = false, py::arg("hierarchical_context_parallel_sizes") = std::vector<int>{},
          "Splits the world group into groups; collective over world, same arguments on every rank.")
      .def("get_world_group", [alias](const Self& s) { return alias(s, s->get_world_group()); })
      .def("get_tensor_model_parallel_group", [](const Self& s) { return s->tensor_model_parallel_group_ptr(); })
      .def("get_hierarchical_context_parallel_groups",
           [](const Self& s) { return s->get_hierarchical_context_parallel_groups(); })
      .def("get_pipeline_model_parallel_group",
           [alias](const Self& s) { return alias(s, s->get_pipeline_model_parallel_group()); })
      .def(
          "get_data_parallel_group",
          [](const Self& s, bool with_context_parallel) { return s->data_parallel_group_ptr(with_context_parallel); },
          py::arg("with_context_parallel") = false,
          "with_context_parallel: the ranks holding the same parameters (gradients reduce over them).")
      .def("get_context_parallel_group", [alias](const Self& s) { return alias(s, s->get_context_parallel_group()); })
      .def("get_model_parallel_group", [](const Self& s) { return s->model_parallel_group_ptr(); })
      .def("get_embedding_group", &ParallelState::get_embedding_group,
           "None on ranks outside the first and last pipeline stage.")
      .def("get_position_embedding_group", &ParallelState::get_position_embedding_group,
           "None on ranks outside the first pipeline stage.")
      .def("get_world_size", &ParallelState::get_world_size)
      .def("get_rank", &ParallelState::get_rank)
      .def("get_tensor_model_parallel_world_size", &ParallelState::get_tensor_model_parallel_world_size)
      .def("get_tensor_model_parallel_rank", &ParallelState::get_tensor_model_parallel_rank)
      .def("get_pipeline_model_parallel_world_size", &ParallelState::get_pipeline_model_parallel_world_size)
      .def("get_pipeline_model_parallel_rank", &ParallelState::get_pipeline_model_parallel_rank)
      .def("get_data_parallel_world_size", &ParallelState::get_data_parallel_world_size,
           py::arg("with_context_parallel") = false)
      .def("get_data_parallel_rank", &ParallelState::get_data_parallel_rank, py::arg("with_context_parallel") = false)
      .def("get_context_parallel_world_size", &ParallelState::get_context_parallel_world_size)
      .def("get_context_parallel_rank", &ParallelState::get_context_parallel_rank)
      .def("get_expert_model_parallel_group",
           [alias](const Self& s) { return alias(s, s->get_expert_model_parallel_group()); })
      .def("get_expert_tensor_parallel_group",
           [alias](const Self& s) { return alias(s, s->get_expert_tensor_parallel_group()); })
      .def("get_expert_tensor_and_model_parallel_group",
           [alias](const Self& s) { return alias(s, s->get_expert_tensor_and_model_parallel_group()); })
      .def("get_expert_data_parallel_group", [](const Self& s) { return s->expert_data_parallel_group_ptr(); })
      .def("get_expert_model_parallel_world_size", &ParallelState::get_expert_model_parallel_world_size)
      .def("get_expert_model_parallel_rank", &ParallelState::get_expert_model_parallel_rank)
      .def("get_expert_tensor_parallel_world_size", &ParallelState::get_expert_tensor_parallel_world_size)
      .def("get_expert_tensor_parallel_rank", &ParallelState::get_expert_tensor_parallel_rank)
      .def("get_expert_data_parallel_world_size", &ParallelState::get_expert_data_parallel_world_size)
      .def("get_expert_data_parallel_rank", &ParallelState::get_expert_data_parallel_rank)
      .def("get_virtual_pipeline_model_parallel_world_size",
           &ParallelState::get_virtual_pipeline_model_parallel_world_size)
      .def("get_tensor_model_parallel_src_rank", &ParallelState::get_tensor_model_parallel_src_rank)
      .def("get_data_parallel_src_rank", &ParallelState::get_data_parallel_src_rank)
      .def("get_pipeline_model_parallel_first_rank", &ParallelState::get_pipeline_model_parallel_first_rank)
      .def("get_pipeline_model_parallel_last_rank", &ParallelState::get_pipeline_model_parallel_last_rank)
      .def("get_pipeline_model_parallel_next_rank", &ParallelState::get_pipeline_model_parallel_next_rank)
      .def("get_pipeline_model_parallel_prev_rank", &ParallelState::get_pipeline_model_parallel_prev_rank)
      .def("is_pipeline_first_stage", &ParallelState::is_pipeline_first_stage, py::arg("virtual_rank") = py::none())
      .def("is_pipeline_last_stage", &ParallelState::is_pipeline_last_stage, py::arg("virtual_rank") = py::none())
      .def("is_rank_in_embedding_group", &ParallelState::is_rank_in_embedding_group)
      .def("is_rank_in_position_embedding_group", &ParallelState::is_rank_in_position_embedding_group)
      .def("__repr__", [](const ParallelState& s) {
        return "ParallelState(rank=" + std::to_string(s.get_rank()) +
               ", tp=" + std::to_string(s.get_tensor_model_parallel_rank()) + "/" +
               std::to_string(s.get_tensor_model_parallel_world_size()) +
               ", pp=" + std::to_string(s.get_pipeline_model_parallel_rank()) + "/" +
               std::to_string(s.get_pipeline_model_parallel_world_size()) +
               ", dp=" + std::to_string(s.get_data_parallel_rank()) + "/" +
               std::to_string(s.get_data_parallel_world_size()) + ")";
      });
}
