// PyTorch Distributed Checkpoint's .metadata, written and read here (dcp_files.h). It follows
// torch.distributed.checkpoint 2.11 (metadata.py, filesystem.py): a pickle of
// Metadata(state_dict_metadata, storage_data: {MetadataIndex: _StorageInfo}, version "1.0.0").
#include <c10/util/Exception.h>

#include <algorithm>
#include <filesystem>
#include <utility>

#include "input_files.h"
#include "megatron/training/checkpointing.h"
#include "models/common/unpickler.h"
#include "training/checkpointing/dcp_files.h"
#include "training/checkpointing/paths.h"
#include "training/checkpointing/pickle_writer.h"

namespace megatron::training::detail {
namespace {

constexpr const char* kMetadataModule = "torch.distributed.checkpoint.metadata";

// torch's dtype names, for the dtypes a checkpoint holds.
constexpr std::pair<c10::ScalarType, const char*> kDtypes[] = {
    {c10::kFloat, "float32"}, {c10::kBFloat16, "bfloat16"}, {c10::kHalf, "float16"}, {c10::kDouble, "float64"},
    {c10::kLong, "int64"},    {c10::kInt, "int32"},         {c10::kShort, "int16"},  {c10::kChar, "int8"},
    {c10::kByte, "uint8"},    {c10::kBool, "bool"}};

const char* dtype_name(c10::ScalarType t) {
  for (const auto& [type, name] : kDtypes)
    if (type == t) return name;
  TORCH_CHECK(false, "[checkpointing] torch_dist: no torch name for dtype ", t);
}

// --- reading the unpickled values, every step checked ----------------------------------------

struct Reader {
  std::string where;

  [[noreturn]] void fail(const std::string& what) const { TORCH_CHECK(false, "[checkpointing] ", where, ": ", what); }
  c10::impl::GenericDict object(const c10::IValue& v, const std::string& cls, const std::string& what) const {
    if (!v.isGenericDict()) fail(what + " is a " + v.tagKind() + ", expected a " + cls);
    auto d = v.toGenericDict();
    auto it = d.find("__class__");
    if (it == d.end() || !it->value().isString() || it->value().toStringRef() != cls) fail(what + " is not a " + cls);
    return d;
  }
  const c10::IValue& attr(const c10::impl::GenericDict& d, const char* name, const std::string& what) const {
    auto it = d.find(name);
    if (it == d.end()) fail(what + " has no '" + name + "'");
    return it->value();
  }
  std::vector<int64_t> ints(const c10::IValue& v, const std::string& what) const {
    if (!v.isTuple() && !v.isList()) fail(what + " is a " + v.tagKind() + ", expected a torch.Size");
    std::vector<int64_t> out;
    for (const auto& e : v.isTuple() ? v.toTupleRef().elements().vec() : v.toListRef().vec()) {
      if (!e.isInt() || e.toInt() < 0) fail(what + " holds something other than a non-negative integer");
      out.push_back(e.toInt());
    }
    return out;
  }
  uint64_t count(const c10::IValue& v, const std::string& what) const {
    if (!v.isInt() || v.toInt() < 0) fail(what + " is not a non-negative integer");
    return static_cast<uint64_t>(v.toInt());
  }
  std::string file_name(const c10::IValue& v, const std::string& what) const {
    if (!v.isString()) fail(what + " is not a string");
    const std::string& name = v.toStringRef();
    if (name.empty() || name == "." || name == ".." || name.find('/') != std::string::npos ||
        name.find('\0') != std::string::npos)
      fail(what + " '" + name + "' is not a file name in the checkpoint folder");
    return name;
  }
  c10::ScalarType dtype(const c10::IValue& properties, const std::string& what) const {
    const auto p = object(properties, std::string(kMetadataModule) + ".TensorProperties", what);
    c10::IValue dtype;
    if (auto state = p.find("__state__"); state != p.end()) {  // __getstate__'s (dtype, layout, ...)
      if (!state->value().isTuple() || state->value().toTupleRef().elements().empty())
        fail(what + "'s state is not a tuple");
      dtype = state->value().toTupleRef().elements()[0];
    } else {
      dtype = attr(p, "dtype", what);
    }
    if (dtype.isString())
      for (const auto& [type, name] : kDtypes)
        if (dtype.toStringRef() == std::string("torch.") + name) return type;
    fail(what + " has a dtype (" + (dtype.isString() ? dtype.toStringRef() : dtype.tagKind()) +
         ") this reader does not take");
  }
};

bool overlap(const DcpChunk& a, const DcpChunk& b) {
  for (size_t d = 0; d < a.offsets.size(); ++d)
    if (a.offsets[d] >= b.offsets[d] + b.sizes[d] || b.offsets[d] >= a.offsets[d] + a.sizes[d]) return false;
  return dcp_volume(a.sizes) > 0 && dcp_volume(b.sizes) > 0;
}

}  // namespace

std::string dcp_metadata_pickle(const DcpMetadata& md) {
  PickleWriter p;
  auto field = [&](const char* name) { p.str(name); };
  p.object(kMetadataModule, "Metadata");
  p.empty_dict();
  p.mark();
  field("state_dict_metadata");
  p.empty_dict();
  p.mark();
  for (const auto& [key, t] : md.tensors) {
    p.str(key);
    p.object(kMetadataModule, "TensorStorageMetadata");
    p.empty_dict();
    p.mark();
    field("properties");
    p.object(kMetadataModule, "TensorProperties");  // its __setstate__ takes a tuple
    p.mark();
    p.global("torch", dtype_name(t.dtype));
    p.global("torch.serialization", "_get_layout");
    p.mark();
    p.str("torch.strided");
    p.tuple();
    p.reduce();
    p.boolean(false);  // requires_grad
    p.global(kMetadataModule, "_MEM_FORMAT_ENCODING");
    p.mark();
    p.integer(0);  // TORCH_CONTIGUOUS_FORMAT
    p.tuple();
    p.reduce();
    p.boolean(false);  // pin_memory
    p.tuple();
    p.build();
    field("size");
    p.torch_size(t.size);
    field("chunks");
    p.empty_list();
    p.mark();
    for (const auto& c : t.chunks) {
      p.object(kMetadataModule, "ChunkStorageMetadata");
      p.empty_dict();
      p.mark();
      field("offsets");
      p.torch_size(c.offsets);
      field("sizes");
      p.torch_size(c.sizes);
      p.setitems();
      p.build();
    }
    p.appends();
    p.setitems();
    p.build();
  }
  for (const auto& [key, o] : md.objects) {
    p.str(key);
    p.object(kMetadataModule, "BytesStorageMetadata");
  }
  p.setitems();
  field("planner_data");
  p.none();
  field("storage_data");
  p.empty_dict();
  p.mark();
  auto storage = [&](const std::string& key, const std::vector<int64_t>* offsets, const std::string& file,
                     uint64_t offset, uint64_t length) {
    p.object(kMetadataModule, "MetadataIndex");
    p.empty_dict();
    p.mark();
    field("fqn");
    p.str(key);
    field("offset");
    if (offsets)
      p.torch_size(*offsets);
    else
      p.none();
    field("index");
    p.none();
    p.setitems();
    p.build();
    p.object("torch.distributed.checkpoint.filesystem", "_StorageInfo");
    p.empty_dict();
    p.mark();
    field("relative_path");
    p.str(file);
    field("offset");
    p.integer(static_cast<int64_t>(offset));
    field("length");
    p.integer(static_cast<int64_t>(length));
    p.setitems();
    p.build();
  };
  for (const auto& [key, t] : md.tensors)
    for (const auto& c : t.chunks) storage(key, &c.offsets, c.file, c.offset, c.length);
  for (const auto& [key, o] : md.objects) storage(key, nullptr, o.file, o.offset, o.length);
  p.setitems();
  field("version");
  p.str("1.0.0");
  p.setitems();
  p.build();
  return p.finish();
}

DcpMetadata parse_dcp_metadata(const uint8_t* data, size_t size, const std::string& where) {
  const Reader r{where};
  const c10::IValue root = models::common::detail::unpickle(
      data, size, [&](const std::string& key) -> c10::Storage { r.fail("it names a tensor storage (" + key + ")"); },
      where);
  const auto m = r.object(root, std::string(kMetadataModule) + ".Metadata", "the pickle");
  if (auto v = m.find("version"); v != m.end() && !v->value().isNone()) {
    if (!v->value().isString() || v->value().toStringRef().rfind("1.", 0) != 0)
      r.fail("version " + (v->value().isString() ? v->value().toStringRef() : v->value().tagKind()) +
             " is not one this reader knows (1.x)");
  }
  DcpMetadata md;
  const auto& sdm = r.attr(m, "state_dict_metadata", "Metadata");
  if (!sdm.isGenericDict()) r.fail("state_dict_metadata is not a dict");
  for (const auto& e : sdm.toGenericDict()) {
    if (!e.key().isString()) r.fail("state_dict_metadata has a key that is not a string");
    const std::string key = e.key().toStringRef(), what = "'" + key + "'";
    if (!e.value().isGenericDict()) r.fail(what + " is a " + e.value().tagKind());
    const auto v = e.value().toGenericDict();
    const auto cls = v.find("__class__");
    if (cls != v.end() && cls->value().isString() &&
        cls->value().toStringRef() == std::string(kMetadataModule) + ".BytesStorageMetadata") {
      md.objects[key] = {};
      continue;
    }
    const auto t = r.object(e.value(), std::string(kMetadataModule) + ".TensorStorageMetadata", what);
    DcpTensor tensor;
    tensor.dtype = r.dtype(r.attr(t, "properties", what), what + "'s properties");
    tensor.size = r.ints(r.attr(t, "size", what), what + "'s size");
    const auto& chunks = r.attr(t, "chunks", what);
    if (!chunks.isList()) r.fail(what + "'s chunks are not a list");
    for (const auto& c : chunks.toListRef()) {
      const auto chunk = r.object(c, std::string(kMetadataModule) + ".ChunkStorageMetadata", what + "'s chunk");
      DcpChunk out;
      out.offsets = r.ints(r.attr(chunk, "offsets", what), what + "'s chunk offsets");
      out.sizes = r.ints(r.attr(chunk, "sizes", what), what + "'s chunk sizes");
      bool inside = out.offsets.size() == tensor.size.size() && out.sizes.size() == tensor.size.size();
      for (size_t d = 0; inside && d < tensor.size.size(); ++d)
        inside = out.offsets[d] <= tensor.size[d] && out.sizes[d] <= tensor.size[d] - out.offsets[d];
      if (!inside)
        r.fail(what + " has a chunk at " + c10::str(c10::IntArrayRef(out.offsets)) + " of " +
               c10::str(c10::IntArrayRef(out.sizes)) + ", outside its global shape " +
               c10::str(c10::IntArrayRef(tensor.size)));
      for (const auto& other : tensor.chunks)
        if (overlap(other, out))
          r.fail(what + " has overlapping chunks at " + c10::str(c10::IntArrayRef(other.offsets)) + " and " +
                 c10::str(c10::IntArrayRef(out.offsets)));
      tensor.chunks.push_back(std::move(out));
    }
    md.tensors[key] = std::move(tensor);
  }
  // storage_data: {MetadataIndex(fqn, offset): _StorageInfo(relative_path, offset, length)}, which
  // the unpickler gives as (key, value) pairs.
  const auto& storage = r.attr(m, "storage_data", "Metadata");
  std::vector<c10::IValue> pairs;
  if (storage.isList())
    pairs = storage.toListRef().vec();
  else if (!storage.isGenericDict() || !storage.toGenericDict().empty())
    r.fail("storage_data is not a dict of MetadataIndex");
  for (const auto& pair : pairs) {
    if (!pair.isTuple() || pair.toTupleRef().elements().size() != 2) r.fail("storage_data is malformed");
    const auto index = r.object(pair.toTupleRef().elements()[0], std::string(kMetadataModule) + ".MetadataIndex",
                                "a storage_data key");
    const auto info = r.object(pair.toTupleRef().elements()[1], "torch.distributed.checkpoint.filesystem._StorageInfo",
                               "a storage_data value");
    const auto& fqn = r.attr(index, "fqn", "a MetadataIndex");
    if (!fqn.isString()) r.fail("a MetadataIndex's fqn is not a string");
    const std::string what = "'" + fqn.toStringRef() + "'";
    if (auto t = info.find("transform_descriptors");
        t != info.end() && !t->value().isNone() && !(t->value().isList() && t->value().toListRef().empty()))
      r.fail(what + " is stored through transforms (compression), which this reader does not undo");
    const std::string file = r.file_name(r.attr(info, "relative_path", what), what + "'s relative_path");
    const uint64_t offset = r.count(r.attr(info, "offset", what), what + "'s offset");
    const uint64_t length = r.count(r.attr(info, "length", what), what + "'s length");
    if (auto o = md.objects.find(fqn.toStringRef()); o != md.objects.end()) {
      o->second = {file, offset, length};
      continue;
    }
    auto t = md.tensors.find(fqn.toStringRef());
    if (t == md.tensors.end()) r.fail("storage_data names " + what + ", which state_dict_metadata does not");
    auto offsets = index.find("offset");
    if (offsets == index.end() || offsets->value().isNone()) r.fail(what + "'s storage has no chunk offset");
    const auto at = r.ints(offsets->value(), what + "'s storage offset");
    auto chunk = std::find_if(t->second.chunks.begin(), t->second.chunks.end(),
                              [&](const DcpChunk& c) { return c.offsets == at; });
    if (chunk == t->second.chunks.end())
      r.fail(what + " has storage for a chunk at " + c10::str(c10::IntArrayRef(at)) + ", which it does not list");
    chunk->file = file;
    chunk->offset = offset;
    chunk->length = length;
  }
  for (const auto& [key, t] : md.tensors)
    for (const auto& c : t.chunks)
      if (c.file.empty())
        r.fail("'" + key + "' has a chunk at " + c10::str(c10::IntArrayRef(c.offsets)) + " with no storage");
  for (const auto& [key, o] : md.objects)
    if (o.file.empty()) r.fail("object '" + key + "' has no storage");
  return md;
}

DcpMetadata read_dcp_metadata(const std::string& dir) {
  const std::string path = join(dir, kDcpMetadataFileName);
  TORCH_CHECK(std::filesystem::is_regular_file(path), "[checkpointing] ", path, " does not exist");
  const std::string bytes = megatron::detail::read_whole_file(path, "[checkpointing] " + path);
  return parse_dcp_metadata(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), path);
}

}  // namespace megatron::training::detail

namespace megatron::training {

std::map<std::string, std::vector<int64_t>> torch_dist_tensor_shapes(const std::string& iter_dir) {
  std::map<std::string, std::vector<int64_t>> out;
  for (const auto& [key, t] : detail::read_dcp_metadata(iter_dir).tensors) out[key] = t.size;
  return out;
}

}  // namespace megatron::training
