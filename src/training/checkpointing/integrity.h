// --verify-integrity (megatron-core's integrity.json): the SHA-256 of every file of a torch_dist
// checkpoint folder, written by rank 0 once every file is in, and checked by rank 0 on load.
#pragma once

#include <string>

namespace megatron::training::detail {

inline constexpr const char* kIntegrityFileName = "integrity.json";

// {"algorithm": "sha256", "files": {name: hex digest}} over the folder's files, integrity.json aside.
void save_integrity_manifest(const std::string& dir);
// Throws one error naming every file whose digest differs or that is missing, or the manifest's absence.
void verify_integrity_manifest(const std::string& dir);

}  // namespace megatron::training::detail
