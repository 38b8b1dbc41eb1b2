// Precompiled header for the library's own sources (never included by hand): the LibTorch
// headers nearly every source file needs, parsed once per build instead of once per file.
#pragma once

#include <ATen/ATen.h>
#include <c10/util/Exception.h>
#include <torch/csrc/autograd/custom_function.h>
#include <torch/nn/cloneable.h>
#include <torch/nn/module.h>

#include <algorithm>
#include <map>
#include <memory>
#include <string>
#include <vector>
