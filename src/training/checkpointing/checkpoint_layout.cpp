// Iteration and rank folder names, the tracker file, and publishing a staged iteration.
#include "megatron/training/checkpoint_layout.h"

#include <c10/util/Exception.h>

#include <fcntl.h>
#include <stdio.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <regex>
#include <set>

#include "input_files.h"
#include "megatron/comm/launcher_env.h"
#include "megatron/training/checkpoint_files.h"
#include "megatron/training/fault_injection.h"
#include "training/checkpointing/paths.h"

namespace megatron::training {
namespace fs = std::filesystem;
namespace {
using detail::errno_text;
using detail::join;

}  // namespace

std::string iteration_dir_name(std::optional<int64_t> iteration) {
  if (!iteration) return "release";
  char buf[32];
  std::snprintf(buf, sizeof(buf), "iter_%07lld", static_cast<long long>(*iteration));
  return buf;
}

std::string rank_dir_name(int tp_rank, int pp_rank, int pp_size, int ep_rank, int ep_size) {
  char buf[48];
  int n = std::snprintf(buf, sizeof(buf), "mp_rank_%02d", tp_rank);
  if (pp_size > 1) n += std::snprintf(buf + n, sizeof(buf) - n, "_%03d", pp_rank);
  if (ep_size > 1) std::snprintf(buf + n, sizeof(buf) - n, "_%03d", ep_rank);
  return buf;
}

std::optional<TrackerEntry> read_tracker(const std::string& dir) {
  const std::string path = join(dir, kTrackerFileName);
  std::error_code ec;
  if (!fs::exists(path, ec)) return std::nullopt;
  // A tracker holds one number; more than a page of it is not a tracker.
  std::string text = megatron::detail::read_whole_file(path, "[checkpointing] " + path, 4096);
  text.erase(text.find_last_not_of(" \n\r\t") + 1);
  if (text == "release") return TrackerEntry{std::nullopt};
  const bool number = !text.empty() && text.size() <= 18 && std::all_of(text.begin(), text.end(), ::isdigit);
  TORCH_CHECK(number, "[checkpointing] ", path, " should hold an iteration number or 'release', found '",
              text.size() > 40 ? text.substr(0, 40) + "..." : text, "'");
  return TrackerEntry{std::stoll(text)};
}

std::vector<int64_t> list_iterations(const std::string& dir) {
  std::vector<int64_t> out;
  static const std::regex pattern("iter_([0-9]{7,})");
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    std::smatch m;
    const std::string name = e.path().filename().string();
    if (e.is_directory() && std::regex_match(name, m, pattern)) out.push_back(std::stoll(m[1]));
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::string first_rank_dir(const std::string& iter_dir) {
  // Without pipeline or expert parallelism, with one of them, with both.
  for (const auto& name : {rank_dir_name(0, 0, 1), rank_dir_name(0, 0, 2), rank_dir_name(0, 0, 2, 0, 2)})
    if (fs::is_directory(fs::path(iter_dir) / name)) return (fs::path(iter_dir) / name).string();
  return (fs::path(iter_dir) / rank_dir_name(0, 0, 2)).string();
}

std::string describe_layout(const std::string& iter_dir) {
  std::set<std::string> names;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(iter_dir, ec))
    if (e.path().filename().string().rfind("mp_rank_", 0) == 0) names.insert(e.path().filename().string());
  if (names.empty()) return "no mp_rank_* folders";
  // mp_rank_TT[_PPP][_EEE]: with one suffix the folder names alone do not say PP from EP.
  std::set<std::string> tp, pp, ep;
  for (const auto& n : names) {
    tp.insert(n.substr(8, 2));
    if (n.size() > 10) pp.insert(n.substr(11, 3));
    if (n.size() > 14) ep.insert(n.substr(15));
  }
  return "TP " + std::to_string(tp.size()) + ", PP " + std::to_string(std::max<size_t>(1, pp.size())) +
         (ep.empty() ? std::string() : ", EP " + std::to_string(ep.size())) + " (" + *names.begin() +
         (names.size() > 1 ? " ... " + *names.rbegin() : "") + ")";
}

void write_tracker(const std::string& dir, std::optional<int64_t> iteration) {
  const std::string path = join(dir, kTrackerFileName), tmp = path + ".tmp";
  write_text_file(tmp, iteration ? std::to_string(*iteration) : "release");
  fault_point("save:tracker_tmp", comm::LauncherEnv::from_environment().rank);
  TORCH_CHECK(std::rename(tmp.c_str(), path.c_str()) == 0, "[checkpointing] cannot rename ", tmp, " to ", path, ": ",
              errno_text());
  fsync_dir(dir);
}

void publish_checkpoint(const std::string& dir, std::optional<int64_t> iteration, int64_t keep_last,
                        std::optional<int64_t> retain_interval) {
  const int rank = comm::LauncherEnv::from_environment().rank;
  const std::string final_dir = join(dir, iteration_dir_name(iteration)), staging = final_dir + ".tmp";
  fsync_dir(staging);
  fault_point("save:before_publish", rank);
  if (fs::exists(final_dir)) {
    // Re-saving an iteration: swap the folders atomically, so one complete copy always has the name.
    if (::renameat2(AT_FDCWD, staging.c_str(), AT_FDCWD, final_dir.c_str(), RENAME_EXCHANGE) != 0) {
      TORCH_CHECK(errno == EINVAL || errno == ENOSYS, "[checkpointing] cannot replace ", final_dir, " with ", staging,
                  ": ", errno_text());
      const std::string old = final_dir + ".old";  // a file system without RENAME_EXCHANGE
      remove_tree(old);
      fs::rename(final_dir, old);
      fs::rename(staging, final_dir);
      fs::rename(old, staging);
    }
    remove_tree(staging);  // the previous copy
  } else {
    fs::rename(staging, final_dir);
  }
  fsync_dir(dir);
  fault_point("save:before_tracker", rank);
  write_tracker(dir, iteration);
  if ((keep_last <= 0 && !retain_interval) || !iteration) return;
  // Older checkpoints off the retain interval, then beyond the newest keep_last; later iterations
  // (another history) stay.
  std::vector<int64_t> older, doomed_ones;
  for (int64_t it : list_iterations(dir)) {
    if (it >= *iteration) continue;
    (retain_interval && it % *retain_interval != 0 ? doomed_ones : older).push_back(it);
  }
  const int64_t beyond = keep_last > 0 ? static_cast<int64_t>(older.size()) - (keep_last - 1) : 0;
  for (int64_t i = 0; i < beyond; ++i) doomed_ones.push_back(older[i]);
  for (int64_t it : doomed_ones) {
    const std::string victim = join(dir, iteration_dir_name(it));
    const std::string doomed = victim + ".deleting";  // never a half-deleted folder under a valid name
    remove_tree(doomed);
    fs::rename(victim, doomed);
    remove_tree(doomed);
  }
}

SaveDirLock::SaveDirLock(const std::string& dir) {
  fs::create_directories(dir);
  const std::string path = join(dir, kSaveLockFileName);
  fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  TORCH_CHECK(fd_ >= 0, "[checkpointing] cannot create ", path, ": ", errno_text());
  if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
    const int error = errno;
    char holder[256] = {};
    const ssize_t n = ::pread(fd_, holder, sizeof holder - 1, 0);
    ::close(fd_);
    fd_ = -1;
    std::string who(holder, n > 0 ? static_cast<size_t>(n) : 0);
    who.erase(who.find_last_not_of(" \n") + 1);
    TORCH_CHECK(error != EWOULDBLOCK, "[checkpointing] --save ", dir, " is in use by another run (",
                who.empty() ? "holder unknown" : who, ", ", path,
                "); two runs saving into one folder would replace each other's checkpoints");
    TORCH_CHECK(false, "[checkpointing] cannot lock ", path, ": ", std::strerror(error));
  }
  char host[128] = {};
  ::gethostname(host, sizeof host - 1);
  const std::string who = "pid " + std::to_string(::getpid()) + " on " + host + "\n";
  if (::ftruncate(fd_, 0) == 0 && ::pwrite(fd_, who.data(), who.size(), 0) < 0) {
    // The lock holds without the note; the note only names the holder in another run's error.
  }
}

SaveDirLock::~SaveDirLock() {
  if (fd_ >= 0) ::close(fd_);  // releases the flock; the file stays, stale and free
}

void remove_stale_staging(const std::string& dir) {
  for (const auto& e : fs::directory_iterator(dir)) {  // leftovers of interrupted saves
    const std::string name = e.path().filename().string();
    const bool stale = name.size() > 4 && (name.compare(name.size() - 4, 4, ".tmp") == 0 ||
                                           (name.size() > 9 && name.compare(name.size() - 9, 9, ".deleting") == 0));
    if (e.is_directory() && name.rfind("iter_", 0) == 0 && stale) remove_tree(e.path());
  }
}

}  // namespace megatron::training
