// The daemon's state directory and its exclusive lock.
#pragma once

#include <string>

namespace hwfarm {

// Creates `path` (and parents, mode 0750) if missing and takes an exclusive
// lock on `path`/hwfarmd.lock, holding it until destruction, so two daemons
// never share one state directory. Throws std::runtime_error with the reason
// (including the pid of the holder) on failure.
class StateDirLock {
 public:
  explicit StateDirLock(const std::string& path);
  ~StateDirLock();
  StateDirLock(const StateDirLock&) = delete;
  StateDirLock& operator=(const StateDirLock&) = delete;

  const std::string& path() const { return path_; }

 private:
  std::string path_;
  int fd_ = -1;
};

} // namespace hwfarm
