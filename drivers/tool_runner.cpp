#include "drivers/tool_runner.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <boost/process.hpp>
#include <boost/process/extend.hpp>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

namespace hwfarm::drivers {
namespace bp = boost::process;

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

// The last `bytes` of what was written to `path` after `from`.
std::string tailOf(const std::string& path, size_t bytes, std::streamoff from) {
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

} // namespace

std::string ToolResult::describe() const {
  std::ostringstream out;
  if (!started) out << error;
  else if (timed_out) out << "killed after its " << seconds << " s timeout";
  else if (signal) out << "killed by signal " << signal << " (" << strsignal(signal) << ")";
  else out << "exited with status " << exit_code;
  return out.str();
}

ToolResult runTool(const std::vector<std::string>& argv, const ToolOptions& options) {
  ToolResult result;
  if (argv.empty() || argv[0].empty()) {
    result.error = "no program to run";
    return result;
  }
  boost::filesystem::path program = argv[0];
  if (argv[0].find('/') == std::string::npos) program = bp::search_path(argv[0]);
  if (program.empty() || ::access(program.c_str(), X_OK) != 0) {
    result.error = "tool \"" + argv[0] + "\" not found" +
                   (argv[0].find('/') == std::string::npos ? " in PATH" : "") + " or not executable";
    return result;
  }
  FILE* log = std::fopen(options.log_path.empty() ? "/dev/null" : options.log_path.c_str(), "ae");
  if (!log) {
    result.error = "cannot open log " + options.log_path + ": " + std::strerror(errno);
    return result;
  }
  std::vector<std::string> args(argv.begin() + 1, argv.end());
  std::fseek(log, 0, SEEK_END);
  std::streamoff log_start = std::ftell(log); // the tail covers this run only
  auto start = std::chrono::steady_clock::now();
  std::error_code ec;
  bp::child child(program, bp::args(args), (bp::std_out & bp::std_err) > log, bp::std_in < bp::null,
                  bp::extend::on_exec_setup([](auto&) {
                    ::setpgid(0, 0); // its own group: the deadline kills every descendant
                    sigset_t none;
                    sigemptyset(&none);
                    ::sigprocmask(SIG_SETMASK, &none, nullptr);
                  }),
                  ec);
  std::fclose(log); // the child has its own copy
  if (ec) {
    result.error = "cannot start \"" + argv[0] + "\": " + ec.message();
    return result;
  }
  result.started = true;
  pid_t pid = child.id();
  int pidfd = static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
  bool exited = pidfd >= 0 ? waitExit(pidfd, options.timeout) : (child.wait_for(options.timeout), !child.running());
  if (!exited) {
    result.timed_out = true;
    ::kill(-pid, SIGTERM);
    if (pidfd < 0 || !waitExit(pidfd, options.kill_grace)) ::kill(-pid, SIGKILL);
  }
  child.wait(ec);
  // Whatever the tool left behind in its group goes with it.
  ::kill(-pid, SIGKILL);
  if (pidfd >= 0) ::close(pidfd);
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  int native = child.native_exit_code();
  if (WIFEXITED(native)) result.exit_code = WEXITSTATUS(native);
  else if (WIFSIGNALED(native)) result.signal = WTERMSIG(native);
  if (result.timed_out) result.seconds = std::chrono::duration<double>(options.timeout).count();
  if (!options.log_path.empty()) result.output_tail = tailOf(options.log_path, options.tail_bytes, log_start);
  return result;
}

} // namespace hwfarm::drivers
