// Megatron's datasets: the .bin/.idx IndexedDataset (tokens as numpy views of the mapped file)
// and its builder (tokens from numpy arrays, torch tensors or lists), GPTDataset and blends,
// the pretraining samplers, and the batches forward_step reads. Long work releases the GIL.
#include <c10/util/Exception.h>
#include <torch/csrc/autograd/python_variable.h>

#include <sstream>

#include "bindings.h"
#include "datasets.h"
#include "megatron/comm/process_group.h"
#include "megatron/datasets/blended_dataset.h"
#include "megatron/datasets/data_iterator.h"
#include "megatron/datasets/gpt_dataset.h"
#include "megatron/datasets/indexed_dataset.h"
#include "megatron/datasets/samplers.h"

namespace ds = megatron::datasets;
using Release = py::call_guard<py::gil_scoped_release>;

namespace megatron::python {

py::object batch_to_dict(const ds::Batch& batch) {
  py::dict d;
  for (const auto& [name, t] : batch) d[py::str(name)] = t.defined() ? py::cast(t) : py::none();
  return std::move(d);
}

}  // namespace megatron::python

namespace {

const char* numpy_name(ds::DType d) {
  switch (d) {
    case ds::DType::kUInt8: return "uint8";
    case ds::DType::kInt8: return "int8";
    case ds::DType::kInt16: return "int16";
    case ds::DType::kInt32: return "int32";
    case ds::DType::kInt64: return "int64";
    case ds::DType::kFloat64: return "float64";
    case ds::DType::kFloat32: return "float32";
    case ds::DType::kUInt16: return "uint16";
  }
  return "?";
}

// DType, a numpy dtype or anything np.dtype() takes ("uint16", np.int32, ...).
ds::DType dtype_from(const py::handle& value) {
  if (py::isinstance<ds::DType>(value)) return value.cast<ds::DType>();
  const auto name = py::str(py::dtype::from_args(py::reinterpret_borrow<py::object>(value))).cast<std::string>();
  for (uint8_t code = 1; code <= 8; ++code) {
    if (name == numpy_name(static_cast<ds::DType>(code))) return static_cast<ds::DType>(code);
  }
  TORCH_CHECK_TYPE(false,
                   "[indexed_dataset] dtype: expected one of uint8, int8, int16, int32, int64, float32, "
                   "float64, uint16, found ",
                   name);
}

// The view of a TokenSpan as a read-only numpy array that keeps `owner` (the dataset) alive.
py::array span_view(const ds::TokenSpan& span, py::handle owner) {
  py::array a(py::dtype(numpy_name(span.dtype)), std::vector<py::ssize_t>{span.size}, span.data, owner);
  a.attr("flags").attr("writeable") = false;
  return a;
}

// Tokens of a sequence: a view of the mapping, or (opened with mmap=False) a copy read from the .bin.
py::array sequence_array(const ds::IndexedDataset& d, py::handle owner, int64_t idx, int64_t offset, int64_t length) {
  if (d.mmap_bin_files()) return span_view(d.get(idx, offset, length), owner);
  length = d.read_raw(idx, offset, length, nullptr);
  py::array a(py::dtype(numpy_name(d.dtype())), std::vector<py::ssize_t>{length});
  d.read_raw(idx, offset, length, a.mutable_data());
  return a;
}

int64_t wrap_index(int64_t i, int64_t n, const char* what) {
  const int64_t j = i < 0 ? i + n : i;
  TORCH_CHECK_INDEX(j >= 0 && j < n, "[indexed_dataset] ", what, " ", i, " out of range for ", n);
  return j;
}

// Calls f(const int32_t*, n) or f(const int64_t*, n) with the ids of a torch tensor, a numpy array
// or a sequence of ints: integer tensors and arrays that are contiguous int32/int64 on the CPU are
// read in place, the rest is converted to int64 first.
template <typename F>
void with_ids(const py::handle& tokens, const char* what, F&& f) {
  if (THPVariable_Check(tokens.ptr())) {
    at::Tensor t = THPVariable_Unpack(tokens.ptr());
    TORCH_CHECK_TYPE(
        !at::isFloatingType(t.scalar_type()) && !at::isComplexType(t.scalar_type()) && t.scalar_type() != at::kBool,
        "[indexed_dataset] ", what, ": expected integer token ids, found a ", t.scalar_type(), " tensor");
    if (!(t.device().is_cpu() && t.is_contiguous() && (t.scalar_type() == at::kInt || t.scalar_type() == at::kLong)))
      t = t.to(at::kCPU, at::kLong).contiguous();
    if (t.scalar_type() == at::kInt) return f(t.data_ptr<int32_t>(), t.numel());
    return f(t.data_ptr<int64_t>(), t.numel());
  }
  auto array = py::array::ensure(tokens);
  TORCH_CHECK_TYPE(array, "[indexed_dataset] ", what,
                   ": expected a torch tensor, numpy array or sequence of ints, found ",
                   py::str(py::type::of(tokens)).cast<std::string>());
  const char kind = array.dtype().kind();
  TORCH_CHECK_TYPE(kind == 'i' || kind == 'u' || array.size() == 0, "[indexed_dataset] ", what,
                   ": expected integer token ids, found dtype ", py::str(array.dtype()).cast<std::string>());
  const bool contiguous = array.flags() & py::array::c_style;
  if (contiguous && array.dtype().is(py::dtype::of<int32_t>()))
    return f(static_cast<const int32_t*>(array.data()), static_cast<int64_t>(array.size()));
  if (contiguous && array.dtype().is(py::dtype::of<int64_t>()))
    return f(static_cast<const int64_t*>(array.data()), static_cast<int64_t>(array.size()));
  auto converted = py::array_t<int64_t, py::array::c_style | py::array::forcecast>::ensure(array);
  f(converted.data(), static_cast<int64_t>(converted.size()));
}

// The datasets of a builder call as Python objects (None for a split of weight 0).
using DatasetArray = std::array<std::shared_ptr<const ds::MegatronDataset>, 3>;
py::tuple datasets_tuple(const DatasetArray& a) {
  py::tuple t(3);
  for (int i = 0; i < 3; ++i) t[i] = megatron::python::dataset_object(a[i]);
  return t;
}

std::array<std::optional<int64_t>, 3> sizes_from(const std::vector<std::optional<int64_t>>& sizes) {
  TORCH_CHECK_VALUE(sizes.size() == 3, "[datasets] sizes: expected 3 sample counts (train, valid, test), found ",
                    sizes.size());
  return {sizes[0], sizes[1], sizes[2]};
}

std::vector<std::string> words_of(const py::handle& data_path) {
  if (py::isinstance<py::str>(data_path)) {
    std::vector<std::string> words;
    std::istringstream in(data_path.cast<std::string>());
    for (std::string w; in >> w;) words.push_back(w);
    return words;
  }
  return data_path.cast<std::vector<std::string>>();
}

// A sampler that Python and a DataIterator share (DataIterator owns a unique_ptr).
class SharedSampler : public ds::BatchSampler {
 public:
  explicit SharedSampler(std::shared_ptr<ds::BatchSampler> s) : s_(std::move(s)) {}
  std::optional<std::vector<int64_t>> next() override { return s_->next(); }
  int64_t consumed_samples() const override { return s_->consumed_samples(); }

 private:
  std::shared_ptr<ds::BatchSampler> s_;
};

py::list next_or_stop(ds::BatchSampler& s) {
  std::optional<std::vector<int64_t>> indices;
  {
    py::gil_scoped_release release;
    indices = s.next();
  }
  if (!indices) throw py::stop_iteration();
  return py::cast(*indices);
}

}  // namespace

namespace megatron::python {

py::object dataset_object(const std::shared_ptr<const ds::MegatronDataset>& d) {
  if (!d) return py::none();
  // Python holds datasets as mutable objects; the library never mutates them after building.
  return py::cast(std::const_pointer_cast<ds::MegatronDataset>(d));
}

}  // namespace megatron::python

void init_datasets(py::module_& m) {
  using megatron::python::batch_to_dict;

  py::enum_<ds::DType>(m, "DType", "Element type codes of Megatron's .idx header.")
      .value("UINT8", ds::DType::kUInt8)
      .value("INT8", ds::DType::kInt8)
      .value("INT16", ds::DType::kInt16)
      .value("INT32", ds::DType::kInt32)
      .value("INT64", ds::DType::kInt64)
      .value("FLOAT64", ds::DType::kFloat64)
      .value("FLOAT32", ds::DType::kFloat32)
      .value("UINT16", ds::DType::kUInt16)
      .def_property_readonly(
          "numpy", [](ds::DType d) { return py::dtype(numpy_name(d)); }, "The numpy dtype.")
      .def_property_readonly("itemsize", [](ds::DType d) { return ds::dtype_size(d); });
  m.def("optimal_dtype", &ds::optimal_dtype, py::arg("vocab_size"),
        "Megatron's token dtype: uint16 when vocab_size < 65500, else int32.");
  m.def("indexed_dataset_exists", &ds::indexed_dataset_exists, py::arg("path_prefix"));

  py::class_<ds::IndexedDataset, std::shared_ptr<ds::IndexedDataset>>(
      m, "IndexedDataset",
      "Reader of a Megatron .bin/.idx pair (MMIDIDX v1), memory-mapped and checked on open. "
      "Sequences come back as read-only numpy views of the mapped .bin (no copy); with mmap=False "
      "(--no-mmap-bin-files) the .bin is read, and each sequence is a copy.")
      .def(py::init<std::string, bool>(), py::arg("path_prefix"), py::arg("mmap") = true, Release())
      .def_property_readonly("path_prefix", &ds::IndexedDataset::path_prefix)
      .def_property_readonly("dtype", &ds::IndexedDataset::dtype)
      .def_property_readonly("num_documents", &ds::IndexedDataset::num_documents)
      .def_property_readonly("num_tokens", &ds::IndexedDataset::num_tokens)
      .def("__len__", &ds::IndexedDataset::num_sequences)
      .def(
          "__getitem__",
          [](py::object self, int64_t i) {
            const auto& d = self.cast<const ds::IndexedDataset&>();
            return sequence_array(d, self, wrap_index(i, d.num_sequences(), "sequence"), 0, -1);
          },
          py::arg("idx"), "Sequence idx as a read-only numpy view of the .bin.")
      .def(
          "get",
          [](py::object self, int64_t idx, int64_t offset, std::optional<int64_t> length) {
            const auto& d = self.cast<const ds::IndexedDataset&>();
            return sequence_array(d, self, wrap_index(idx, d.num_sequences(), "sequence"), offset, length.value_or(-1));
          },
          py::arg("idx"), py::arg("offset") = 0, py::arg("length") = py::none(),
          "Tokens [offset, offset + length) of sequence idx (to its end when length is None).")
      .def(
          "get_document",
          [](py::object self, int64_t doc) {
            const auto& d = self.cast<const ds::IndexedDataset&>();
            return span_view(d.get_document(wrap_index(doc, d.num_documents(), "document")), self);
          },
          py::arg("doc"), "All tokens of document doc.")
      .def_property_readonly(
          "sequence_lengths",
          [](const ds::IndexedDataset& d) {
            const auto v = d.sequence_lengths();
            return py::array_t<int32_t>(static_cast<py::ssize_t>(v.size()), v.data());
          },
          "Lengths [S] int32 (a copy: they sit unaligned in the .idx).")
      .def_property_readonly(
          "sequence_pointers",
          [](const ds::IndexedDataset& d) {
            py::array_t<int64_t> out(d.num_sequences());
            auto* p = out.mutable_data();
            for (int64_t i = 0; i < d.num_sequences(); ++i) p[i] = d.sequence_pointer(i);
            return out;
          },
          "Byte offsets [S] int64 into the .bin (a copy).")
      .def_property_readonly(
          "document_indices",
          [](const ds::IndexedDataset& d) {
            const auto v = d.document_indices();
            return py::array_t<int64_t>(static_cast<py::ssize_t>(v.size()), v.data());
          },
          "Document boundaries [D + 1] int64: document d is sequences [doc[d], doc[d+1]) (a copy).")
      .def("check_unchanged", &ds::IndexedDataset::check_unchanged,
           "Raises when either file was replaced or touched since it was opened.")
      .def("__repr__", [](const ds::IndexedDataset& d) {
        return "IndexedDataset('" + d.path_prefix() + "', dtype=" + numpy_name(d.dtype()) +
               ", sequences=" + std::to_string(d.num_sequences()) + ", documents=" + std::to_string(d.num_documents()) +
               ")";
      });

  py::class_<ds::IndexedDatasetBuilder>(
      m, "IndexedDatasetBuilder",
      "Writer of a .bin/.idx pair: tokens stream into a temporary .bin, finalize() writes the .idx "
      "and renames both into place (readers never see a half-written pair).")
      .def(py::init([](const std::string& bin_path, const py::object& dtype) {
             return std::make_unique<ds::IndexedDatasetBuilder>(bin_path, dtype_from(dtype));
           }),
           py::arg("bin_path"), py::arg("dtype") = ds::DType::kInt32,
           "dtype: DType or numpy dtype (np.uint16, 'int32', ...).")
      .def_property_readonly("dtype", &ds::IndexedDatasetBuilder::dtype)
      .def_property_readonly("num_sequences", &ds::IndexedDatasetBuilder::num_sequences)
      .def_property_readonly("num_documents", &ds::IndexedDatasetBuilder::num_documents)
      .def(
          "add_item",
          [](ds::IndexedDatasetBuilder& b, const py::object& tokens) {
            with_ids(tokens, "add_item", [&](const auto* ids, int64_t n) {
              py::gil_scoped_release release;
              b.add_item(ids, n);
            });
          },
          py::arg("tokens"),
          "One sequence: a 1-D torch tensor, numpy array or list of ids (int32/int64 CPU arrays "
          "are read in place). Ids that do not fit the dtype are refused.")
      .def("end_document", &ds::IndexedDatasetBuilder::end_document, "Closes the current document.")
      .def(
          "add_document",
          [](ds::IndexedDatasetBuilder& b, const py::object& tokens, const std::vector<int64_t>& lengths) {
            std::vector<int32_t> ids;
            with_ids(tokens, "add_document", [&](const auto* p, int64_t n) {
              ids.reserve(n);
              for (int64_t i = 0; i < n; ++i) {
                TORCH_CHECK_VALUE(p[i] >= INT32_MIN && p[i] <= INT32_MAX, "[indexed_dataset] add_document: id ", p[i],
                                  " does not fit int32; use add_item for each sequence and end_document()");
                ids.push_back(static_cast<int32_t>(p[i]));
              }
            });
            py::gil_scoped_release release;
            b.add_document(ids, lengths);
          },
          py::arg("tokens"), py::arg("lengths"),
          "One document of several sequences: tokens are their concatenation, lengths their sizes.")
      .def("add_index", &ds::IndexedDatasetBuilder::add_index, py::arg("path_prefix"), Release(),
           "Appends a whole dataset of the same dtype.")
      .def("finalize", &ds::IndexedDatasetBuilder::finalize, py::arg("idx_path"), Release(),
           "Writes the .idx and renames both files into place.");

  py::enum_<ds::Split>(m, "Split")
      .value("TRAIN", ds::Split::kTrain)
      .value("VALID", ds::Split::kValid)
      .value("TEST", ds::Split::kTest);

  megatron::python::SettingsClass<ds::GPTDatasetConfig>(m, "GPTDatasetConfig",
                                                        "Settings of GPTDataset (Megatron's GPTDatasetConfig).")
      .field("random_seed", &ds::GPTDatasetConfig::random_seed)
      .field("sequence_length", &ds::GPTDatasetConfig::sequence_length)
      .field("split", &ds::GPTDatasetConfig::split)
      .field("add_extra_token_to_sequence", &ds::GPTDatasetConfig::add_extra_token_to_sequence)
      .field("drop_last_partial_validation_sequence", &ds::GPTDatasetConfig::drop_last_partial_validation_sequence)
      .field("pad_token", &ds::GPTDatasetConfig::pad_token)
      .field("path_to_cache", &ds::GPTDatasetConfig::path_to_cache)
      .field("mmap_bin_files", &ds::GPTDatasetConfig::mmap_bin_files)
      .field("build_cache", &ds::GPTDatasetConfig::build_cache)
      .done();

  py::class_<ds::MegatronDataset, std::shared_ptr<ds::MegatronDataset>>(
      m, "MegatronDataset", "A fixed-length list of token samples (what samplers and DataIterator draw from).")
      .def("__len__", &ds::MegatronDataset::size)
      .def(
          "__getitem__",
          [](const ds::MegatronDataset& d, int64_t i) {
            const int64_t idx = i < 0 ? i + d.size() : i;
            TORCH_CHECK_INDEX(idx >= 0 && idx < d.size(), "[datasets] sample ", i, " out of range for ", d.size());
            py::array_t<int64_t> out(d.sample_length());
            int64_t* text = out.mutable_data();
            py::gil_scoped_release release;
            d.read_sample(idx, text);
            return out;
          },
          py::arg("idx"), "Sample idx: sample_length int64 ids.")
      .def_property_readonly("sample_length", &ds::MegatronDataset::sample_length,
                             "Tokens per sample (sequence_length + 1 with the extra label token).")
      .def_property_readonly("pad_token", &ds::MegatronDataset::pad_token)
      .def_property_readonly("description", &ds::MegatronDataset::description)
      .def("check_unchanged", &ds::MegatronDataset::check_unchanged)
      .def("__repr__", [](const py::object& self) {
        const auto& d = self.cast<const ds::MegatronDataset&>();
        return py::str(py::type::of(self).attr("__name__")).cast<std::string>() +
               "(samples=" + std::to_string(d.size()) + ", sample_length=" + std::to_string(d.sample_length()) + ")";
      });

  py::class_<ds::GPTDataset, ds::MegatronDataset, std::shared_ptr<ds::GPTDataset>>(
      m, "GPTDataset",
      "Megatron-LM's GPTDataset: fixed-length samples over shuffled documents, with the same "
      "document, sample and shuffle indices as Megatron-LM (cached as .npy files).")
      .def(py::init([](std::shared_ptr<ds::IndexedDataset> dataset, std::optional<std::pair<int64_t, int64_t>> range,
                       std::optional<int64_t> num_samples, ds::Split split, ds::GPTDatasetConfig config) {
             TORCH_CHECK_VALUE(dataset, "[gpt_dataset] dataset: expected an IndexedDataset, found None");
             py::gil_scoped_release release;
             auto low = std::make_shared<ds::IndexedLowLevelDataset>(std::move(dataset));
             const auto r = range.value_or(std::make_pair<int64_t, int64_t>(0, low->num_sequences()));
             return std::make_shared<ds::GPTDataset>(low, r, num_samples, split, std::move(config));
           }),
           py::arg("dataset"), py::arg("range") = py::none(), py::arg("num_samples") = py::none(),
           py::arg("split") = ds::Split::kTrain, py::arg("config") = ds::GPTDatasetConfig(),
           "Samples from sequences [range[0], range[1]) of dataset (all when None); num_samples: "
           "at least this many (more epochs as needed), one epoch when None.")
      .def(
          "get",
          [](const ds::GPTDataset& d, int64_t idx) {
            TORCH_CHECK_INDEX(idx >= 0 && idx < d.size(), "[gpt_dataset] sample ", idx, " out of range for ", d.size());
            auto [tokens, docs] = d.get(idx);
            return py::make_tuple(py::array_t<int64_t>(static_cast<py::ssize_t>(tokens.size()), tokens.data()),
                                  py::array_t<int64_t>(static_cast<py::ssize_t>(docs.size()), docs.data()));
          },
          py::arg("idx"), "Sample idx as (tokens, ids of the documents it spans).")
      .def_property_readonly(
          "document_index",
          [](py::object self) {
            const auto& a = self.cast<const ds::GPTDataset&>().document_index();
            return megatron::python::readonly_view(a.data(), {static_cast<py::ssize_t>(a.size())}, self);
          },
          "[E * N] int32, a read-only view (memory-mapped when loaded from the cache).")
      .def_property_readonly(
          "sample_index",
          [](py::object self) {
            const auto& a = self.cast<const ds::GPTDataset&>().sample_index();
            return megatron::python::readonly_view(a.data(), {static_cast<py::ssize_t>(a.size() / 2), 2}, self);
          },
          "[S + 1, 2] int64 (document-index position, token offset) of each sample, a read-only view.")
      .def_property_readonly(
          "shuffle_index",
          [](py::object self) {
            const auto& a = self.cast<const ds::GPTDataset&>().shuffle_index();
            return megatron::python::readonly_view(a.data(), {static_cast<py::ssize_t>(a.size())}, self);
          },
          "[S] int64 permutation of the samples, a read-only view.")
      .def_property_readonly("num_epochs", &ds::GPTDataset::num_epochs)
      .def_property_readonly("separate_final_epoch", &ds::GPTDataset::separate_final_epoch)
      .def_property_readonly("loaded_from_cache", &ds::GPTDataset::loaded_from_cache)
      .def_property_readonly("cache_prefix", &ds::GPTDataset::cache_prefix);

  py::class_<ds::BlendedDataset, ds::MegatronDataset, std::shared_ptr<ds::BlendedDataset>>(
      m, "BlendedDataset", "Weighted blend of datasets (Megatron-LM's BlendedDataset).")
      .def(py::init([](const std::vector<std::shared_ptr<ds::MegatronDataset>>& datasets, std::vector<double> weights,
                       std::optional<int64_t> size) {
             std::vector<std::shared_ptr<const ds::MegatronDataset>> in(datasets.begin(), datasets.end());
             py::gil_scoped_release release;
             return std::make_shared<ds::BlendedDataset>(std::move(in), std::move(weights), size);
           }),
           py::arg("datasets"), py::arg("weights"), py::arg("size") = py::none(),
           "size: samples to draw by the weights; None: exactly weights[i] samples of dataset i.")
      .def_property_readonly("dataset_index",
                             [](py::object self) {
                               const auto& v = self.cast<const ds::BlendedDataset&>().dataset_index();
                               return megatron::python::readonly_view(v.data(), {static_cast<py::ssize_t>(v.size())},
                                                                      self);
                             })
      .def_property_readonly("dataset_sample_index", [](py::object self) {
        const auto& v = self.cast<const ds::BlendedDataset&>().dataset_sample_index();
        return megatron::python::readonly_view(v.data(), {static_cast<py::ssize_t>(v.size())}, self);
      });

  m.def("parse_and_normalize_split", &ds::parse_and_normalize_split, py::arg("split"),
        "'969,30,1' -> [0.969, 0.03, 0.001].");
  m.def(
      "parse_data_path",
      [](const py::object& data_path) {
        auto blend = ds::parse_data_path(words_of(data_path));
        return py::make_tuple(blend.prefixes, blend.weights);
      },
      py::arg("data_path"), "--data-path words (a list or one string) -> (prefixes, weights or []).");
  m.def(
      "train_valid_test_num_samples",
      [](int64_t train_iters, int64_t gbs, int64_t eval_interval, int64_t eval_iters) {
        auto s = ds::train_valid_test_num_samples(train_iters, gbs, eval_interval, eval_iters);
        return std::vector<std::optional<int64_t>>{s[0], s[1], s[2]};
      },
      py::arg("train_iters"), py::arg("global_batch_size"), py::arg("eval_interval"), py::arg("eval_iters"),
      "Megatron's sample request per split.");
  m.def(
      "build_gpt_datasets",
      [](const py::object& data_path, const std::vector<std::optional<int64_t>>& sizes,
         const ds::GPTDatasetConfig& config, double mid_level_surplus) {
        const auto blend = ds::parse_data_path(words_of(data_path));
        DatasetArray out;
        {
          py::gil_scoped_release release;
          out = ds::build_gpt_datasets(blend, sizes_from(sizes), config, mid_level_surplus);
        }
        return datasets_tuple(out);
      },
      py::arg("data_path"), py::arg("sizes"), py::arg("config"), py::arg("mid_level_surplus") = 0.005,
      "Megatron-LM's BlendedMegatronDatasetBuilder for GPT: (train, valid, test) for the split in "
      "config and the sample counts in sizes (None: one epoch); None for a split of weight 0.");
  m.def(
      "build_gpt_datasets_on_ranks",
      [](const py::object& data_path, const std::vector<std::optional<int64_t>>& sizes,
         const ds::GPTDatasetConfig& config, std::shared_ptr<megatron::comm::ProcessGroup> group,
         double mid_level_surplus) {
        TORCH_CHECK_VALUE(group, "[datasets] build_gpt_datasets_on_ranks: expected a ProcessGroup, found None");
        const auto blend = ds::parse_data_path(words_of(data_path));
        DatasetArray out;
        {
          py::gil_scoped_release release;
          out = ds::build_gpt_datasets_on_ranks(
              blend, sizes_from(sizes), config, group->rank(), [&] { group->barrier(); }, mid_level_surplus);
        }
        return datasets_tuple(out);
      },
      py::arg("data_path"), py::arg("sizes"), py::arg("config"), py::arg("group"), py::arg("mid_level_surplus") = 0.005,
      "The same in a job: group rank 0 builds the index caches, then the others load them "
      "(collective over group).");
  m.def(
      "build_gpt_datasets_per_split_on_ranks",
      [](const std::vector<py::object>& data_paths, const std::vector<std::optional<int64_t>>& sizes,
         const ds::GPTDatasetConfig& config, std::shared_ptr<megatron::comm::ProcessGroup> group,
         double mid_level_surplus) {
        TORCH_CHECK_VALUE(data_paths.size() == 3,
                          "[datasets] build_gpt_datasets_per_split_on_ranks: expected 3 "
                          "data paths (train, valid, test; None for none), found ",
                          data_paths.size());
        std::array<std::optional<ds::DataBlend>, 3> blends;
        for (size_t s = 0; s < 3; ++s)
          if (!data_paths[s].is_none()) blends[s] = ds::parse_data_path(words_of(data_paths[s]));
        DatasetArray out;
        {
          py::gil_scoped_release release;
          out = ds::build_gpt_datasets_per_split_on_ranks(
              blends, sizes_from(sizes), config, group ? group->rank() : 0,
              [&] {
                if (group) group->barrier();
              },
              mid_level_surplus);
        }
        return datasets_tuple(out);
      },
      py::arg("data_paths"), py::arg("sizes"), py::arg("config"), py::arg("group") = nullptr,
      py::arg("mid_level_surplus") = 0.005,
      "Megatron-LM's blend_per_split: each split from its own data path (None: none) over its datasets' whole "
      "documents; with a group, its rank 0 builds the index caches first.");
  m.def(
      "build_mock_gpt_datasets",
      [](int64_t vocab_size, int64_t eod_token, const std::vector<std::optional<int64_t>>& sizes,
         const ds::GPTDatasetConfig& config) {
        DatasetArray out;
        {
          py::gil_scoped_release release;
          out = ds::build_mock_gpt_datasets(vocab_size, eod_token, sizes_from(sizes), config);
        }
        return datasets_tuple(out);
      },
      py::arg("vocab_size"), py::arg("eod_token"), py::arg("sizes"), py::arg("config"),
      "--mock-data: Megatron's mock documents, split 1,1,1, no cache.");

  py::class_<ds::BatchSampler, std::shared_ptr<ds::BatchSampler>>(
      m, "BatchSampler", "Yields this data-parallel rank's micro-batches of sample indices.")
      .def("__iter__", [](py::object self) { return self; })
      .def("__next__", [](ds::BatchSampler& s) { return next_or_stop(s); })
      .def_property_readonly("consumed_samples", &ds::BatchSampler::consumed_samples,
                             "Samples consumed by all data-parallel ranks so far.");
  py::class_<ds::MegatronPretrainingSampler, ds::BatchSampler, std::shared_ptr<ds::MegatronPretrainingSampler>>(
      m, "MegatronPretrainingSampler", "dataloader_type 'single': consecutive global batches from consumed_samples.")
      .def(py::init<int64_t, int64_t, int64_t, int64_t, int64_t, bool>(), py::arg("total_samples"),
           py::arg("consumed_samples"), py::arg("micro_batch_size"), py::arg("data_parallel_rank"),
           py::arg("data_parallel_size"), py::arg("drop_last") = true);
  py::class_<ds::MegatronPretrainingRandomSampler, ds::BatchSampler,
             std::shared_ptr<ds::MegatronPretrainingRandomSampler>>(
      m, "MegatronPretrainingRandomSampler", "dataloader_type 'cyclic': a seeded shuffle per epoch, endless.")
      .def(py::init<int64_t, int64_t, int64_t, int64_t, int64_t, bool>(), py::arg("total_samples"),
           py::arg("consumed_samples"), py::arg("micro_batch_size"), py::arg("data_parallel_rank"),
           py::arg("data_parallel_size"), py::arg("data_sharding") = true);

  megatron::python::SettingsClass<ds::BatchOptions>(m, "BatchOptions",
                                                    "How samples become a batch (Megatron's GPT sample construction).")
      .field("eod_token", &ds::BatchOptions::eod_token)
      .field("sequence_length", &ds::BatchOptions::sequence_length)
      .field("reset_position_ids", &ds::BatchOptions::reset_position_ids)
      .field("reset_attention_mask", &ds::BatchOptions::reset_attention_mask)
      .field("eod_mask_loss", &ds::BatchOptions::eod_mask_loss)
      .field("create_attention_mask", &ds::BatchOptions::create_attention_mask)
      .field("add_extra_token_to_sequence", &ds::BatchOptions::add_extra_token_to_sequence)
      .field("pin_memory", &ds::BatchOptions::pin_memory)
      .done();

  m.def(
      "build_batch",
      [](const ds::MegatronDataset& dataset, const std::vector<int64_t>& indices, const ds::BatchOptions& options) {
        ds::Batch batch;
        {
          py::gil_scoped_release release;
          batch = ds::build_batch(dataset, indices, options);
        }
        return batch_to_dict(batch);
      },
      py::arg("dataset"), py::arg("indices"), py::arg("options") = ds::BatchOptions(),
      "The samples indices of dataset as one batch: dict of text (the samples as read), tokens, labels, loss_mask, "
      "attention_mask (None when not created), position_ids.");

  m.def(
      "get_ltor_masks_and_position_ids",
      [](const at::Tensor& data, int64_t eod_token, bool reset_position_ids, bool reset_attention_mask,
         bool eod_mask_loss) {
        ds::Batch masks;
        {
          py::gil_scoped_release release;
          masks =
              ds::ltor_masks_and_position_ids(data, eod_token, reset_position_ids, reset_attention_mask, eod_mask_loss);
        }
        return py::make_tuple(masks.at("attention_mask"), masks.at("loss_mask"), masks.at("position_ids"));
      },
      py::arg("data"), py::arg("eod_token"), py::arg("reset_position_ids"), py::arg("reset_attention_mask"),
      py::arg("eod_mask_loss"),
      "Megatron-LM's (attention_mask, loss_mask, position_ids) for tokens [b, s], as build_batch makes them: "
      "attention_mask bool [b or 1, 1, s, s] (true = masked out; per sample with reset_attention_mask).");

  py::class_<ds::BatchIterator>(m, "BatchIterator",
                                "What forward_step draws micro-batches from: next(it) is a dict of tensors (None for a "
                                "tensor not created).")
      .def("__iter__", [](py::object self) { return self; })
      .def("__next__", [](ds::BatchIterator& it) {
        std::optional<ds::Batch> batch;
        {
          py::gil_scoped_release release;
          batch = it.next();
        }
        if (!batch) throw py::stop_iteration();
        return batch_to_dict(*batch);
      });

  py::class_<ds::DataIterator, ds::BatchIterator>(
      m, "DataIterator",
      "Batches from a dataset and a sampler (what forward_step reads): next(it) is a dict of "
      "text (the samples as read), tokens, labels, loss_mask, attention_mask (None when not created) and position_ids; "
      "optionally prefetched on a background thread.")
      .def(py::init([](std::shared_ptr<ds::MegatronDataset> dataset, std::shared_ptr<ds::BatchSampler> sampler,
                       const ds::BatchOptions& options, int prefetch, int64_t check_files_every) {
             TORCH_CHECK_VALUE(dataset && sampler, "[data_iterator] expected a dataset and a sampler, found None");
             return std::make_unique<ds::DataIterator>(std::move(dataset),
                                                       std::make_unique<SharedSampler>(std::move(sampler)), options,
                                                       prefetch, check_files_every);
           }),
           py::arg("dataset"), py::arg("sampler"), py::arg("options") = ds::BatchOptions(), py::arg("prefetch") = 0,
           py::arg("check_files_every") = 100,
           "The iterator advances the sampler (from its background thread when prefetching).")
      .def_property_readonly("consumed_samples", &ds::DataIterator::consumed_samples,
                             "consumed_samples after the batches handed out so far.");
}
