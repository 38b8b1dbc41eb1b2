// Megatron-LM's legacy checkpoint layout (training/checkpointing.h): where pretrain() --save puts
// each rank's files, which iteration the tracker names, and reading a checkpoint file (its CRC32
// checked) as Python values. Saving and loading a run are pretrain()'s --save / --load.
#include <torch/csrc/jit/python/pybind_utils.h>

#include "bindings.h"
#include "megatron/training/checkpoint_conversion.h"
#include "megatron/training/checkpointing.h"

namespace tr = megatron::training;

namespace {

c10::IValue read_file(const std::string& path) {
  py::gil_scoped_release release;
  return tr::read_checkpoint_file(path);
}

}  // namespace

void init_checkpointing(py::module_& m) {
  m.def("iteration_dir_name", &tr::iteration_dir_name, py::arg("iteration"),
        "'iter_0000100' for 100, 'release' for None.");
  m.def("rank_dir_name", &tr::rank_dir_name, py::arg("tp_rank"), py::arg("pp_rank"), py::arg("pp_size"),
        py::arg("ep_rank") = 0, py::arg("ep_size") = 1,
        "'mp_rank_01' without pipeline parallelism, else 'mp_rank_01_002'; with expert parallelism the "
        "expert-parallel rank follows ('mp_rank_01_003', 'mp_rank_01_002_003'): Megatron-LM's names.");
  m.def(
      "read_tracker",
      [](const std::string& dir) -> py::object {
        const auto entry = tr::read_tracker(dir);
        if (!entry) return py::none();
        if (!entry->iteration) return py::str("release");
        return py::int_(*entry->iteration);
      },
      py::arg("dir"),
      "The iteration the checkpoint folder's tracker file names ('release' for an import), or "
      "None when dir holds no checkpoint.");
  m.def("list_iterations", &tr::list_iterations, py::arg("dir"),
        "Iterations of the iter_NNNNNNN folders in dir, ascending (complete or not).");
  m.def(
      "read_checkpoint_file", [](const std::string& path) { return torch::jit::toPyObject(read_file(path)); },
      py::arg("path"),
      "One checkpoint file (e.g. .../iter_0000100/mp_rank_00/model_optim_rng.pt) as Python values "
      "(dicts, lists, numbers, CPU tensors; a pickled object such as the args' argparse.Namespace "
      "as a dict of its attributes with its '__class__'), checked against its folder's checksums; "
      "a missing, truncated or corrupt file raises naming it.");
  m.def(
      "checkpoint_arguments",
      [](const std::string& path) {
        const c10::IValue value = read_file(path);
        TORCH_CHECK(value.isGenericDict(), "[checkpointing] ", path, ": expected a dict, found a ", value.tagKind());
        const auto dict = value.toGenericDict();
        TORCH_CHECK(dict.contains("args"), "[checkpointing] ", path, ": no 'args' entry");
        return tr::arguments_from_dict(dict.at("args"));
      },
      py::arg("path"), "The Arguments a checkpoint file was saved with.");
  m.def(
      "convert_checkpoint",
      [](const std::string& load, const std::string& save, std::optional<int64_t> ckpt_step, int tp, int pp,
         std::optional<int64_t> vp_layers, const std::string& export_hf, const std::string& import_hf,
         int64_t divisible_by, bool overwrite, const std::string& vocab_file, const std::string& merge_file,
         const std::string& tokenizer_model, const std::string& hf_model_type, const std::string& ckpt_format, int ep,
         std::optional<int64_t> etp) -> py::object {
        tr::ConvertOptions o;
        o.load = load;
        o.save = save;
        o.ckpt_step = ckpt_step;
        o.target_tensor_model_parallel_size = tp;
        o.target_pipeline_model_parallel_size = pp;
        o.target_num_layers_per_virtual_pipeline_stage = vp_layers;
        o.export_hf = export_hf;
        o.import_hf = import_hf;
        o.make_vocab_size_divisible_by = divisible_by;
        o.overwrite = overwrite;
        o.vocab_file = vocab_file;
        o.merge_file = merge_file;
        o.tokenizer_model = tokenizer_model;
        o.hf_model_type = hf_model_type;
        o.ckpt_format = ckpt_format;
        o.target_expert_model_parallel_size = ep;
        o.target_expert_tensor_parallel_size = etp;
        tr::ConvertResult r;
        {
          py::gil_scoped_release release;
          r = tr::convert_checkpoint(o);
        }
        if (!r.iteration) return py::str("release");
        return py::int_(*r.iteration);
      },
      py::kw_only(), py::arg("load") = "", py::arg("save") = "", py::arg("ckpt_step") = py::none(),
      py::arg("target_tensor_model_parallel_size") = 1, py::arg("target_pipeline_model_parallel_size") = 1,
      py::arg("target_num_layers_per_virtual_pipeline_stage") = py::none(), py::arg("export_hf") = "",
      py::arg("import_hf") = "", py::arg("make_vocab_size_divisible_by") = 128, py::arg("overwrite") = false,
      py::arg("vocab_file") = "", py::arg("merge_file") = "", py::arg("tokenizer_model") = "",
      py::arg("hf_model_type") = "", py::arg("ckpt_format") = "torch", py::arg("target_expert_model_parallel_size") = 1,
      py::arg("target_expert_tensor_parallel_size") = py::none(),
      "tools/convert_checkpoint in-process: reads the checkpoint in load (either format, or the Hugging Face model "
      "in import_hf), writes it to save at the target TP/PP/virtual-PP/EP layout (ckpt_format 'torch') or as "
      "megatron-core's torch_dist files ('torch_dist', which load at any layout) and/or exports it to "
      "export_hf (config.json + model.safetensors + the tokenizer's files; vocab_file, merge_file and "
      "tokenizer_model replace the paths it was trained with; hf_model_type picks the architecture, by default the "
      "first that fits). Returns the iteration converted ('release' for "
      "an import). A save folder that already holds checkpoints is refused unless overwrite.");
}
