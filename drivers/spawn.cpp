#include "drivers/spawn.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>

#include "drivers/reaper.h"

namespace hwfarm::drivers {
namespace {

// Closes [from, to] in the child: close_range when the kernel has it (5.9+),
// otherwise one by one up to `limit`.
void closeRange(int from, int to, int limit) {
  if (from > to) return;
  if (::syscall(SYS_close_range, static_cast<unsigned>(from), static_cast<unsigned>(to), 0u) == 0) return;
  for (int fd = from; fd <= to && fd < limit; ++fd) ::close(fd);
}

[[noreturn]] void childFails(int report_fd, int error) {
  if (::write(report_fd, &error, sizeof error) < 0) {
    // The parent then sees the child exit 127 without a report.
  }
  ::_exit(127);
}

} // namespace

std::string findProgram(const std::string& program) {
  if (program.empty()) return "";
  if (program.find('/') != std::string::npos) return ::access(program.c_str(), X_OK) == 0 ? program : "";
  const char* path = std::getenv("PATH");
  std::string dirs = path ? path : "/usr/local/bin:/usr/bin:/bin";
  for (size_t start = 0; start <= dirs.size();) {
    size_t end = dirs.find(':', start);
    if (end == std::string::npos) end = dirs.size();
    std::string dir = dirs.substr(start, end - start);
    std::string candidate = (dir.empty() ? "." : dir) + "/" + program;
    if (::access(candidate.c_str(), X_OK) == 0) return candidate;
    start = end + 1;
  }
  return "";
}

Result<pid_t> spawnProcess(const SpawnOptions& options) {
  if (options.argv.empty() || options.argv[0].empty())
    return Status::infrastructure(Code::invalid_argument, "no program to run");
  std::vector<std::string> argv = options.argv;
  std::vector<char*> args;
  for (auto& a : argv) args.push_back(a.data());
  args.push_back(nullptr);
  std::vector<std::string> environment = options.environment ? *options.environment : childEnvironment(options.what);
  std::vector<char*> envp;
  for (auto& e : environment) envp.push_back(e.data());
  envp.push_back(nullptr);
  int null_fd = ::open("/dev/null", O_RDWR | O_CLOEXEC);
  int report[2];
  if (null_fd < 0 || ::pipe2(report, O_CLOEXEC) != 0) {
    Status failed = Status::fromErrno("cannot start " + argv[0], errno);
    if (null_fd >= 0) ::close(null_fd);
    return failed;
  }
  int in = options.stdin_fd >= 0 ? options.stdin_fd : null_fd;
  int out = options.stdout_fd >= 0 ? options.stdout_fd : null_fd;
  int err = options.stderr_fd >= 0 ? options.stderr_fd : null_fd;
  // The descriptors that survive: the passed ones, and the report pipe until exec.
  std::vector<int> keep = options.keep_fds;
  keep.push_back(report[1]);
  std::sort(keep.begin(), keep.end());
  keep.erase(std::unique(keep.begin(), keep.end()), keep.end());
  // Renumbered: each moved above the target range first (a source may sit
  // at another's target), then onto its target; written by the child only.
  std::vector<int> moved(options.renumber_keep_fds ? options.keep_fds.size() : 0, -1);
  rlimit nofile{};
  int limit = ::getrlimit(RLIMIT_NOFILE, &nofile) == 0 && nofile.rlim_cur != RLIM_INFINITY
                  ? static_cast<int>(std::min<rlim_t>(nofile.rlim_cur, 1 << 20))
                  : 1 << 20;
  pid_t pid = ::fork();
  if (pid < 0) {
    Status failed = Status::fromErrno("fork", errno);
    ::close(report[0]);
    ::close(report[1]);
    ::close(null_fd);
    return failed;
  }
  if (pid == 0) {
    // Its own group: killing the group kills every descendant. No
    // PR_SET_PDEATHSIG: it follows the thread that forked, not hwfarmd
    // (drivers/reaper.h stops children when hwfarmd dies).
    ::setpgid(0, 0);
    // stdio first (dup2 clears close-on-exec on 0-2), from descriptors that
    // may themselves be 0-2.
    if (::dup2(in, 0) < 0 || ::dup2(out, 1) < 0 || ::dup2(err, 2) < 0) childFails(report[1], errno);
    if (!moved.empty()) {
      int top = 3 + static_cast<int>(moved.size());
      int report_fd = ::fcntl(report[1], F_DUPFD_CLOEXEC, top);
      if (report_fd < 0) childFails(report[1], errno);
      for (size_t i = 0; i < moved.size(); ++i)
        if ((moved[i] = ::fcntl(options.keep_fds[i], F_DUPFD_CLOEXEC, top)) < 0) childFails(report_fd, errno);
      for (size_t i = 0; i < moved.size(); ++i) // dup2 clears close-on-exec
        if (::dup2(moved[i], 3 + static_cast<int>(i)) < 0) childFails(report_fd, errno);
      closeRange(top, report_fd - 1, limit);
      closeRange(report_fd + 1, ~0U >> 1, limit);
      report[1] = report_fd;
    } else {
      int from = 3;
      for (int fd : keep) {
        if (fd < 3) continue;
        closeRange(from, fd - 1, limit);
        from = fd + 1;
      }
      closeRange(from, ~0U >> 1, limit);
      for (int fd : options.keep_fds)
        if (fd > 2) ::fcntl(fd, F_SETFD, 0);
    }
    struct sigaction dfl {};
    dfl.sa_handler = SIG_DFL;
    for (int sig = 1; sig < NSIG; ++sig) ::sigaction(sig, &dfl, nullptr); // SIGKILL/SIGSTOP just fail
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    ::execve(args[0], args.data(), envp.data());
    childFails(report[1], errno);
  }
  ::close(report[1]);
  ::close(null_fd);
  int child_errno = 0;
  ssize_t n;
  do {
    n = ::read(report[0], &child_errno, sizeof child_errno);
  } while (n < 0 && errno == EINTR);
  ::close(report[0]);
  if (n == sizeof child_errno) {
    int status;
    while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    return Status::fromErrno("cannot run " + argv[0], child_errno);
  }
  return pid;
}

int killGroupAndReap(pid_t pid) {
  siginfo_t info{};
  // WNOWAIT: the child stays a zombie, so neither its pid nor its process
  // group id can be given to another process before the group is killed.
  while (::waitid(P_PID, static_cast<id_t>(pid), &info, WEXITED | WNOWAIT) < 0 && errno == EINTR) {
  }
  ::kill(-pid, SIGKILL); // whatever it left behind in its group
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return status;
}

} // namespace hwfarm::drivers
