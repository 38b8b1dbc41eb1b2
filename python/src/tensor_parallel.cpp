// Megatron's tensor_parallel: the TP layers (C++ modules; megatron_cpp wraps them as
// torch.nn.Module), the autograd-aware region mappings, vocab-parallel cross entropy, the RNG
// tracker, and how a parameter is sharded and initialised.
#include "bindings.h"
#include "megatron/tensor_parallel/cross_entropy.h"
#include "megatron/tensor_parallel/fp8.h"
#include "megatron/tensor_parallel/layers.h"
#include "megatron/tensor_parallel/mappings.h"
#include "megatron/tensor_parallel/random.h"
#include "megatron/tensor_parallel/sharding.h"

void init_tensor_parallel(py::module_& m) {
  namespace tp = megatron::tensor_parallel;
  using megatron::python::ModuleClass;
  using tp::GroupPtr;

  py::class_<tp::ShardLayout>(m, "ShardLayout",
                              "How a parameter's full (TP = 1) tensor maps onto this rank's shard: "
                              "partition_dim < 0 means replicated.")
      .def_readonly("partition_dim", &tp::ShardLayout::partition_dim)
      .def_readonly("num_chunks", &tp::ShardLayout::num_chunks)
      .def_readonly("rank", &tp::ShardLayout::rank)
      .def_readonly("size", &tp::ShardLayout::size)
      .def("is_sharded", &tp::ShardLayout::is_sharded)
      .def("shard", &tp::ShardLayout::shard, py::arg("full"), "This rank's shard of a full tensor (a copy).")
      .def("unshard", &tp::ShardLayout::unshard, py::arg("shards"), "The full tensor from every rank's shard.")
      .def(
          "full_shape", [](const tp::ShardLayout& l, std::vector<int64_t> shape) { return l.full_shape(shape); },
          py::arg("shard_shape"));
  py::class_<tp::ParamInit> init(m, "ParamInit", "Megatron's initialiser of a parameter and its sharding.");
  py::enum_<tp::ParamInit::Kind>(init, "Kind")
      .value("NORMAL", tp::ParamInit::kNormal)
      .value("ZEROS", tp::ParamInit::kZeros)
      .value("ONES", tp::ParamInit::kOnes);
  init.def_readonly("kind", &tp::ParamInit::kind)
      .def_readonly("std", &tp::ParamInit::std)
      .def_readonly("layout", &tp::ParamInit::layout);

  ModuleClass<tp::ColumnParallelLinearImpl>(
      m, "ColumnParallelLinear", "Y = XA + b with A split by columns across the TP group: weight [out/tp, in].")
      .def(py::init([](int64_t input_size, int64_t output_size, bool bias, bool gather_output, bool sequence_parallel,
                       bool skip_weight_param_allocation, int64_t num_chunks, double init_method_std,
                       bool perform_initialization, GroupPtr tp_group) {
             tp::ColumnParallelLinearOptions o(input_size, output_size);
             o.bias(bias)
                 .gather_output(gather_output)
                 .sequence_parallel(sequence_parallel)
                 .skip_weight_param_allocation(skip_weight_param_allocation)
                 .num_chunks(num_chunks)
                 .init_method_std(init_method_std)
                 .perform_initialization(perform_initialization)
                 .tp_group(std::move(tp_group));
             return std::make_shared<tp::ColumnParallelLinearImpl>(o);
           }),
           py::arg("input_size"), py::arg("output_size"), py::kw_only(), py::arg("bias") = true,
           py::arg("gather_output") = false, py::arg("sequence_parallel") = false,
           py::arg("skip_weight_param_allocation") = false, py::arg("num_chunks") = 1,
           py::arg("init_method_std") = 0.02, py::arg("perform_initialization") = true,
           py::arg("tp_group") = py::none())
      .def(
          "forward",
          [](tp::ColumnParallelLinearImpl& self, const at::Tensor& input, std::optional<at::Tensor> weight) {
            return self.forward(input, weight.value_or(at::Tensor()));
          },
          py::arg("input"), py::arg("weight") = py::none(),
          "input [*, in] (or [s/tp, b, in] with sequence_parallel) -> [*, out/tp], or [*, out] "
          "with gather_output; weight: the tied weight when skip_weight_param_allocation.")
      .def_property_readonly("output_size_per_partition",
                             [](const tp::ColumnParallelLinearImpl& s) { return s.output_size_per_partition; })
      .def("param_inits", &tp::ColumnParallelLinearImpl::param_inits);

  ModuleClass<tp::RowParallelLinearImpl>(
      m, "RowParallelLinear",
      "Y = XA + b with A split by rows across the TP group: weight [out, in/tp]; the partial "
      "products are all-reduced (reduce-scattered along s with sequence_parallel).")
      .def(py::init([](int64_t input_size, int64_t output_size, bool bias, bool input_is_parallel,
                       bool sequence_parallel, double init_method_std, bool perform_initialization, GroupPtr tp_group) {
             tp::RowParallelLinearOptions o(input_size, output_size);
             o.bias(bias)
                 .input_is_parallel(input_is_parallel)
                 .sequence_parallel(sequence_parallel)
                 .init_method_std(init_method_std)
                 .perform_initialization(perform_initialization)
                 .tp_group(std::move(tp_group));
             return std::make_shared<tp::RowParallelLinearImpl>(o);
           }),
           py::arg("input_size"), py::arg("output_size"), py::kw_only(), py::arg("bias") = true,
           py::arg("input_is_parallel") = false, py::arg("sequence_parallel") = false,
           py::arg("init_method_std") = 0.02, py::arg("perform_initialization") = true,
           py::arg("tp_group") = py::none())
      .def("forward", &tp::RowParallelLinearImpl::forward, py::arg("input"),
           "input [*, in/tp] (or [*, in] unless input_is_parallel) -> [*, out].")
      .def_property_readonly("input_size_per_partition",
                             [](const tp::RowParallelLinearImpl& s) { return s.input_size_per_partition; })
      .def("param_inits", &tp::RowParallelLinearImpl::param_inits);

  ModuleClass<tp::VocabParallelEmbeddingImpl>(
      m, "VocabParallelEmbedding",
      "Embedding table split along the vocabulary: rank r holds rows [r V/tp, (r+1) V/tp).")
      .def(py::init([](int64_t num_embeddings, int64_t embedding_dim, bool reduce_scatter_embeddings,
                       double init_method_std, bool perform_initialization, GroupPtr tp_group) {
             tp::VocabParallelEmbeddingOptions o(num_embeddings, embedding_dim);
             o.reduce_scatter_embeddings(reduce_scatter_embeddings)
                 .init_method_std(init_method_std)
                 .perform_initialization(perform_initialization)
                 .tp_group(std::move(tp_group));
             return std::make_shared<tp::VocabParallelEmbeddingImpl>(o);
           }),
           py::arg("num_embeddings"), py::arg("embedding_dim"), py::kw_only(),
           py::arg("reduce_scatter_embeddings") = false, py::arg("init_method_std") = 0.02,
           py::arg("perform_initialization") = true, py::arg("tp_group") = py::none())
      .def("forward", &tp::VocabParallelEmbeddingImpl::forward, py::arg("input"), "ids [*] -> [*, h].")
      .def_property_readonly("vocab_start_index",
                             [](const tp::VocabParallelEmbeddingImpl& s) { return s.vocab_start_index; })
      .def_property_readonly("vocab_end_index",
                             [](const tp::VocabParallelEmbeddingImpl& s) { return s.vocab_end_index; })
      .def("param_inits", &tp::VocabParallelEmbeddingImpl::param_inits);

  m.def("copy_to_tensor_model_parallel_region", &tp::copy_to_tensor_model_parallel_region, py::arg("input"),
        py::arg("group"), "forward: identity; backward: all-reduce.");
  m.def("reduce_from_tensor_model_parallel_region", &tp::reduce_from_tensor_model_parallel_region, py::arg("input"),
        py::arg("group"), "forward: all-reduce; backward: identity.");
  m.def("scatter_to_tensor_model_parallel_region", &tp::scatter_to_tensor_model_parallel_region, py::arg("input"),
        py::arg("group"), "forward: this rank's slice of the last dim; backward: all-gather it.");
  m.def("gather_from_tensor_model_parallel_region", &tp::gather_from_tensor_model_parallel_region, py::arg("input"),
        py::arg("group"), "forward: all-gather the last dim; backward: this rank's slice.");
  m.def("scatter_to_sequence_parallel_region", &tp::scatter_to_sequence_parallel_region, py::arg("input"),
        py::arg("group"), "forward: this rank's slice of dim 0; backward: all-gather dim 0.");
  m.def("gather_from_sequence_parallel_region", &tp::gather_from_sequence_parallel_region, py::arg("input"),
        py::arg("group"), py::arg("tensor_parallel_output_grad") = true,
        "forward: all-gather dim 0; backward: reduce-scatter dim 0 (or this rank's slice).");
  m.def("reduce_scatter_to_sequence_parallel_region", &tp::reduce_scatter_to_sequence_parallel_region, py::arg("input"),
        py::arg("group"), "forward: reduce-scatter dim 0; backward: all-gather dim 0.");
  m.def("vocab_parallel_cross_entropy", &tp::vocab_parallel_cross_entropy, py::arg("vocab_parallel_logits"),
        py::arg("target"), py::arg("group") = py::none(), py::arg("label_smoothing") = 0.0,
        "Per-token loss (fp32) from logits split over the vocabulary [..., V/tp] and target ids "
        "[...] into the full vocabulary, without gathering the logits.");

  py::class_<tp::RngTracker, std::shared_ptr<tp::RngTracker>>(
      m, "RngTracker",
      "Named RNG states for dropout inside tensor-parallel regions (Megatron's CudaRNGStatesTracker, "
      "for any device).")
      .def(py::init<c10::Device>(), py::arg("device") = c10::Device(c10::kCPU))
      .def("add", &tp::RngTracker::add, py::arg("name"), py::arg("seed"))
      .def("has", &tp::RngTracker::has, py::arg("name"))
      .def("reset", &tp::RngTracker::reset)
      .def(
          "fork",
          [](tp::RngTracker& t, const py::function& fn, const std::string& name) { t.fork([&] { fn(); }, name); },
          py::arg("fn"), py::arg("name") = tp::kModelParallelRngTrackerName,
          "Calls fn() with the device's default generator set to state `name`, then stores the "
          "advanced state back and restores the generator.")
      .def("get_states", &tp::RngTracker::get_states)
      .def("set_states", &tp::RngTracker::set_states, py::arg("states"))
      .def_property_readonly("device", &tp::RngTracker::device);
  py::class_<tp::Fp8Config, std::shared_ptr<tp::Fp8Config>>(
      m, "Fp8Config", "FP8 GEMM settings, Megatron-LM's --fp8-* flags (e4m3 | hybrid; delayed | tensorwise).")
      .def(py::init(&tp::Fp8Config::from_flags), py::arg("format") = "hybrid", py::arg("recipe") = "delayed",
           py::arg("margin") = 0, py::arg("amax_history_len") = 1, py::arg("amax_compute_algo") = "most_recent",
           py::arg("wgrad") = true)
      .def_readonly("margin", &tp::Fp8Config::margin)
      .def_readonly("amax_history_len", &tp::Fp8Config::amax_history_len)
      .def_readonly("wgrad", &tp::Fp8Config::wgrad);
  py::class_<tp::Fp8Meta, std::shared_ptr<tp::Fp8Meta>>(
      m, "Fp8Meta",
      "One linear layer's delayed-scaling state: amax_history [len, 3] and scale [3] for its input, "
      "weight and output gradient.")
      .def(py::init<const tp::Fp8Config&>(), py::arg("config"))
      .def_readwrite("amax_history", &tp::Fp8Meta::amax_history)
      .def_readwrite("scale", &tp::Fp8Meta::scale)
      .def("update_scales", &tp::Fp8Meta::update_scales,
           "The delayed recipe's step: scales from the history, then the history rolls.");
  m.def("fp8_linear", &tp::fp8_linear, py::arg("input"), py::arg("weight"), py::arg("bias"), py::arg("meta"),
        "Y = X W^T + b with the GEMMs in FP8 (at::_scaled_mm); autograd-aware.");
  m.def("fp8_quantize", &tp::fp8_quantize, py::arg("x"), py::arg("scale"), py::arg("dtype"),
        "x * scale in fp32, saturated to the float8 dtype's range, cast to it.");
  m.def("fp8_current_scale", &tp::fp8_current_scale, py::arg("amax"), py::arg("dtype"),
        "The tensorwise recipe's scale: fp8_max / amax (1 for an amax of 0 or not finite).");
  m.def("model_parallel_manual_seed", &tp::model_parallel_manual_seed, py::arg("seed"), py::arg("tp_rank"),
        py::arg("device") = c10::Device(c10::kCPU),
        "Megatron's model_parallel_cuda_manual_seed for any device: seeds the default generator "
        "with seed and returns a tracker whose 'model-parallel-rng' state is seeded with "
        "seed + 2718 + tp_rank.");
}
