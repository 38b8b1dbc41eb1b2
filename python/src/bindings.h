// Shared by the binding files: pybind11 with torch's casters (torch.Tensor <-> at::Tensor sharing
// the same tensor, torch.device, torch.dtype), numpy, and one init_<area> function per area.
#pragma once

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
#include <torch/csrc/utils/pybind.h>

#include <algorithm>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace torch::nn {
class Module;
}

namespace py = pybind11;

void init_comm(py::module_& m);
void init_parallel_state(py::module_& m);
void init_transformer(py::module_& m);
void init_tensor_parallel(py::module_& m);
void init_models(py::module_& m);
void init_tokenizer(py::module_& m);
void init_datasets(py::module_& m);
void init_arguments(py::module_& m);
void init_training(py::module_& m);
void init_checkpointing(py::module_& m);

namespace megatron::python {

// C++ modules appear in Python as pybind classes deriving from torch's binding of
// torch::nn::Module (torch._C.cpp.nn.Module); megatron_cpp/_modules.py wraps them in
// torch.nn.Module subclasses.
template <typename Impl>
using ModuleClass = py::class_<Impl, torch::nn::Module, std::shared_ptr<Impl>>;

// A Python object held by C++ code that may copy or drop it without the GIL (pretrain's
// callbacks): the copies share one reference, and the last one takes the GIL to release it.
using SharedObject = std::shared_ptr<py::object>;
inline SharedObject share(py::object object) {
  return SharedObject(new py::object(std::move(object)), [](py::object* p) {
    py::gil_scoped_acquire gil;
    delete p;
  });
}

// A read-only numpy array over memory that `owner` keeps alive (no copy).
template <typename T>
py::array readonly_view(const T* data, std::vector<py::ssize_t> shape, py::handle owner) {
  py::array array(py::dtype::of<T>(), std::move(shape), data, owner);
  array.attr("flags").attr("writeable") = false;
  return array;
}

// "--flag"-style name of an attribute: num_layers -> --num-layers.
std::string flag_name(std::string key);

// A plain settings struct as a Python class: one attribute per field, and keyword construction
// that starts from the C++ defaults (so they are stated once) and refuses unknown names.
template <typename T>
class SettingsClass {
 public:
  SettingsClass(py::module_& m, const char* name, const char* doc)
      : cls_(m, name, doc), names_(std::make_shared<std::vector<std::string>>()) {}
  template <typename V>
  SettingsClass& field(const char* name, V T::*member) {
    cls_.def_readwrite(name, member);
    names_->push_back(name);
    return *this;
  }
  py::class_<T>& done() {
    auto names = names_;
    const std::string type = py::str(cls_.attr("__name__"));
    cls_.def(py::init([names, type](const py::kwargs& kwargs) {
               py::object settings = py::cast(T());
               for (const auto& [key, value] : kwargs) {
                 const auto name = py::cast<std::string>(key);
                 if (std::find(names->begin(), names->end(), name) == names->end())
                   throw py::type_error("[" + type + "] no field named '" + name + "'");
                 settings.attr(key) = value;
               }
               return py::cast<T>(settings);
             }),
             "Keywords are field names; the others keep their defaults.");
    cls_.def("__repr__", [names, type](const py::object& self) {
      std::string text = type + "(";
      for (size_t i = 0; i < names->size(); ++i)
        text += (i ? ", " : "") + (*names)[i] + "=" + py::repr(self.attr((*names)[i].c_str())).cast<std::string>();
      return text + ")";
    });
    return cls_;
  }

 private:
  py::class_<T> cls_;
  std::shared_ptr<std::vector<std::string>> names_;
};

}  // namespace megatron::python
