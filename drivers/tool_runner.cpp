#include "drivers/tool_runner.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>

#include "drivers/spawn.h"

namespace hwfarm::drivers {

namespace {

// Waits for `pid` to exit, event driven (a pidfd), up to `timeout`.
bool waitExit(int pidfd, std::chrono::milliseconds timeout) {
  pollfd p{pidfd, POLLIN, 0};
  int rc;
  do {
    rc = ::poll(&p, 1, static_cast<int>(timeout.count()));
  } while (rc < 0 && errno == EINTR);
  return rc > 0;
}

// The same without pidfds (kernels before 5.3): polls without reaping.
bool pollExit(pid_t pid, std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    siginfo_t info{};
    if (::waitid(P_PID, static_cast<id_t>(pid), &info, WEXITED | WNOHANG | WNOWAIT) == 0 && info.si_pid == pid)
      return true;
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

} // namespace

std::string outputTail(const std::string& path, size_t bytes, std::streamoff from) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) return "";
  std::streamoff size = in.tellg();
  std::streamoff start = size > static_cast<std::streamoff>(bytes) ? size - static_cast<std::streamoff>(bytes) : 0;
  start = std::max(start, std::min(from, size));
  in.seekg(start);
  std::string out(static_cast<size_t>(size - start), '\0');
  in.read(out.data(), static_cast<std::streamsize>(out.size()));
  if (start > from) {
    size_t newline = out.find('\n');
    if (newline != std::string::npos) out = out.substr(newline + 1);
  }
  return out;
}

std::string ToolResult::describe() const {
  std::ostringstream out;
  if (!started) out << start_error.message();
  else if (timed_out) out << "killed after its " << seconds << " s timeout";
  else if (signal) out << "killed by signal " << signal << " (" << strsignal(signal) << ")";
  else out << "exited with status " << exit_code;
  return out.str();
}

Status ToolResult::toStatus(const std::string& prefix) const {
  if (ok()) return Status::success();
  std::string message = prefix + describe() + (output_tail.empty() ? "" : "; output: " + output_tail);
  if (!started)
    return Status::infrastructure(start_error.ok() ? Code::internal : start_error.code(), std::move(message));
  Evidence evidence;
  if (signal == 0 && !timed_out) evidence.exit_code = exit_code;
  evidence.signal = signal;
  evidence.tool_output = output_tail;
  return Status::infrastructure(timed_out ? Code::timeout : Code::io_error, std::move(message), std::move(evidence));
}

ToolResult runTool(const std::vector<std::string>& argv, const ToolOptions& options) {
  ToolResult result;
  if (argv.empty() || argv[0].empty()) {
    result.start_error = Status::infrastructure(Code::invalid_argument, "no program to run");
    return result;
  }
  std::string program = findProgram(argv[0]);
  if (program.empty()) {
    std::string where = argv[0].find('/') == std::string::npos ? " in PATH" : "";
    result.start_error =
        Status::infrastructure(Code::not_found, "tool \"" + argv[0] + "\" not found" + where + " or not executable");
    return result;
  }
  int log = ::open(options.log_path.empty() ? "/dev/null" : options.log_path.c_str(),
                   O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (log < 0) {
    result.start_error = Status::fromErrno("cannot open log " + options.log_path, errno);
    return result;
  }
  std::streamoff log_start = ::lseek(log, 0, SEEK_END); // the tail covers this run only
  auto start = std::chrono::steady_clock::now();
  SpawnOptions spawn;
  spawn.argv = argv;
  spawn.argv[0] = program;
  spawn.stdout_fd = log;
  spawn.stderr_fd = log;
  spawn.what = options.what;
  Result<pid_t> child = spawnProcess(spawn);
  ::close(log); // the child has its own copy
  if (!child) {
    result.start_error = std::move(child).takeStatus().withContext("cannot start \"" + argv[0] + "\"");
    return result;
  }
  result.started = true;
  pid_t pid = *child;
  // The child is unreaped until killGroupAndReap, so the pidfd names it.
  int pidfd = static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
  bool exited = pidfd >= 0 ? waitExit(pidfd, options.timeout) : pollExit(pid, options.timeout);
  if (!exited) {
    result.timed_out = true;
    ::kill(-pid, SIGTERM);
    bool gone = pidfd >= 0 ? waitExit(pidfd, options.kill_grace) : pollExit(pid, options.kill_grace);
    if (!gone) ::kill(-pid, SIGKILL);
  }
  // Whatever the tool left behind in its group goes with it, killed before
  // the tool is reaped (after that, its pid could name another process).
  int native = killGroupAndReap(pid);
  if (pidfd >= 0) ::close(pidfd);
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (WIFEXITED(native)) result.exit_code = WEXITSTATUS(native);
  else if (WIFSIGNALED(native)) result.signal = WTERMSIG(native);
  if (result.timed_out) result.seconds = std::chrono::duration<double>(options.timeout).count();
  if (!options.log_path.empty()) result.output_tail = outputTail(options.log_path, options.tail_bytes, log_start);
  return result;
}

} // namespace hwfarm::drivers
