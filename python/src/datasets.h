// What the training bindings take from the dataset bindings.
#pragma once

#include <memory>

#include "bindings.h"
#include "megatron/datasets/data_iterator.h"
#include "megatron/datasets/megatron_dataset.h"

namespace megatron::python {

// A batch as forward_step sees it: the dict Megatron's data iterators yield.
py::object batch_to_dict(const datasets::Batch& batch);
// A library dataset as its most derived Python class (None for nullptr).
py::object dataset_object(const std::shared_ptr<const datasets::MegatronDataset>& dataset);

}  // namespace megatron::python
