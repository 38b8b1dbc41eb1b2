// Shared by the fuzz targets: inputs become files (the readers take paths), and a rejection must
// be one c10::Error; any other exception escaping a reader is a finding (abort, so that libFuzzer
// and the replay driver both report it).
#pragma once

#include <c10/util/Exception.h>

#include <dirent.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <fstream>
#include <string>

namespace megatron::fuzz {

// A folder of this process's own, made once, reused for every input and removed at exit.
struct WorkDir {
  std::string path;
  WorkDir() {
    std::string pattern = "/tmp/megatron_fuzz_XXXXXX";
    if (::mkdtemp(pattern.data()) == nullptr) std::abort();
    path = pattern;
  }
  ~WorkDir() {  // plain POSIX calls: at exit, LibTorch's copy of std::filesystem may be gone
    if (DIR* dir = ::opendir(path.c_str())) {
      while (const dirent* entry = ::readdir(dir))
        if (std::string(entry->d_name) != "." && std::string(entry->d_name) != "..")
          ::unlink((path + "/" + entry->d_name).c_str());
      ::closedir(dir);
    }
    ::rmdir(path.c_str());
  }
};
inline const std::string& work_dir() {
  static const WorkDir dir;
  return dir.path;
}

inline std::string write_file(const std::string& name, const uint8_t* data, size_t size) {
  const std::string path = work_dir() + "/" + name;
  std::ofstream(path, std::ios::binary | std::ios::trunc)
      .write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  return path;
}

// Runs fn: a c10::Error is a clean rejection; anything else escaping is a crash to report.
template <typename F>
void expect_clean(F&& fn) {
  try {
    fn();
  } catch (const c10::Error&) {
  } catch (const std::exception& e) {
    std::fprintf(stderr, "fuzz: a reader let %s escape instead of one c10::Error\n", e.what());
    std::abort();
  }
}

// The next `n` bytes of the input as a little-endian length, capped at what is left.
inline size_t take_length(const uint8_t*& data, size_t& size, size_t n) {
  size_t length = 0;
  for (size_t i = 0; i < n && i < size; ++i) length |= static_cast<size_t>(data[i]) << (8 * i);
  const size_t used = n < size ? n : size;
  data += used;
  size -= used;
  return length < size ? length : size;
}

// A loaded tokenizer on fuzzed text: every id inside the vocabulary (else a finding), and decodable.
template <typename Tokenizer>
void encode_and_decode(const Tokenizer& tok, const std::string& text) {
  const auto ids = tok.tokenize(text);
  for (int32_t id : ids) {
    if (id < 0 || id >= tok.vocab_size()) std::abort();
  }
  tok.detokenize(ids);
}

}  // namespace megatron::fuzz
