// Reading the system's process table (/proc) without trusting a pid: a pid
// names a process only while that process lives, so every process is
// identified by its pid and its start time, and signalled through a pidfd
// opened while it was verified to be the same process. Used by the reaper
// (drivers/reaper.h) and by tests that look for leaked processes.
//
// Thread safety: any thread; nothing is cached.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace hwfarm::drivers {

struct ProcessStat {
  pid_t pid = 0;
  pid_t ppid = 0;
  pid_t pgid = 0;
  char state = '?';            // 'R', 'S', 'Z' (a zombie: it ended, nobody reaped it yet)...
  uint64_t start_time = 0;     // clock ticks after boot: with the pid, the process's identity
  std::string comm;            // its name, at most 15 bytes
  bool zombie() const { return state == 'Z' || state == 'X'; }
};

// Every pid in /proc now (processes, not threads), ascending.
std::vector<pid_t> listProcesses();
// The children of `pid` (of all its threads), now.
std::vector<pid_t> childrenOf(pid_t pid);
// Sends `signal` to each child of `pid` that is still its child when opened
// (its parent pid checked, then signalled through a ProcessHandle, so a
// recycled pid is never hit). REQUIRES: `pid` is unreaped, or its pid could
// name another process.
void signalChildren(pid_t pid, int signal);
// Its /proc/PID/stat, or nothing when it is gone.
std::optional<ProcessStat> readProcessStat(pid_t pid);
// Its environment ("KEY=VALUE" each) or command line (arguments), as it was
// at exec. Empty when it is gone, a zombie, or not ours to read.
std::vector<std::string> processEnvironment(pid_t pid);
std::vector<std::string> processArguments(pid_t pid);
// Its command line, arguments joined by spaces, cut at `limit` bytes ("…").
std::string processCommand(pid_t pid, size_t limit = 300);
// Where its working directory is ("" when unknown).
std::string processCwd(pid_t pid);

// A process held by a pidfd (or, on kernels without pidfds, by pid and
// start time). Move-only; closes its descriptor.
class ProcessHandle {
 public:
  ProcessHandle() = default;
  ~ProcessHandle();
  ProcessHandle(ProcessHandle&& other) noexcept;
  ProcessHandle& operator=(ProcessHandle&& other) noexcept;
  ProcessHandle(const ProcessHandle&) = delete;
  ProcessHandle& operator=(const ProcessHandle&) = delete;

  // The process `pid` if it is still the one that started at `start_time`
  // and has not ended.
  static std::optional<ProcessHandle> open(pid_t pid, uint64_t start_time);

  pid_t pid() const { return pid_; }
  // True while it has not ended (a zombie has ended).
  bool alive() const;
  // Sends `sig` to it; false when it has ended (never to a recycled pid
  // where pidfds exist).
  bool signal(int sig) const;

 private:
  pid_t pid_ = 0;
  uint64_t start_time_ = 0;
  int fd_ = -1;
};

} // namespace hwfarm::drivers
