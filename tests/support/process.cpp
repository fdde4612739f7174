#include "tests/support/process.h"

#include <fcntl.h>
#include <pty.h>
#include <termios.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "drivers/process_table.h"
#include "drivers/reaper.h"

namespace hwfarm::test {

TempDir::TempDir() {
  const char* base = std::getenv("TMPDIR");
  std::string pattern = std::string(base && *base ? base : "/tmp") + "/hwfarm-test-XXXXXX";
  std::vector<char> buffer(pattern.begin(), pattern.end());
  buffer.push_back('\0');
  if (!mkdtemp(buffer.data())) throw std::runtime_error(std::string("mkdtemp: ") + std::strerror(errno));
  path_ = buffer.data();
}

TempDir::~TempDir() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

std::string TempDir::write(const std::string& name, const std::string& text) const {
  std::string path = file(name);
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
  return path;
}

std::string TempDir::script(const std::string& name, const std::string& body) const {
  std::string path = write(name, "#!/bin/sh\n" + body);
  if (::chmod(path.c_str(), 0755) != 0)
    throw std::runtime_error("chmod " + path + ": " + std::strerror(errno));
  return path;
}

std::string readFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

size_t occurrences(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

bool processAlive(pid_t pid) {
  std::string stat = readFile("/proc/" + std::to_string(pid) + "/stat");
  size_t close = stat.rfind(')');
  return close != std::string::npos && stat.size() > close + 2 && stat[close + 2] != 'Z';
}

Process::Process(std::vector<std::string> argv, const std::string& stdout_path, const std::string& stderr_path,
                 const std::map<std::string, std::string>& env, const std::string& cwd) {
  pid_t parent = getpid();
  // Marked as this test's child (drivers/reaper.h): if the test dies, its
  // reaper stops the process and what it started, a hwfarmd's QEMU included.
  std::vector<std::string> marks = drivers::childMarks("started by a test: " + argv[0]);
  pid_ = fork();
  if (pid_ > 0) setpgid(pid_, pid_); // also here: no window before the child's own call
  if (pid_ < 0) throw std::runtime_error(std::string("fork: ") + std::strerror(errno));
  if (pid_ == 0) {
    // Its own process group, so that the destructor also ends what it started
    // (hwfarmd under umockdev-run, say).
    setpgid(0, 0);
    // A test that dies (an abort, a failed REQUIRE on a thread, a timeout's
    // SIGKILL) takes its hwfarmd with it, and hwfarmd's reaper its children.
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(126);
    rlimit no_core{0, 0}; // tests abort daemons on purpose
    setrlimit(RLIMIT_CORE, &no_core);
    int out = ::open(stdout_path.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    int err = ::open(stderr_path.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    int in = ::open("/dev/null", O_RDONLY);
    if (out < 0 || err < 0 || in < 0) _exit(126);
    if (dup2(in, 0) < 0 || dup2(out, 1) < 0 || dup2(err, 2) < 0) _exit(126);
    for (auto& mark : marks) putenv(mark.data());
    for (const auto& [k, v] : env) {
      if (v.empty()) unsetenv(k.c_str());
      else setenv(k.c_str(), v.c_str(), 1);
    }
    if (!cwd.empty() && chdir(cwd.c_str()) != 0) _exit(126);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    std::vector<char*> args;
    for (auto& a : argv) args.push_back(a.data());
    args.push_back(nullptr);
    execv(args[0], args.data());
    _exit(127);
  }
}

Process::~Process() {
  ::kill(-pid_, SIGKILL); // the group: descendants of an exited child too
  if (running()) wait(std::chrono::seconds(10));
}

void Process::signal(int sig) const {
  if (!status_) ::kill(pid_, sig); // once reaped, the pid may be another process's
}

std::optional<ExitStatus> Process::wait(std::chrono::milliseconds timeout) {
  if (status_) return status_;
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (true) {
    int raw = 0;
    pid_t r = waitpid(pid_, &raw, WNOHANG);
    if (r == pid_) {
      ExitStatus s;
      s.exited = WIFEXITED(raw);
      s.code = s.exited ? WEXITSTATUS(raw) : WTERMSIG(raw);
      status_ = s;
      return status_;
    }
    if (std::chrono::steady_clock::now() >= deadline) return std::nullopt;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

bool Process::running() { return pid_ > 0 && !wait(std::chrono::milliseconds(0)); }

Terminal::Terminal() {
  char name[128] = {};
  termios raw{};
  ::cfmakeraw(&raw);
  if (::openpty(&master_, &slave_, name, &raw, nullptr) != 0)
    throw std::runtime_error(std::string("openpty: ") + std::strerror(errno));
  ::fcntl(master_, F_SETFL, O_NONBLOCK);
  name_ = name;
}

Terminal::~Terminal() {
  ::close(slave_);
  ::close(master_);
}

const std::string& Terminal::screen() {
  char buffer[4096];
  for (ssize_t n; (n = ::read(master_, buffer, sizeof buffer)) > 0;) screen_.append(buffer, static_cast<size_t>(n));
  return screen_;
}

bool Terminal::waitFor(const std::string& needle, std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (screen().find(needle) == std::string::npos) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return true;
}

std::optional<std::string> waitForText(const std::string& path, const std::string& needle,
                                       std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (true) {
    std::string text = readFile(path);
    if (text.find(needle) != std::string::npos) return text;
    if (std::chrono::steady_clock::now() >= deadline) return std::nullopt;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

CommandResult runCommand(const std::vector<std::string>& argv, const std::map<std::string, std::string>& env,
                         std::chrono::milliseconds timeout) {
  TempDir dir;
  CommandResult result;
  {
    Process p(argv, dir.file("out"), dir.file("err"), env);
    auto status = p.wait(timeout);
    if (!status) throw std::runtime_error("command did not finish in time: " + argv[0]);
    result.status = *status;
  }
  result.out = readFile(dir.file("out"));
  result.err = readFile(dir.file("err"));
  return result;
}

} // namespace hwfarm::test

namespace hwfarm::test {

std::vector<std::string> processesUnder(const std::string& path) {
  std::vector<std::string> found;
  pid_t self = getpid();
  auto mentions = [&](const std::vector<std::string>& strings) {
    for (const auto& s : strings)
      if (s.find(path) != std::string::npos) return true;
    return false;
  };
  for (pid_t pid : drivers::listProcesses()) {
    auto stat = drivers::readProcessStat(pid);
    if (pid == self || !stat || stat->zombie()) continue;
    if (mentions(drivers::processArguments(pid)) || mentions({drivers::processCwd(pid)}) ||
        mentions(drivers::processEnvironment(pid)))
      found.push_back("pid " + std::to_string(pid) + " (" + stat->comm + "): " + drivers::processCommand(pid));
  }
  return found;
}

bool sandboxSocketConnected(const std::string& dir, const std::string& name) {
  std::istringstream table(readFile("/proc/self/net/unix"));
  for (std::string line; std::getline(table, line);) {
    size_t path = line.find(" " + dir + "/");
    if (path != std::string::npos && line.size() >= name.size() &&
        line.compare(line.size() - name.size(), name.size(), name) == 0)
      return true;
  }
  return false;
}

std::vector<std::string> waitForNoProcessUnder(const std::string& path, std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    std::vector<std::string> left = processesUnder(path);
    if (left.empty() || std::chrono::steady_clock::now() >= deadline) return left;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

} // namespace hwfarm::test
