#include "daemon/services/open_beneath.h"

#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <string>
#include <vector>

namespace hwfarm {
namespace {

// The components of `path` without empty and "." ones; false (errno EXDEV
// or ENOENT) for a path openBeneath refuses before any lookup.
bool componentsOf(std::string_view path, std::vector<std::string>* parts) {
  if (!path.empty() && path[0] == '/') return errno = EXDEV, false;
  for (size_t start = 0; start <= path.size();) {
    size_t slash = std::min(path.find('/', start), path.size());
    std::string_view part = path.substr(start, slash - start);
    if (part == "..") return errno = EXDEV, false;
    if (!part.empty() && part != ".") parts->emplace_back(part);
    start = slash + 1;
  }
  if (parts->empty()) return errno = ENOENT, false;
  return true;
}

// The errno of a component that could not be opened: ELOOP when it is a
// symlink (opened as a directory with O_NOFOLLOW, the kernel says ENOTDIR).
int walkError(int dir, const std::string& part, int error) {
  struct stat st {};
  if (error == ENOTDIR && ::fstatat(dir, part.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK(st.st_mode))
    return ELOOP;
  return error;
}

// Whether openat2 answered that it is not there to call.
std::atomic<bool> openat2_missing{false};

} // namespace

int openBeneathByWalk(int dir, std::string_view path, int flags) {
  std::vector<std::string> parts;
  if (!componentsOf(path, &parts)) return -1;
  int at = dir;
  auto step = [&](int next, const std::string& part) {
    int error = next < 0 ? walkError(at, part, errno) : 0;
    if (at != dir) ::close(at);
    at = next;
    if (next < 0) errno = error;
    return next >= 0;
  };
  for (size_t i = 0; i + 1 < parts.size(); ++i)
    if (!step(::openat(at, parts[i].c_str(), O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC), parts[i])) return -1;
  step(::openat(at, parts.back().c_str(), flags | O_NOFOLLOW | O_CLOEXEC), parts.back());
  return at;
}

int openBeneath(int dir, std::string_view path, int flags) {
  std::vector<std::string> parts;
  if (!componentsOf(path, &parts)) return -1;
  if (!openat2_missing.load(std::memory_order_relaxed)) {
    open_how how{};
    how.flags = static_cast<uint64_t>(flags | O_CLOEXEC);
    how.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS;
    std::string relative(path);
    long fd = ::syscall(SYS_openat2, dir, relative.c_str(), &how, sizeof how);
    if (fd >= 0 || (errno != ENOSYS && errno != EPERM)) return static_cast<int>(fd);
    openat2_missing = errno == ENOSYS; // EPERM may be this file's: try the walk each time
  }
  return openBeneathByWalk(dir, path, flags);
}

} // namespace hwfarm
