// Concatenates Megatron .bin/.idx datasets into one (Megatron-LM's tools/merge_datasets.py):
// every prefix in --input DIR in sorted order, or the --prefixes given, in that order.
#include "cli.h"
#include "megatron/datasets/indexed_dataset.h"

#include <c10/util/Exception.h>

#include <dirent.h>
#include <algorithm>
#include <iostream>
#include <set>
#include <string>
#include <vector>

namespace {

namespace ds = megatron::datasets;

std::vector<std::string> prefixes_in(const std::string& dir) {
  DIR* d = ::opendir(dir.c_str());
  TORCH_CHECK(d != nullptr, "[merge_datasets] --input ", dir, ": not a readable directory");
  std::set<std::string> names;
  while (dirent* e = ::readdir(d)) {
    std::string name = e->d_name;
    for (const char* ext : {".bin", ".idx"}) {
      if (name.size() > 4 && name.compare(name.size() - 4, 4, ext) == 0) {
        names.insert(name.substr(0, name.size() - 4));
      }
    }
  }
  ::closedir(d);
  std::vector<std::string> out;
  for (const auto& n : names) {
    const std::string prefix = dir + "/" + n;
    TORCH_CHECK(ds::indexed_dataset_exists(prefix), "[merge_datasets] ", prefix,
                ": found only one of .bin/.idx; both are needed");
    out.push_back(prefix);
  }
  TORCH_CHECK(!out.empty(), "[merge_datasets] --input ", dir, ": no .bin/.idx pairs found");
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  std::string input, output_prefix;
  std::vector<std::string> prefixes;
  CLI::App app{"Merge Megatron .bin/.idx datasets"};
  auto* in = app.add_option("--input", input, "directory whose .bin/.idx pairs are merged (sorted)");
  auto* pre = app.add_option("--prefixes", prefixes, "dataset prefixes, merged in this order");
  in->excludes(pre);
  app.add_option("--output-prefix", output_prefix, "writes {prefix}.bin/.idx")->required();
  return run_tool(app, "merge_datasets", argc, argv, [&] {
    if (!input.empty()) prefixes = prefixes_in(input);
    TORCH_CHECK(!prefixes.empty(), "[merge_datasets] give --input DIR or --prefixes P...");
    const ds::DType dtype = ds::IndexedDataset(prefixes[0]).dtype();
    ds::IndexedDatasetBuilder builder(ds::bin_path(output_prefix), dtype);
    for (const auto& p : prefixes) builder.add_index(p);
    builder.finalize(ds::idx_path(output_prefix));
    std::cerr << "[merge_datasets] merged " << prefixes.size() << " datasets: " << builder.num_documents()
              << " documents, " << builder.num_sequences() << " sequences into " << output_prefix << "\n";
    return 0;
  });
}
