// Temporary folders for the C++ tests: unique names under $TMPDIR (or /tmp), deleted with their
// contents when the test binary exits normally, so tests clean up without each doing it.
#pragma once

#include <gtest/gtest.h>

#include <ftw.h>
#include <stdio.h>

#include <cstdlib>
#include <mutex>
#include <string>
#include <vector>

namespace megatron::testing {

class TempDirs {
 public:
  static TempDirs& instance() {
    static TempDirs dirs;
    return dirs;
  }
  std::string make(const std::string& tag) {
    const char* base = std::getenv("TMPDIR");
    std::string templ = std::string(base && *base ? base : "/tmp") + "/megatron_" + tag + ".XXXXXX";
    EXPECT_NE(::mkdtemp(templ.data()), nullptr) << "mkdtemp " << templ;
    std::lock_guard<std::mutex> lock(mutex_);
    made_.push_back(templ);
    return templ;
  }
  ~TempDirs() {
    for (const auto& dir : made_)
      ::nftw(
          dir.c_str(), [](const char* p, const struct stat*, int, struct FTW*) { return ::remove(p); }, 16,
          FTW_DEPTH | FTW_PHYS);
  }

 private:
  std::mutex mutex_;
  std::vector<std::string> made_;
};

// A fresh folder, deleted at exit.
inline std::string make_temp_dir(const std::string& tag = "test") {
  return TempDirs::instance().make(tag);
}

}  // namespace megatron::testing
