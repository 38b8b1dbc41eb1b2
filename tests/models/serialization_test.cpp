// read_archive against hostile torch.save archives: each pickle below is written by hand from the
// pickle protocol's opcode table, and each must be one clear error, never an allocation of what
// it declares, a read past a buffer or a crash.
#include <c10/util/Logging.h>
#include <caffe2/serialize/inline_container.h>
#include <gtest/gtest.h>

#include <ATen/ops/arange.h>

#include <fstream>

#include "../error_of.h"
#include "../temp_dir.h"
#include "megatron/models/common/serialization.h"

namespace {

using megatron::models::common::read_archive;

// An archive holding `pickle` as data.pkl and a 64-byte storage data/0 (16 floats 0..15).
std::string archive(const std::string& pickle) {
  const std::string path = megatron::testing::make_temp_dir("serialization") + "/model_optim_rng.pt";
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  caffe2::serialize::PyTorchStreamWriter writer([&](const void* bytes, size_t n) -> size_t {
    out.write(static_cast<const char*>(bytes), static_cast<std::streamsize>(n));
    return n;
  });
  float values[16];
  for (int i = 0; i < 16; ++i) values[i] = static_cast<float>(i);
  writer.writeRecord("data.pkl", pickle.data(), pickle.size());
  writer.writeRecord("data/0", values, sizeof values);
  writer.writeEndOfFile();
  return path;
}

// BINUNICODE s; BININT1 v.
std::string text(const std::string& s) {
  return "X" + std::string(1, char(s.size())) + std::string(3, '\0') + s;
}
std::string small(int v) {
  return "K" + std::string(1, char(v));
}

// torch._utils._rebuild_tensor_v2 over storage '0' (declared `numel` floats) with one dimension:
// (persistent ('storage', FloatStorage, '0', 'cpu', numel), offset, (size,), (stride,), False, OrderedDict()).
std::string tensor_pickle(int numel, int size, int stride, int offset) {
  return "\x80\x02"
         "ctorch._utils\n_rebuild_tensor_v2\n((" +
         text("storage") + "ctorch\nFloatStorage\n" + text("0") + text("cpu") + small(numel) + "tQ" + small(offset) +
         small(size) + "\x85" + small(stride) +
         "\x85\x89"
         "ccollections\nOrderedDict\n)RtR.";
}

std::string error_reading(const std::string& pickle) {
  return megatron::testing::error_of([&] { read_archive(archive(pickle)); });
}

TEST(Serialization, HostilePicklesAreOneClearError) {
  const std::string kProto("\x80\x02", 2);
  // A string declaring 4 GB in a 10-byte pickle: refused before anything is allocated.
  EXPECT_NE(error_reading(kProto + std::string("X\xff\xff\xff\xf0.", 6)).find("it ends inside an argument (4043309055"),
            std::string::npos);
  // A memo index of 16 M (LibTorch would grow its memo to it).
  EXPECT_NE(error_reading(kProto + std::string("Nr\xff\xff\xff\x00.", 7)).find("memo index 16777215 skips ahead"),
            std::string::npos);
  // SETITEM with only a dict on the stack (LibTorch would index below its stack).
  EXPECT_NE(error_reading(kProto + "}s.").find("an opcode needs 3 values on the stack, which holds 1"),
            std::string::npos);
  // DICT over an odd number of values (LibTorch would read one past its stack).
  EXPECT_NE(error_reading(kProto + "(NNNd.").find("DICT over an odd number of values"), std::string::npos);
  // A global that is code.
  EXPECT_NE(error_reading(kProto + "cos\nsystem\n.").find("the global os.system is not one a checkpoint holds"),
            std::string::npos);
  // 2,000 nested tuples from 2 KB (LibTorch destroys and hashes them recursively).
  EXPECT_NE(error_reading(kProto + ")" + std::string(2000, '\x85') + ".").find("nested more than 100 deep"),
            std::string::npos);
  // A dict keyed by a tuple (LibTorch hashes keys recursively).
  EXPECT_NE(error_reading(kProto + "}()\x85Nu.").find("a dict key that is a container"), std::string::npos);
  // A list placed in itself.
  EXPECT_NE(error_reading(kProto + std::string("]q\0(h\0e.", 8)).find("placed in itself"), std::string::npos);
  // A tensor of 200 floats over a 64-byte storage, and one starting at offset 20 of it.
  EXPECT_NE(error_reading(tensor_pickle(16, 200, 1, 0))
                .find("a tensor of shape [200], strides [1] and offset 0 reaches past its storage of 64 bytes"),
            std::string::npos);
  EXPECT_NE(error_reading(tensor_pickle(16, 1, 1, 20)).find("reaches past its storage of 64 bytes"), std::string::npos);
  // Every message names the file.
  EXPECT_NE(error_reading(kProto + "}s.").find("model_optim_rng.pt is not a readable torch.save archive"),
            std::string::npos);
}

TEST(Serialization, SharedValuesAreWalkedOnce) {
  // 60 levels of pairs each holding the one below twice (a memo GET): 2^60 paths, 61 values.
  std::string pickle("\x80\x02]q\0", 5);
  for (int k = 1; k <= 60; ++k) pickle += std::string("h") + char(k - 1) + "\x86q" + char(k);
  pickle += ".";
  const c10::IValue top = read_archive(archive(pickle));
  EXPECT_EQ(top.toTupleRef().elements().size(), 2u);
}

TEST(Serialization, ATensorIsItsRecordWhateverCountThePickleDeclares) {
  // The pickle claims 100 elements (400 bytes) for a 64-byte record: the storage is the record.
  const at::Tensor t = read_archive(archive(tensor_pickle(100, 16, 1, 0))).toTensor();
  EXPECT_EQ(t.storage().nbytes(), 64u);
  EXPECT_TRUE(t.equal(at::arange(16, at::kFloat)));
  // A view inside the storage: 4 floats from offset 12 with stride 1.
  EXPECT_TRUE(read_archive(archive(tensor_pickle(16, 4, 1, 12))).toTensor().equal(at::arange(12, 16, at::kFloat)));
}

TEST(Serialization, LibTorchsEnforceStillThrows) {
  // A library that clobbers c10's flags (Debian's libsentencepiece defines FLAGS_minloglevel too)
  // turns every CAFFE_ENFORCE in LibTorch's zip reader into an abort instead of an error.
  // (tests/fuzz/corpus/checkpoint/version_not_a_number is such an input: a version record "P".)
  EXPECT_FALSE(FLAGS_caffe2_use_fatal_for_enforce);
}

TEST(Serialization, PythonValuesOfMegatronLmCheckpointsAreRead) {
  // {"args": Namespace(num_layers=4, params_dtype=torch.float32), "big": 2**32 - 1, "negative": -1,
  //  "huge": 2**64, "bytes": b"\xff", "model": OrderedDict(w=1) with _metadata, "backend": AttnBackend(5)},
  // as Python's pickle (protocol 2) writes each.
  const std::string pickle =
      "\x80\x02}(" + text("args") + "cargparse\nNamespace\n)\x81}(" + text("num_layers") + small(4) +
      text("params_dtype") + "ctorch\nfloat32\nub" + text("big") + std::string("\x8a\x05\xff\xff\xff\xff\x00", 7) +
      text("negative") + "\x8a\x01\xff" + text("huge") + std::string("\x8a\x09\0\0\0\0\0\0\0\0\x01", 11) +
      text("bytes") + "c_codecs\nencode\n(" + text("\xc3\xbf") + text("latin1") + "tR" + text("model") +
      "ccollections\nOrderedDict\n)R(" + text("w") + small(1) + "u}(" + text("_metadata") + "Nub" + text("backend") +
      "cmegatron.core.transformer.enums\nAttnBackend\n(" + small(5) + "tRu.";
  const auto top = read_archive(archive(pickle)).toGenericDict();
  const auto args = top.at("args").toGenericDict();
  EXPECT_EQ(args.at("__class__").toStringRef(), "argparse.Namespace");
  EXPECT_EQ(args.at("num_layers").toInt(), 4);
  EXPECT_EQ(args.at("params_dtype").toStringRef(), "torch.float32");
  EXPECT_EQ(top.at("big").toInt(), 4294967295);
  EXPECT_EQ(top.at("negative").toInt(), -1);
  EXPECT_EQ(top.at("huge").toDouble(), 18446744073709551616.0);
  EXPECT_EQ(top.at("bytes").toStringRef(), "\xff");
  const auto model = top.at("model").toGenericDict();
  EXPECT_EQ(model.size(), 1u);
  EXPECT_EQ(model.at("w").toInt(), 1);
  const auto backend = top.at("backend").toGenericDict();
  EXPECT_EQ(backend.at("__class__").toStringRef(), "megatron.core.transformer.enums.AttnBackend");
  EXPECT_EQ(backend.at("__args__").toTupleRef().elements().at(0).toInt(), 5);
}

}  // namespace
