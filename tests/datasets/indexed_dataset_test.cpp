#include "megatron/datasets/indexed_dataset.h"

#include "datasets/test_util.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <sys/stat.h>
#include <unistd.h>
#include <cstring>
#include <random>

namespace megatron::datasets {
namespace {

using testing::error_of;
using ::testing::HasSubstr;
using testing::make_temp_dir;
using testing::read_bytes;
using testing::write_bytes;

bool exists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

// Three documents: {1,2,3}, {4} + {5,6} (two sequences), {} (empty).
std::string write_small(const std::string& dir, DType dtype = DType::kUInt16) {
  const std::string prefix = dir + "/small";
  IndexedDatasetBuilder builder(bin_path(prefix), dtype);
  builder.add_item(std::vector<int32_t>{1, 2, 3});
  builder.end_document();
  builder.add_document({4, 5, 6}, {1, 2});
  builder.end_document();
  builder.finalize(idx_path(prefix));
  return prefix;
}

TEST(IndexedDataset, RoundTripAndHeaderBytes) {
  const std::string prefix = write_small(make_temp_dir());
  IndexedDataset ds(prefix);
  EXPECT_EQ(ds.dtype(), DType::kUInt16);
  EXPECT_EQ(ds.num_sequences(), 3);
  EXPECT_EQ(ds.num_documents(), 3);
  EXPECT_EQ(ds.num_tokens(), 6);
  EXPECT_EQ(ds.get(0).to_vector(), (std::vector<int64_t>{1, 2, 3}));
  EXPECT_EQ(ds.get(2).to_vector(), (std::vector<int64_t>{5, 6}));
  EXPECT_EQ(ds.get(0, 1, 1).to_vector(), (std::vector<int64_t>{2}));
  EXPECT_EQ(ds.get(0, 1).to_vector(), (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(ds.get_document(1).to_vector(), (std::vector<int64_t>{4, 5, 6}));
  EXPECT_EQ(ds.get_document(2).size, 0);
  // Spec bytes: magic, version 1, dtype code 8, S = 3, D = 4 (leading 0 + three ends).
  auto idx = read_bytes(idx_path(prefix));
  ASSERT_EQ(idx.size(), 34u + 3 * 4 + 3 * 8 + 4 * 8);
  EXPECT_EQ(std::memcmp(idx.data(), "MMIDIDX\0\0", 9), 0);
  uint64_t version, s, d;
  std::memcpy(&version, idx.data() + 9, 8);
  std::memcpy(&s, idx.data() + 18, 8);
  std::memcpy(&d, idx.data() + 26, 8);
  EXPECT_EQ(version, 1u);
  EXPECT_EQ(idx[17], 8);
  EXPECT_EQ(s, 3u);
  EXPECT_EQ(d, 4u);
  int64_t docs[4];
  std::memcpy(docs, idx.data() + 34 + 12 * 3, 32);
  EXPECT_EQ(std::vector<int64_t>(docs, docs + 4), (std::vector<int64_t>{0, 1, 3, 3}));
  EXPECT_EQ(read_bytes(bin_path(prefix)).size(), 12u);  // six uint16 tokens
}

TEST(IndexedDataset, OptimalDtypeFollowsMegatron) {
  EXPECT_EQ(optimal_dtype(50257), DType::kUInt16);
  EXPECT_EQ(optimal_dtype(65499), DType::kUInt16);
  EXPECT_EQ(optimal_dtype(65500), DType::kInt32);
  EXPECT_EQ(optimal_dtype(128256), DType::kInt32);
}

TEST(IndexedDataset, BuilderRefusesTokensThatDoNotFit) {
  const std::string dir = make_temp_dir();
  IndexedDatasetBuilder builder(dir + "/x.bin", DType::kUInt16);
  const auto msg = error_of([&] { builder.add_item(std::vector<int32_t>{1, 70000}); });
  EXPECT_THAT(msg, HasSubstr("token id 70000"));
  EXPECT_THAT(msg, HasSubstr("uint16"));
  EXPECT_THAT(error_of([&] { builder.add_item(std::vector<int32_t>{-1}); }), HasSubstr("token id -1"));
}

TEST(IndexedDataset, OutputsAppearOnlyAtFinalize) {
  const std::string dir = make_temp_dir();
  const std::string prefix = dir + "/atomic";
  {
    IndexedDatasetBuilder builder(bin_path(prefix), DType::kInt32);
    builder.add_item(std::vector<int32_t>{7, 8});
    builder.end_document();
    EXPECT_FALSE(exists(bin_path(prefix)));
    EXPECT_FALSE(exists(idx_path(prefix)));
  }  // abandoned: the temporary file goes too
  EXPECT_FALSE(exists(bin_path(prefix)));
  EXPECT_EQ(std::system(("test -z \"$(ls " + dir + ")\"").c_str()), 0);
}

TEST(IndexedDataset, MergeAppendsIndicesAndData) {
  const std::string dir = make_temp_dir();
  const std::string a = write_small(dir);
  const std::string b = dir + "/b";
  {
    IndexedDatasetBuilder builder(bin_path(b), DType::kUInt16);
    builder.add_item(std::vector<int32_t>{9, 10});
    builder.end_document();
    builder.finalize(idx_path(b));
  }
  const std::string merged = dir + "/merged";
  IndexedDatasetBuilder builder(bin_path(merged), DType::kUInt16);
  builder.add_index(a);
  builder.add_index(b);
  builder.finalize(idx_path(merged));
  IndexedDataset ds(merged);
  EXPECT_EQ(ds.num_sequences(), 4);
  EXPECT_EQ(ds.num_documents(), 4);
  EXPECT_EQ(ds.get(3).to_vector(), (std::vector<int64_t>{9, 10}));
  EXPECT_EQ(ds.get_document(3).to_vector(), (std::vector<int64_t>{9, 10}));
  EXPECT_EQ(ds.document_indices(), (std::vector<int64_t>{0, 1, 3, 3, 4}));

  IndexedDatasetBuilder wrong(dir + "/w.bin", DType::kInt32);
  EXPECT_THAT(error_of([&] { wrong.add_index(a); }), HasSubstr("expected dtype int32"));
}

class Corruption : public ::testing::Test {
 protected:
  void SetUp() override {
    prefix_ = write_small(make_temp_dir());
    idx_ = read_bytes(idx_path(prefix_));
    bin_ = read_bytes(bin_path(prefix_));
  }
  std::string open_error() {
    write_bytes(idx_path(prefix_), idx_);
    write_bytes(bin_path(prefix_), bin_);
    return error_of([&] { IndexedDataset ds(prefix_); });
  }
  std::string prefix_;
  std::vector<char> idx_, bin_;
};

TEST_F(Corruption, MissingFiles) {
  std::remove(bin_path(prefix_).c_str());
  auto msg = error_of([&] { IndexedDataset ds(prefix_); });
  EXPECT_THAT(msg, HasSubstr(bin_path(prefix_)));
  EXPECT_THAT(msg, HasSubstr("not found"));
  std::remove(idx_path(prefix_).c_str());
  EXPECT_THAT(error_of([&] { IndexedDataset ds(prefix_); }), HasSubstr(".idx"));
}

TEST_F(Corruption, BadMagic) {
  idx_[0] = 'X';
  EXPECT_THAT(open_error(), HasSubstr("magic"));
}

TEST_F(Corruption, BadVersion) {
  idx_[9] = 2;
  EXPECT_THAT(open_error(), HasSubstr("expected version 1, found 2"));
}

TEST_F(Corruption, BadDtypeCode) {
  idx_[17] = 9;
  EXPECT_THAT(open_error(), HasSubstr("dtype code in 1..8, found 9"));
}

TEST_F(Corruption, TruncatedIndex) {
  idx_.resize(idx_.size() - 8);
  EXPECT_THAT(open_error(), AllOf(HasSubstr(".idx"), HasSubstr("bytes")));
  idx_.resize(20);
  EXPECT_THAT(open_error(), HasSubstr("header bytes"));
}

TEST_F(Corruption, TruncatedData) {
  bin_.resize(bin_.size() - 2);
  EXPECT_THAT(open_error(), AllOf(HasSubstr(".bin"), HasSubstr("truncated")));
}

TEST_F(Corruption, DataLongerThanIndex) {
  bin_.push_back(0);
  bin_.push_back(0);
  EXPECT_THAT(open_error(), HasSubstr("mismatch"));
}

TEST_F(Corruption, PointerNotWhereLengthsPutIt) {
  int64_t bad = 4;  // sequence 1 should start at byte 6
  std::memcpy(idx_.data() + 34 + 12 + 8, &bad, 8);
  EXPECT_THAT(open_error(), AllOf(HasSubstr("sequence 1 expected to start at byte 6"), HasSubstr("found 4")));
}

TEST_F(Corruption, NegativeLength) {
  int32_t bad = -3;
  std::memcpy(idx_.data() + 34, &bad, 4);
  EXPECT_THAT(open_error(), HasSubstr("negative length"));
}

TEST_F(Corruption, DocumentIndexDecreasing) {
  int64_t bad = 0;
  std::memcpy(idx_.data() + 34 + 36 + 16, &bad, 8);  // docs {0, 1, 0, 3}
  EXPECT_THAT(open_error(), HasSubstr("non-decreasing"));
}

TEST_F(Corruption, DocumentIndexNotEndingAtSequenceCount) {
  int64_t bad = 2;  // docs {0, 1, 2, 2}
  std::memcpy(idx_.data() + 34 + 36 + 16, &bad, 8);
  std::memcpy(idx_.data() + 34 + 36 + 24, &bad, 8);
  EXPECT_THAT(open_error(), HasSubstr("end at the sequence count 3, found 2"));
}

TEST_F(Corruption, HugeCountsInHeader) {
  uint64_t huge = 1ULL << 60;
  std::memcpy(idx_.data() + 18, &huge, 8);
  EXPECT_THAT(open_error(), HasSubstr("more than"));
}

TEST_F(Corruption, FileReplacedAfterOpen) {
  IndexedDataset ds(prefix_);
  EXPECT_NO_THROW(ds.check_unchanged());
  // Rewrite the .bin with other content of the same size under a new inode.
  std::remove(bin_path(prefix_).c_str());
  write_bytes(bin_path(prefix_), bin_);
  EXPECT_THAT(error_of([&] { ds.check_unchanged(); }), HasSubstr("changed on disk"));
}

TEST(IndexedDataset, DataTruncatedUnderTheMappingIsOneLineNotABusError) {
  const std::string prefix = make_temp_dir() + "/big";
  IndexedDatasetBuilder builder(bin_path(prefix), DType::kInt32);
  std::vector<int32_t> tokens(50000, 7);  // 200 KB: many pages past a truncation to 0
  builder.add_item(tokens);
  builder.end_document();
  builder.finalize(idx_path(prefix));
  EXPECT_EXIT(
      {
        IndexedDataset ds(prefix);
        ::truncate(bin_path(prefix).c_str(), 0);
        volatile int64_t sum = 0;
        for (int64_t t : ds.get(0).to_vector()) sum += t;
      },
      ::testing::ExitedWithCode(1),
      "error: \\[indexed_dataset\\] .*big.bin: reading its memory mapping failed \\(SIGBUS\\): the file was "
      "truncated");
}

TEST_F(Corruption, RandomByteFlipsNeverCrash) {
  // Every corrupted index either opens to a consistent dataset or fails with a c10::Error.
  const auto good = idx_;
  std::mt19937 gen(11);
  int rejected = 0;
  for (int trial = 0; trial < 300; ++trial) {
    idx_ = good;
    const size_t at = gen() % idx_.size();
    idx_[at] = static_cast<char>(idx_[at] ^ (1 + gen() % 255));
    write_bytes(idx_path(prefix_), idx_);
    try {
      IndexedDataset ds(prefix_);
      int64_t total = 0;
      for (int64_t i = 0; i < ds.num_sequences(); ++i) total += ds.get(i).to_vector().size();
      EXPECT_EQ(total, ds.num_tokens());
    } catch (const c10::Error&) {
      ++rejected;
    }
  }
  EXPECT_GT(rejected, 250);
}

// --no-mmap-bin-files: the .bin read with pread gives what the mapping gives, in every dtype.
TEST(IndexedDataset, UnmappedReadsGiveTheMappedTokens) {
  for (DType dtype : {DType::kUInt8, DType::kInt16, DType::kUInt16, DType::kInt32, DType::kInt64}) {
    const std::string prefix = write_small(make_temp_dir(), dtype);
    IndexedDataset mapped(prefix), unmapped(prefix, /*mmap_bin_files=*/false);
    EXPECT_TRUE(mapped.mmap_bin_files());
    EXPECT_FALSE(unmapped.mmap_bin_files());
    for (int64_t i = 0; i < mapped.num_sequences(); ++i)
      for (int64_t offset = 0; offset <= mapped.sequence_length(i); ++offset) {
        const int64_t length = mapped.sequence_length(i) - offset;
        std::vector<int64_t> a(static_cast<size_t>(length) + 1, -1), b(a);
        mapped.read(i, offset, length, a.data());
        unmapped.read(i, offset, -1, b.data());
        EXPECT_EQ(a, b) << dtype_name(dtype) << " sequence " << i << " offset " << offset;
        EXPECT_EQ(a.back(), -1);  // nothing written past the length
      }
    // Values the literal list could not tell apart from 0: compare with what the builder was given.
    std::vector<int64_t> first(3);
    unmapped.read(0, 0, 3, first.data());
    EXPECT_EQ(first, (std::vector<int64_t>{1, 2, 3}));
    EXPECT_THAT(error_of([&] { unmapped.get(0); }), HasSubstr("opened unmapped"));
    EXPECT_THAT(error_of([&] { unmapped.read(3, 0, 1, first.data()); }), HasSubstr("out of range"));
  }
}

TEST(IndexedDataset, UnmappedDataTruncatedAfterOpenIsNamed) {
  const std::string prefix = write_small(make_temp_dir());
  IndexedDataset ds(prefix, /*mmap_bin_files=*/false);
  ::truncate(bin_path(prefix).c_str(), 4);
  std::vector<int64_t> out(2);
  EXPECT_THAT(error_of([&] { ds.read(2, 0, 2, out.data()); }),
              HasSubstr("small.bin: the file ends at byte 8, before the bytes the index points to"));
  EXPECT_THAT(error_of([&] { ds.check_unchanged(); }), HasSubstr("changed on disk"));
}

TEST(IndexedDataset, OutOfRangeReads) {
  IndexedDataset ds(write_small(make_temp_dir()));
  EXPECT_THAT(error_of([&] { ds.get(3); }), HasSubstr("out of range"));
  EXPECT_THAT(error_of([&] { ds.get(0, 2, 5); }), HasSubstr("outside sequence 0"));
}

}  // namespace
}  // namespace megatron::datasets
