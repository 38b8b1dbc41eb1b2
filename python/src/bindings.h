// Shared by the binding files: pybind11 and one init_<area> function per area.
#pragma once

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

namespace py = pybind11;

void init_comm(py::module_& m);
void init_parallel_state(py::module_& m);
