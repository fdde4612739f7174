#include "drivers/process_table.h"

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <sstream>

namespace hwfarm::drivers {
namespace {

// The whole of a small /proc file ("" when it cannot be read).
std::string readProcFile(pid_t pid, const char* name) {
  std::string path = "/proc/" + std::to_string(pid) + "/" + name;
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return "";
  std::string text;
  char buffer[4096];
  for (;;) {
    ssize_t n = ::read(fd, buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    text.append(buffer, static_cast<size_t>(n));
    if (text.size() > (1u << 20)) break; // an environment is bounded by ARG_MAX; this is plenty
  }
  ::close(fd);
  return text;
}

std::vector<std::string> splitNul(const std::string& text) {
  std::vector<std::string> parts;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\0', start);
    if (end == std::string::npos) end = text.size();
    parts.push_back(text.substr(start, end - start));
    start = end + 1;
  }
  return parts;
}

int pidfdOpen(pid_t pid) { return static_cast<int>(::syscall(SYS_pidfd_open, pid, 0)); }

} // namespace

std::vector<pid_t> listProcesses() {
  std::vector<pid_t> pids;
  DIR* proc = ::opendir("/proc");
  if (!proc) return pids;
  while (dirent* e = ::readdir(proc)) {
    char* end = nullptr;
    long pid = std::strtol(e->d_name, &end, 10);
    if (pid > 0 && end && *end == '\0') pids.push_back(static_cast<pid_t>(pid));
  }
  ::closedir(proc);
  std::sort(pids.begin(), pids.end());
  return pids;
}

std::vector<pid_t> childrenOf(pid_t pid) {
  std::vector<pid_t> children;
  std::string tasks = "/proc/" + std::to_string(pid) + "/task";
  DIR* dir = ::opendir(tasks.c_str());
  if (!dir) return children;
  while (dirent* e = ::readdir(dir)) {
    if (e->d_name[0] == '.') continue;
    std::istringstream list(readProcFile(pid, ("task/" + std::string(e->d_name) + "/children").c_str()));
    for (pid_t child; list >> child;) children.push_back(child);
  }
  ::closedir(dir);
  return children;
}

void signalChildren(pid_t pid, int signal) {
  for (pid_t child : childrenOf(pid))
    if (auto stat = readProcessStat(child); stat && stat->ppid == pid)
      if (auto handle = ProcessHandle::open(child, stat->start_time)) handle->signal(signal);
}

std::optional<ProcessStat> readProcessStat(pid_t pid) {
  std::string text = readProcFile(pid, "stat");
  size_t open = text.find('(');
  size_t close = text.rfind(')');
  if (open == std::string::npos || close == std::string::npos || close < open) return std::nullopt;
  ProcessStat s;
  s.pid = pid;
  s.comm = text.substr(open + 1, close - open - 1);
  // After "(comm) ": state ppid pgrp session tty_nr tpgid flags minflt
  // cminflt majflt cmajflt utime stime cutime cstime priority nice
  // num_threads itrealvalue starttime (field 22 of proc(5)).
  std::istringstream fields(text.substr(close + 1));
  std::string skip;
  fields >> s.state >> s.ppid >> s.pgid;
  for (int i = 0; i < 16; ++i) fields >> skip;
  fields >> s.start_time;
  if (!fields) return std::nullopt;
  return s;
}

std::vector<std::string> processEnvironment(pid_t pid) { return splitNul(readProcFile(pid, "environ")); }

std::vector<std::string> processArguments(pid_t pid) { return splitNul(readProcFile(pid, "cmdline")); }

std::string processCommand(pid_t pid, size_t limit) {
  std::string command;
  for (const auto& arg : processArguments(pid)) command += (command.empty() ? "" : " ") + arg;
  if (command.empty())
    if (auto stat = readProcessStat(pid)) command = "[" + stat->comm + "]";
  if (command.size() > limit) command = command.substr(0, limit) + "…";
  return command;
}

std::string processCwd(pid_t pid) {
  std::string link = "/proc/" + std::to_string(pid) + "/cwd";
  char target[4096];
  ssize_t n = ::readlink(link.c_str(), target, sizeof target - 1);
  return n > 0 ? std::string(target, static_cast<size_t>(n)) : "";
}

ProcessHandle::~ProcessHandle() {
  if (fd_ >= 0) ::close(fd_);
}

ProcessHandle::ProcessHandle(ProcessHandle&& other) noexcept
    : pid_(other.pid_), start_time_(other.start_time_), fd_(other.fd_) {
  other.fd_ = -1;
  other.pid_ = 0;
}

ProcessHandle& ProcessHandle::operator=(ProcessHandle&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    pid_ = other.pid_;
    start_time_ = other.start_time_;
    fd_ = other.fd_;
    other.fd_ = -1;
    other.pid_ = 0;
  }
  return *this;
}

std::optional<ProcessHandle> ProcessHandle::open(pid_t pid, uint64_t start_time) {
  ProcessHandle h;
  h.pid_ = pid;
  h.start_time_ = start_time;
  // -1 when it is gone, and without pidfds (Linux < 5.3, or a seccomp
  // filter that denies them): then the pid and start time are checked again
  // before each signal.
  h.fd_ = pidfdOpen(pid);
  if (h.fd_ < 0 && errno == ESRCH) return std::nullopt;
  // Opened first, checked second: if the pid still has that start time, the
  // descriptor holds that very process (a pid is not reused while it lives).
  auto stat = readProcessStat(pid);
  if (!stat || stat->start_time != start_time || stat->zombie()) return std::nullopt;
  return h;
}

bool ProcessHandle::alive() const {
  if (pid_ <= 0) return false;
  if (fd_ >= 0) {
    pollfd p{fd_, POLLIN, 0};
    return ::poll(&p, 1, 0) == 0; // readable once it has ended
  }
  auto stat = readProcessStat(pid_);
  return stat && stat->start_time == start_time_ && !stat->zombie();
}

bool ProcessHandle::signal(int sig) const {
  if (pid_ <= 0) return false;
  if (fd_ >= 0) return ::syscall(SYS_pidfd_send_signal, fd_, sig, nullptr, 0) == 0;
  return alive() && ::kill(pid_, sig) == 0;
}

} // namespace hwfarm::drivers
