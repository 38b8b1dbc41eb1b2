#include "training/checkpointing/integrity.h"

#include <c10/util/Exception.h>

#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>

#include "input_files.h"
#include "megatron/training/checkpoint_files.h"
#include "training/checkpointing/sha256.h"

namespace megatron::training::detail {
namespace fs = std::filesystem;

void save_integrity_manifest(const std::string& dir) {
  std::map<std::string, std::string> files;  // sorted by name, as megatron-core lists them
  for (const auto& entry : fs::directory_iterator(dir))
    if (entry.is_regular_file() && entry.path().filename() != kIntegrityFileName)
      files[entry.path().filename().string()] = sha256_of_file(entry.path().string());
  nlohmann::json manifest = {{"algorithm", "sha256"}, {"files", files}};
  write_text_file((fs::path(dir) / kIntegrityFileName).string(), manifest.dump(2));
}

void verify_integrity_manifest(const std::string& dir) {
  const std::string path = (fs::path(dir) / kIntegrityFileName).string();
  TORCH_CHECK(fs::exists(path), "[checkpointing] --verify-integrity: ", path,
              " does not exist (the checkpoint was saved without --verify-integrity)");
  const auto manifest = megatron::detail::parse_json(megatron::detail::read_whole_file(path, path, 1 << 26), path);
  TORCH_CHECK(manifest.is_object() && manifest.value("algorithm", "") == "sha256" && manifest.contains("files") &&
                  manifest.at("files").is_object(),
              "[checkpointing] ", path, ": expected {\"algorithm\": \"sha256\", \"files\": {...}}");
  std::string mismatches;
  int bad = 0;
  for (const auto& [name, digest] : manifest.at("files").items()) {
    const fs::path file = fs::path(dir) / name;
    const std::string expected = digest.is_string() ? digest.get<std::string>() : digest.dump();
    // A name that leaves the folder counts as missing; it is not followed.
    if (name.find('/') != std::string::npos || name == ".." || !fs::is_regular_file(file)) {
      ++bad;
      mismatches += "\n  " + name + ": missing";
      continue;
    }
    const std::string actual = sha256_of_file(file.string());
    if (actual == expected) continue;
    ++bad;
    mismatches += "\n  " + name + ": hash mismatch (expected " + expected.substr(0, 16) + "..., got " +
                  actual.substr(0, 16) + "...)";
  }
  TORCH_CHECK(bad == 0, "[checkpointing] --verify-integrity: ", bad, " file(s) of ", dir,
              " differ from integrity.json:", mismatches);
}

}  // namespace megatron::training::detail
