#include "drivers/reaper.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include "drivers/process_table.h"

extern char** environ;

namespace hwfarm::drivers {
namespace {

std::mutex owner_mutex;
std::string owner; // guarded by owner_mutex: HWFARM_OWNER's value, "" until set

// The reaper this process started, and its end of the pipe the reaper waits on.
std::mutex reaper_mutex;
pid_t reaper_pid = -1;  // guarded by reaper_mutex
int reaper_pipe = -1;   // guarded by reaper_mutex

bool hasMark(const std::string& entry, const char* key) {
  size_t n = std::char_traits<char>::length(key);
  return entry.size() > n && entry.compare(0, n, key) == 0 && entry[n] == '=';
}

bool isMark(const std::string& entry) {
  return hasMark(entry, kInstanceMark) || hasMark(entry, kOwnerMark) || hasMark(entry, kChildMark);
}

std::string markValue(const std::vector<std::string>& env, const char* key) {
  for (const auto& e : env)
    if (hasMark(e, key)) return e.substr(std::char_traits<char>::length(key) + 1);
  return "";
}

// `path` absolute and normalized, without a trailing '/'.
std::string absolutePath(const std::string& path) {
  std::error_code ec;
  std::string absolute = std::filesystem::absolute(path, ec).lexically_normal().string();
  if (ec) return path;
  if (absolute.size() > 1 && absolute.back() == '/') absolute.pop_back();
  return absolute;
}

[[maybe_unused]] size_t threadCount() {
  std::error_code ec;
  size_t n = 0;
  for (auto it = std::filesystem::directory_iterator("/proc/self/task", ec);
       !ec && it != std::filesystem::directory_iterator(); it.increment(ec))
    ++n;
  return n;
}

struct Marked {
  ProcessHandle handle;
  ProcessStat stat;
  std::string what;
};

// One scan of the process table: signals what matches, returns it.
std::vector<StoppedProcess> killPass(const EnvironmentMatch& match) {
  pid_t self = ::getpid();
  std::vector<ProcessStat> all;
  for (pid_t pid : listProcesses()) {
    if (pid == self) continue;
    auto stat = readProcessStat(pid);
    if (stat && !stat->zombie()) all.push_back(*stat);
  }
  std::vector<Marked> marked;
  std::set<pid_t> marked_pids;
  for (const auto& s : all) {
    std::vector<std::string> env = processEnvironment(s.pid);
    if (env.empty() || !match(env)) continue;
    auto handle = ProcessHandle::open(s.pid, s.start_time);
    if (!handle) continue; // it ended meanwhile
    std::string what = markValue(env, kChildMark);
    marked.push_back({std::move(*handle), s, what.empty() ? "a descendant of hwfarmd" : what});
    marked_pids.insert(s.pid);
  }
  std::vector<StoppedProcess> stopped;
  // Unmarked members of groups a marked process leads (a tool's child that
  // cleared its environment) first: while its leader lives, a group id
  // names that group and no other.
  std::map<pid_t, const Marked*> leaders;
  for (const auto& m : marked)
    if (m.stat.pgid == m.stat.pid) leaders[m.stat.pid] = &m;
  for (const auto& s : all) {
    auto leader = leaders.find(s.pgid);
    if (leader == leaders.end() || marked_pids.count(s.pid)) continue;
    auto member = ProcessHandle::open(s.pid, s.start_time);
    auto now = readProcessStat(s.pid);
    if (!member || !now || now->pgid != s.pgid || !leader->second->handle.alive()) continue;
    if (member->signal(SIGKILL))
      stopped.push_back({s.pid, "in the process group of " + leader->second->what, processCommand(s.pid)});
  }
  for (const auto& m : marked) {
    std::string command = processCommand(m.stat.pid);
    if (m.handle.signal(SIGKILL)) stopped.push_back({m.stat.pid, m.what, command});
  }
  return stopped;
}

// The reaper's life: wait for the parent's end, sweep, exit.
[[noreturn]] void reaperMain(int pipe_fd, pid_t parent, const std::string& instance) {
  ::prctl(PR_SET_NAME, "hwfarmd-reaper");
  ::setpgid(0, 0); // a terminal's Ctrl-C to hwfarmd's group does not reach it
  struct sigaction ignore {};
  ignore.sa_handler = SIG_IGN;
  for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGPIPE, SIGTSTP, SIGTTIN, SIGTTOU, SIGUSR1, SIGUSR2})
    ::sigaction(sig, &ignore, nullptr);
  // Nothing of hwfarmd's but stdio and its pipe (inherited descriptors too:
  // a lock file's, say, must not be held after hwfarmd ends).
  if (pipe_fd > 3) ::syscall(SYS_close_range, 3u, static_cast<unsigned>(pipe_fd - 1), 0u);
  ::syscall(SYS_close_range, static_cast<unsigned>(pipe_fd + 1), ~0u, 0u);
  char byte;
  for (;;) {
    pollfd p{pipe_fd, POLLIN, 0};
    if (::poll(&p, 1, -1) < 0 && errno == EINTR) continue;
    ssize_t n = ::read(pipe_fd, &byte, 1);
    if (n == 0 || (n < 0 && errno != EINTR && errno != EAGAIN)) break; // the parent's end closed
  }
  std::vector<StoppedProcess> stopped = killMarked(
      [&](const std::vector<std::string>& env) { return markedWithInstance(env, instance); }, std::chrono::seconds(10));
  for (const auto& s : stopped)
    std::fprintf(stderr, "hwfarmd-reaper: pid %d ended: stopped pid %d (%s): %s\n", static_cast<int>(parent),
                 static_cast<int>(s.pid), s.what.c_str(), s.command.c_str());
  ::_exit(0);
}

} // namespace

const std::string& instanceId() {
  static const std::string id = [] {
    pid_t pid = ::getpid();
    auto stat = readProcessStat(pid);
    return std::to_string(pid) + "." + std::to_string(stat ? stat->start_time : 0);
  }();
  return id;
}

Result<pid_t> startReaper() {
  std::lock_guard lock(reaper_mutex);
  if (reaper_pid > 0) return reaper_pid;
  // ThreadSanitizer runs a thread of its own, and handles fork itself.
#if !defined(__SANITIZE_THREAD__)
  if (size_t threads = threadCount(); threads > 1)
    return Status::error(Code::internal, "cannot start the reaper: " + std::to_string(threads) +
                                             " threads already run (start it before any thread)");
#endif
  const std::string& instance = instanceId();
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) return Status::fromErrno("cannot start the reaper: pipe", errno);
  pid_t parent = ::getpid();
  std::fflush(nullptr); // nothing buffered is written twice
  pid_t pid = ::fork();
  if (pid < 0) {
    Status failed = Status::fromErrno("cannot start the reaper: fork", errno);
    ::close(fds[0]);
    ::close(fds[1]);
    return failed;
  }
  if (pid == 0) {
    ::close(fds[1]);
    reaperMain(fds[0], parent, instance);
  }
  ::close(fds[0]);
  reaper_pid = pid;
  reaper_pipe = fds[1];
  return pid;
}

bool stopReaper(std::chrono::milliseconds timeout) {
  std::lock_guard lock(reaper_mutex);
  if (reaper_pid <= 0) return false;
  ::close(reaper_pipe);
  reaper_pipe = -1;
  auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    int status;
    pid_t r = ::waitpid(reaper_pid, &status, WNOHANG);
    if (r == reaper_pid || (r < 0 && errno != EINTR)) break;
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  reaper_pid = -1;
  return true;
}

void setChildOwner(const std::string& state_dir) {
  std::string path = state_dir.empty() ? "" : absolutePath(state_dir);
  std::lock_guard lock(owner_mutex);
  owner = path;
}

std::vector<std::string> childMarks(const std::string& what) {
  const char* inherited = std::getenv(kInstanceMark);
  std::string instances = inherited && *inherited ? std::string(inherited) + ":" + instanceId() : instanceId();
  std::vector<std::string> marks{std::string(kInstanceMark) + "=" + instances};
  {
    std::lock_guard lock(owner_mutex);
    if (!owner.empty()) marks.push_back(std::string(kOwnerMark) + "=" + owner);
  }
  if (!what.empty()) marks.push_back(std::string(kChildMark) + "=" + what);
  return marks;
}

std::vector<std::string> childEnvironment(const std::string& what) {
  std::vector<std::string> env;
  for (char** e = environ; e && *e; ++e)
    if (!isMark(*e)) env.emplace_back(*e);
  std::vector<std::string> marks = childMarks(what);
  env.insert(env.end(), marks.begin(), marks.end());
  return env;
}

bool markedWithInstance(const std::vector<std::string>& environment, const std::string& instance) {
  std::string instances = ":" + markValue(environment, kInstanceMark) + ":";
  return instances.find(":" + instance + ":") != std::string::npos;
}

bool markedWithOwner(const std::vector<std::string>& environment, const std::string& owner) {
  return !owner.empty() && markValue(environment, kOwnerMark) == owner;
}

std::vector<StoppedProcess> killMarked(const EnvironmentMatch& match, std::chrono::milliseconds timeout) {
  std::vector<StoppedProcess> stopped;
  std::set<pid_t> seen;
  auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    std::vector<StoppedProcess> pass = killPass(match);
    if (pass.empty()) break;
    for (auto& s : pass)
      if (seen.insert(s.pid).second) stopped.push_back(std::move(s));
    if (std::chrono::steady_clock::now() >= deadline) break;
    // Killed processes take a moment to end; what they started meanwhile
    // is found by the next scan.
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return stopped;
}

std::vector<StoppedProcess> stopLeftovers(const std::string& state_dir, std::chrono::milliseconds timeout) {
  std::string owner = absolutePath(state_dir);
  return killMarked(
      [&](const std::vector<std::string>& env) {
        return markedWithOwner(env, owner) && !markedWithInstance(env, instanceId());
      },
      timeout);
}

} // namespace hwfarm::drivers
