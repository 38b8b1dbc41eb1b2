// pretrain() with callbacks written in Python or the library's GPT ones (gpt_callbacks.h), and
// what the callbacks see: TrainingContext, Datasets, BatchIterator batches. The GIL is released
// for the whole run and taken back inside each Python callback; an exception raised in a
// callback unwinds pretrain() and reaches the caller as the same Python exception.
#include <Python.h>
#include <c10/util/Exception.h>
#include <torch/csrc/autograd/python_variable.h>
#include <torch/nn/module.h>

#include "bindings.h"
#include "datasets.h"
#include "megatron/comm/process_group.h"
#include "megatron/readback.h"
#include "megatron/tensor_parallel/random.h"
#include "megatron/training/config.h"
#include "megatron/training/gpt_callbacks.h"
#include "megatron/training/training.h"

namespace {

namespace tr = megatron::training;
namespace ds = megatron::datasets;
using megatron::python::share;
using megatron::python::SharedObject;
using Models = std::shared_ptr<std::vector<std::shared_ptr<torch::nn::Module>>>;

std::string type_name(const py::handle& h) {
  return py::str(py::type::of(h).attr("__qualname__")).cast<std::string>();
}

std::shared_ptr<const ds::MegatronDataset> dataset_from(const py::handle& h, const char* split) {
  if (h.is_none()) return nullptr;
  try {
    return h.cast<std::shared_ptr<ds::MegatronDataset>>();
  } catch (const py::cast_error&) {
    throw py::type_error(std::string("[pretrain] Datasets.") + split +
                         ": expected a megatron_cpp dataset (GPTDataset, BlendedDataset, ...) or None, found " +
                         type_name(h));
  }
}

// The Python object forward_step gets for `model`: owning (shared with pretrain) when the model
// came from model_builder, so that a module kept by Python stays valid.
py::object model_object(torch::nn::Module& model, const Models& models) {
  for (const auto& m : *models)
    if (m.get() == &model) return py::cast(m);
  return py::cast(&model, py::return_value_policy::reference);
}

// loss_func(output) -> (loss, {name: tensor or number}), or Megatron-LM's (loss summed over
// num_tokens, num_tokens, {name: tensor, number or [sum, count]}).
tr::LossResult loss_result(const py::object& result) {
  const bool megatron_form = py::isinstance<py::tuple>(result) && py::len(result) == 3;
  if (!py::isinstance<py::tuple>(result) || (py::len(result) != 2 && !megatron_form) ||
      !py::isinstance<py::dict>(result.cast<py::tuple>()[megatron_form ? 2 : 1]))
    throw py::type_error(
        "[pretrain] loss_func must return (loss tensor, {metric name: value}) or (loss summed over tokens, "
        "number of tokens, {metric name: value}), found " +
        py::repr(result).cast<std::string>().substr(0, 200));
  const auto parts = result.cast<py::tuple>();
  auto tensor = [&](const py::handle& v, const char* what) {
    if (THPVariable_Check(v.ptr())) return v.cast<at::Tensor>();
    if (py::isinstance<py::int_>(v) || py::isinstance<py::float_>(v))
      return at::scalar_tensor(v.cast<double>(), at::kDouble);
    throw py::type_error(std::string("[pretrain] loss_func: ") + what + " must be a tensor or a number, found " +
                         type_name(v));
  };
  if (!THPVariable_Check(parts[0].ptr()))
    throw py::type_error("[pretrain] loss_func: the loss must be a torch.Tensor, found " + type_name(parts[0]));
  at::Tensor loss = parts[0].cast<at::Tensor>(), num_tokens;
  // Checked here, where the callback can be named: the schedule would fail later in autograd.
  if (!at::isFloatingType(loss.scalar_type()) || loss.numel() != 1)
    throw py::type_error("[pretrain] loss_func: the loss must be one floating-point value, found a " +
                         std::string(c10::toString(loss.scalar_type())) + " tensor of shape " + c10::str(loss.sizes()));
  if (megatron_form) {
    num_tokens = tensor(parts[1], "the number of tokens");
    if (num_tokens.numel() != 1)
      throw py::type_error("[pretrain] loss_func: the number of tokens must be one value, found shape " +
                           c10::str(num_tokens.sizes()));
    loss = loss / num_tokens.to(loss.device(), loss.scalar_type());
  }
  std::map<std::string, at::Tensor> metrics;
  for (const auto& [key, value] : parts[megatron_form ? 2 : 1].cast<py::dict>()) {
    const auto name = py::str(key).cast<std::string>();
    at::Tensor v = tensor(value, ("metric '" + name + "'").c_str());
    if (v.numel() != 1 && v.numel() != 2)
      throw py::type_error("[pretrain] loss_func: metric '" + name +
                           "' must be one value or Megatron-LM's [sum, count], found shape " + c10::str(v.sizes()));
    metrics[name] = v.numel() == 2 ? v.reshape({2})[0] / v.reshape({2})[1] : v;  // Megatron-LM's [sum, count]
  }
  return {loss, std::move(metrics), num_tokens};
}

tr::ModelBuilder python_model_builder(SharedObject fn) {
  return [fn](const tr::TrainingContext& ctx, bool pre_process, bool post_process) {
    py::gil_scoped_acquire gil;
    py::object model = (*fn)(py::cast(ctx, py::return_value_policy::reference), pre_process, post_process);
    try {
      return model.cast<std::shared_ptr<torch::nn::Module>>();
    } catch (const py::cast_error&) {
      throw py::type_error(
          "[pretrain] model_builder must return a megatron_cpp module (e.g. megatron_cpp.GPTModel), found " +
          type_name(model));
    }
  };
}

tr::DatasetBuilder python_dataset_builder(SharedObject fn) {
  return [fn](const tr::TrainingContext& ctx, const std::array<int64_t, 3>& num_samples) {
    py::gil_scoped_acquire gil;
    py::object result = (*fn)(py::cast(ctx, py::return_value_policy::reference),
                              std::vector<int64_t>(num_samples.begin(), num_samples.end()));
    try {
      return result.cast<tr::Datasets>();
    } catch (const py::cast_error&) {
      throw py::type_error(
          "[pretrain] dataset_builder must return megatron_cpp.Datasets or (train, valid, test), found " +
          type_name(result));
    }
  };
}

tr::ForwardStepFunc python_forward_step(SharedObject fn, Models models) {
  return [fn, models](ds::BatchIterator& data_iterator,
                      torch::nn::Module& model) -> std::pair<at::Tensor, tr::LossFunc> {
    py::gil_scoped_acquire gil;
    py::object result =
        (*fn)(py::cast(&data_iterator, py::return_value_policy::reference), model_object(model, models));
    if (!py::isinstance<py::tuple>(result) || py::len(result) != 2 ||
        !THPVariable_Check(result.cast<py::tuple>()[0].ptr()) || !PyCallable_Check(result.cast<py::tuple>()[1].ptr()))
      throw py::type_error("[pretrain] forward_step must return (output tensor, loss_func callable), found " +
                           py::repr(result).cast<std::string>().substr(0, 200));
    const auto pair = result.cast<py::tuple>();
    SharedObject loss_func = share(pair[1]);
    tr::LossFunc wrapped = [loss_func](const at::Tensor& output) {
      py::gil_scoped_acquire gil;
      return loss_result((*loss_func)(output));
    };
    return {pair[0].cast<at::Tensor>(), std::move(wrapped)};
  };
}

}  // namespace

void init_training(py::module_& m) {
  py::class_<tr::TrainingContext>(m, "TrainingContext",
                                  "What pretrain() hands to model_builder and dataset_builder (valid during the call).")
      .def_property_readonly(
          "args", [](const tr::TrainingContext& c) -> const tr::Arguments& { return c.args; },
          py::return_value_policy::reference_internal)
      .def_property_readonly(
          "parallel_state",
          [](const tr::TrainingContext& c) { return std::make_shared<megatron::ParallelState>(c.parallel_state); })
      .def_property_readonly(
          "rng_tracker", [](const tr::TrainingContext& c) { return c.rng_tracker; },
          "RNG states for dropout inside tensor-parallel regions.")
      .def_property_readonly("device", [](const tr::TrainingContext& c) { return c.device; })
      .def_property_readonly(
          "virtual_pipeline_model_parallel_rank",
          [](const tr::TrainingContext& c) { return c.virtual_pipeline_model_parallel_rank; },
          "Which model chunk of this stage model_builder builds (interleaved schedule), else None.");

  py::class_<tr::Datasets>(m, "Datasets",
                           "What dataset_builder returns: train (required), valid, test, and the EOD id.")
      .def(py::init([](const py::object& train, const py::object& valid, const py::object& test, int64_t eod_token) {
             return tr::Datasets{dataset_from(train, "train"), dataset_from(valid, "valid"), dataset_from(test, "test"),
                                 eod_token};
           }),
           py::arg("train"), py::arg("valid") = py::none(), py::arg("test") = py::none(), py::arg("eod_token") = -1,
           "eod_token is needed by --reset-position-ids, --reset-attention-mask and --eod-mask-loss.")
      .def_property_readonly("train", [](const tr::Datasets& d) { return megatron::python::dataset_object(d.train); })
      .def_property_readonly("valid", [](const tr::Datasets& d) { return megatron::python::dataset_object(d.valid); })
      .def_property_readonly("test", [](const tr::Datasets& d) { return megatron::python::dataset_object(d.test); })
      .def_readonly("eod_token", &tr::Datasets::eod_token);

  py::class_<tr::IterationRecord>(m, "IterationRecord", "One training iteration.")
      .def_readonly("iteration", &tr::IterationRecord::iteration)
      .def_readonly("metrics", &tr::IterationRecord::metrics,
                    "loss_func's metrics averaged over micro-batches and DP ranks.")
      .def_readonly("learning_rate", &tr::IterationRecord::learning_rate)
      .def_readonly("global_batch_size", &tr::IterationRecord::global_batch_size)
      .def_readonly("grad_norm", &tr::IterationRecord::grad_norm)
      .def_readonly("loss_scale", &tr::IterationRecord::loss_scale)
      .def_readonly("skipped", &tr::IterationRecord::skipped)
      .def_readonly("elapsed_ms", &tr::IterationRecord::elapsed_ms)
      .def_readonly("params_norm", &tr::IterationRecord::params_norm, "--log-params-norm, else None")
      .def_readonly("num_zeros", &tr::IterationRecord::num_zeros, "--log-num-zeros-in-grad, else None")
      .def("__repr__", [](const tr::IterationRecord& r) {
        std::string text = "IterationRecord(iteration=" + std::to_string(r.iteration);
        for (const auto& [k, v] : r.metrics) text += ", '" + k + "': " + std::to_string(v);
        return text + ")";
      });
  py::class_<tr::EvaluationRecord>(m, "EvaluationRecord", "One evaluation on the valid or test split.")
      .def_readonly("iteration", &tr::EvaluationRecord::iteration)
      .def_readonly("split", &tr::EvaluationRecord::split)
      .def_readonly("metrics", &tr::EvaluationRecord::metrics);
  py::class_<tr::TrainingResult>(m, "TrainingResult", "What pretrain() returns.")
      .def_readonly("iterations", &tr::TrainingResult::iterations,
                    "Those this run trained (after a loaded checkpoint).")
      .def_readonly("evaluations", &tr::TrainingResult::evaluations)
      .def_readonly("consumed_train_samples", &tr::TrainingResult::consumed_train_samples)
      .def_readonly("iteration", &tr::TrainingResult::iteration, "The last iteration trained (or loaded).")
      .def_readonly("loaded_iteration", &tr::TrainingResult::loaded_iteration, "--load: the checkpoint's iteration.")
      .def_readonly("saved_iterations", &tr::TrainingResult::saved_iterations, "--save: the checkpoints written.")
      .def_readonly("exited_on_signal", &tr::TrainingResult::exited_on_signal,
                    "--exit-signal-handler saw SIGTERM and stopped after saving.")
      .def_readonly("exited_early", &tr::TrainingResult::exited_early,
                    "Stopped before --train-iters: SIGTERM, --exit-interval or --exit-duration-in-mins.");

  m.def("core_transformer_config_from_args", &tr::core_transformer_config_from_args, py::arg("ctx"),
        "The TransformerConfig the flags describe, with this rank's TP group and RNG tracker "
        "(Megatron's core_transformer_config_from_args).");
  m.def("host_readback_count", &megatron::host_readback_count,
        "Device-to-host reads made through the library's one helper since the process started (the train "
        "loop makes one per iteration).");
  m.def("num_floating_point_operations", &tr::num_floating_point_operations, py::arg("args"), py::arg("batch_size"),
        py::arg("padded_vocab_size"), "Megatron-LM's model FLOPs of one iteration (forward + backward).");
  m.def(
      "build_tokenizer",
      [](const tr::Arguments& args) {
        return std::shared_ptr<megatron::tokenizer::Tokenizer>(tr::build_tokenizer(args));
      },
      py::arg("args"),
      "The tokenizer the flags name (--tokenizer-type, NullTokenizer when empty; --vocab-file, "
      "--merge-file, --tokenizer-model, --vocab-size).");
  m.def("get_batch_on_this_cp_rank", &tr::get_batch_on_this_cp_rank, py::arg("batch"), py::arg("cp_size"),
        py::arg("cp_rank"),
        "Each tensor of the batch cut along the sequence (the attention mask along its query rows) to context-parallel "
        "rank cp_rank's chunks cp_rank and 2 x cp_size - 1 - cp_rank of 2 x cp_size.");
  m.def(
      "gpt_loss_func",
      [](const at::Tensor& loss_mask, const at::Tensor& output_tensor) {
        const auto [sum, num_tokens] = tr::gpt_loss_sum(loss_mask, output_tensor);
        const at::Tensor count = num_tokens.detach().to(at::kFloat);
        return py::make_tuple(sum, count, py::dict(py::arg("lm loss") = at::stack({sum.detach(), count})));
      },
      py::arg("loss_mask"), py::arg("output_tensor"),
      "pretrain_gpt's loss_func in C++, in Megatron-LM's form: (the per-token losses summed where "
      "loss_mask is 1, the number of those tokens, {'lm loss': [sum, count]}).");

  m.def(
      "_pretrain",
      [](const tr::Arguments& args, const py::object& model_builder, const py::object& dataset_builder,
         const py::object& forward_step, std::shared_ptr<megatron::comm::ProcessGroup> world) {
        // The library's GPT callbacks stand in for any that Python does not give.
        tr::GPTCallbacks gpt;
        if (model_builder.is_none() || dataset_builder.is_none()) gpt = tr::gpt_callbacks(tr::build_tokenizer(args));
        auto models = std::make_shared<std::vector<std::shared_ptr<torch::nn::Module>>>();
        tr::ModelBuilder inner_builder =
            model_builder.is_none() ? gpt.model_builder : python_model_builder(share(model_builder));
        tr::ModelBuilder builder = [inner_builder, models](const tr::TrainingContext& ctx, bool pre, bool post) {
          auto model = inner_builder(ctx, pre, post);
          models->push_back(model);
          return model;
        };
        tr::DatasetBuilder datasets =
            dataset_builder.is_none() ? gpt.dataset_builder : python_dataset_builder(share(dataset_builder));
        tr::ForwardStepFunc step;
        if (forward_step.is_none()) {
          // Ctrl-C still stops a run whose callbacks are all C++: check for signals per micro-batch.
          step = [](ds::BatchIterator& it, torch::nn::Module& model) {
            {
              py::gil_scoped_acquire gil;
              if (PyErr_CheckSignals() != 0) throw py::error_already_set();
            }
            return tr::gpt_forward_step(it, model);
          };
        } else {
          step = python_forward_step(share(forward_step), models);
        }
        py::gil_scoped_release release;
        return tr::pretrain(args, builder, datasets, step, std::move(world));
      },
      py::arg("args"), py::arg("model_builder"), py::arg("dataset_builder"), py::arg("forward_step"),
      py::arg("world") = py::none());
}
