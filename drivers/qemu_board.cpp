#include "drivers/qemu_board.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <sstream>
#include <thread>
#include <vector>

#include "drivers/reaper.h"
#include "drivers/sim_launcher.h"
#include "drivers/spawn.h"
#include "drivers/tool_runner.h"

namespace hwfarm::drivers {

QemuBoard::QemuBoard(std::string name, config::QemuConfig config, std::string work_dir, SimRole role)
    : name_(std::move(name)), config_(std::move(config)), work_dir_(std::move(work_dir)), role_(role) {}

QemuBoard::~QemuBoard() { powerOff(); }

Status QemuBoard::flash(const std::string& image) {
  std::error_code ec;
  std::filesystem::create_directories(work_dir_, ec);
  std::string staged = work_dir_ + "/" + name_ + ".elf";
  std::filesystem::copy_file(image, staged, std::filesystem::copy_options::overwrite_existing, ec);
  if (ec) return Status::fromErrno("cannot stage image " + image, ec.value());
  image_ = staged;
  return Status::success();
}

void QemuBoard::clearImage() {
  if (!image_.empty()) ::unlink(image_.c_str());
  image_.clear();
}

namespace {

// The name QEMU binds its UART socket by: its path, or where that is longer
// than a socket address holds (107 bytes: a deep state_dir), its name in
// QEMU's working directory (the socket directory). hwfarmd connects to a
// long path through its directory (connectUnixSocket).
std::string boundName(const std::string& socket) {
  if (socket.size() < sizeof(sockaddr_un::sun_path)) return socket;
  return std::filesystem::path(socket).filename().string();
}

// The generic-loader device that writes `role` into guest RAM at reset.
std::string identityLoader(SimRole role) {
  char text[80];
  std::snprintf(text, sizeof text, "loader,addr=0x%x,data=%u,data-len=4", static_cast<unsigned>(kSimIdentityAddress),
                static_cast<unsigned>(role));
  return text;
}

// Reads bubblewrap's --info-fd report ({"child-pid": N, ...}) until it closes
// it, up to `deadline`. 0 when there was none (bubblewrap failed first).
pid_t readSandboxPid(int fd, std::chrono::steady_clock::time_point deadline) {
  std::string info;
  char buf[512];
  for (;;) {
    int wait_ms = static_cast<int>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                       deadline - std::chrono::steady_clock::now())
                                       .count());
    pollfd p{fd, POLLIN, 0};
    if (wait_ms <= 0 || ::poll(&p, 1, wait_ms) <= 0) break;
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    info.append(buf, static_cast<size_t>(n));
  }
  size_t key = info.find("\"child-pid\":");
  if (key == std::string::npos) return 0;
  return static_cast<pid_t>(std::strtol(info.c_str() + key + 12, nullptr, 10));
}

// The first line bubblewrap wrote to `log` about itself ("bwrap: ..."), if any.
std::string sandboxError(const std::string& log) {
  std::ifstream in(log);
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("bwrap: ", 0) == 0) return line;
  return "";
}

} // namespace

// Not --die-with-parent: it ties bubblewrap
// and the sandbox to the thread that started them, not to hwfarmd, and
// leaves a gap while the sandbox is set up (docs/drivers.md, "When hwfarmd
// dies"); hwfarmd's reaper and powerOff() stop the sandbox instead.
std::vector<std::string> simulatorSandboxArgv(const std::string& bwrap, int info_fd, int status_fd,
                                              const std::vector<std::string>& marks, const std::string& qemu,
                                              const std::string& image, const std::string& socket_dir,
                                              bool with_proc) {
  std::vector<std::string> argv{bwrap, "--new-session", "--unshare-all", "--unshare-user",
                                "--disable-userns", "--cap-drop", "ALL", "--clearenv", "--setenv", "PATH",
                                "/usr/bin:/bin"};
  // QEMU carries hwfarmd's marks too (drivers/reaper.h).
  for (const auto& mark : marks) {
    size_t eq = mark.find('=');
    argv.insert(argv.end(), {"--setenv", mark.substr(0, eq), mark.substr(eq + 1)});
  }
  argv.insert(argv.end(), {"--info-fd", std::to_string(info_fd), "--json-status-fd", std::to_string(status_fd),
                           "--ro-bind", "/usr", "/usr"});
  // Merged /usr (Debian 12): /bin, /lib... are links into /usr; otherwise
  // they are directories, bound read-only.
  for (const char* top : {"/bin", "/sbin", "/lib", "/lib64", "/lib32"}) {
    std::error_code ec;
    auto status = std::filesystem::symlink_status(top, ec);
    if (ec || !std::filesystem::exists(status)) continue;
    if (std::filesystem::is_symlink(status))
      argv.insert(argv.end(), {"--symlink", std::filesystem::read_symlink(top, ec).string(), top});
    else if (std::filesystem::is_directory(status))
      argv.insert(argv.end(), {"--ro-bind", top, top});
  }
  if (with_proc) argv.insert(argv.end(), {"--proc", "/proc"});
  argv.insert(argv.end(), {"--dev", "/dev"});
  if (qemu.rfind("/usr/", 0) != 0) argv.insert(argv.end(), {"--ro-bind", qemu, qemu});
  argv.insert(argv.end(), {"--ro-bind", image, image, "--bind", socket_dir, socket_dir, "--chdir", socket_dir, "--"});
  return argv;
}

namespace {
std::mutex launcher_mutex;
std::string launcher_socket; // guarded by launcher_mutex
} // namespace

void setSimulatorLauncher(const std::string& socket_path) {
  std::lock_guard lock(launcher_mutex);
  launcher_socket = socket_path;
}

std::string simulatorLauncher() {
  std::lock_guard lock(launcher_mutex);
  return launcher_socket;
}

Status QemuBoard::powerOn(std::string* console) {
  if (running()) return Status::infrastructure(Code::conflict, "board " + name_ + " is already powered on");
  if (image_.empty()) return Status::infrastructure(Code::conflict, "board " + name_ + " has no image: flash it first");
  // QEMU sees absolute paths (inside its sandbox the working directory is
  // its socket directory); the console keeps the configured form.
  std::error_code ec;
  std::string dir = std::filesystem::absolute(work_dir_, ec).lexically_normal().string();
  std::string image = std::filesystem::absolute(image_, ec).lexically_normal().string();
  std::string socket_dir = dir + "/sock";
  std::string socket = socket_dir + "/" + name_ + ".uart";
  std::filesystem::create_directories(socket_dir, ec);
  if (ec) return Status::fromErrno("cannot create " + socket_dir, ec.value());
  ::unlink(socket.c_str());
  std::string qemu = findProgram(config_.binary);
  if (!qemu.empty()) qemu = std::filesystem::absolute(qemu, ec).lexically_normal().string();
  if (qemu.empty())
    return Status::infrastructure(Code::not_found,
                                  "QEMU did not start for board " + name_ + ": \"" + config_.binary + "\" not found" +
                                      (config_.binary.find('/') == std::string::npos ? " in PATH" : "") +
                                      " or not executable");
  // Fail closed: without its sandbox, QEMU does not run. (A launcher, when
  // one confines QEMU, finds bubblewrap itself.)
  std::string launcher = simulatorLauncher();
  std::string bwrap = launcher.empty() ? findProgram("bwrap") : "";
  if (launcher.empty() && bwrap.empty())
    return Status::infrastructure(Code::not_found,
                                  "cannot confine QEMU for board " + name_ +
                                      ": bwrap not found in PATH (install Debian's bubblewrap package)");
  // A private /proc where the kernel allows one; where it does not (a
  // service whose /proc has read-only overmounts, e.g. systemd's
  // ProtectKernelTunables=), QEMU runs without /proc: it needs none.
  Status started = startSandboxed(launcher, bwrap, qemu, image, socket_dir, socket, true, console);
  if (!started.ok() && started.message().find("Can't mount proc") != std::string::npos)
    started = startSandboxed(launcher, bwrap, qemu, image, socket_dir, socket, false, console);
  return started;
}

Status QemuBoard::startSandboxed(const std::string& launcher, const std::string& bwrap, const std::string& qemu,
                                 const std::string& image, const std::string& socket_dir, const std::string& socket,
                                 bool with_proc, std::string* console) {
  // Two reports from bubblewrap: --info-fd (the sandbox's pid, then
  // closed) and --json-status-fd (the same, then QEMU's exit status).
  int info[2];
  int status[2];
  if (::pipe2(info, O_CLOEXEC) != 0)
    return Status::fromErrno("cannot confine QEMU for board " + name_ + ": pipe", errno);
  if (::pipe2(status, O_CLOEXEC | O_NONBLOCK) != 0) {
    Status failed = Status::fromErrno("cannot confine QEMU for board " + name_ + ": pipe", errno);
    ::close(info[0]);
    ::close(info[1]);
    return failed;
  }
  std::string what = "QEMU simulator " + name_;
  std::string bound = boundName(socket);
  // No semihosting: the firmware reports its status on the console.
  // -no-reboot: a guest reset stops QEMU (QemuEnd::guest), the firmware's
  // way to say it is done, and never boots the image a second time.
  std::vector<std::string> command{qemu, "-M", config_.machine, "-no-reboot"};
  if (!config_.cpu.empty()) command.insert(command.end(), {"-cpu", config_.cpu});
  command.insert(command.end(), {"-display", "none", "-monitor", "none", "-nic", "none", "-sandbox",
                                 "on,obsolete=deny,elevateprivileges=deny,spawn=deny,resourcecontrol=deny", "-chardev",
                                 "socket,id=uart0,path=" + bound + ",server=on,wait=on", "-serial", "chardev:uart0",
                                 "-device", identityLoader(role_), "-kernel", image});
  command.insert(command.end(), config_.extra_args.begin(), config_.extra_args.end());
  std::string log = logPath();
  exit_status_.reset();
  end_.reset();
  int out = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (out < 0) {
    Status failed = Status::fromErrno("cannot open " + log, errno);
    for (int fd : {info[0], info[1], status[0], status[1]}) ::close(fd);
    return failed;
  }
  auto start = [&]() -> Result<pid_t> {
    if (!launcher.empty()) { // the launcher runs bubblewrap with these descriptors, as below
      LaunchRequest request{image, socket_dir, with_proc, childMarks(what), std::move(command)};
      Result<LaunchedSandbox> launched = launchSandbox(launcher, request, out, info[1], status[1]);
      if (!launched) return std::move(launched).takeStatus();
      launcher_ = launched->connection;
      return launched->pid;
    }
    SpawnOptions options;
    options.argv =
        simulatorSandboxArgv(bwrap, info[1], status[1], childMarks(what), qemu, image, socket_dir, with_proc);
    options.argv.insert(options.argv.end(), command.begin(), command.end());
    options.stdout_fd = out;
    options.stderr_fd = out;
    options.keep_fds = {info[1], status[1]};
    // It must not outlive hwfarmd (it would wait for its console forever):
    // marked as hwfarmd's child, its reaper stops it (drivers/reaper.h).
    options.what = what;
    return spawnProcess(options);
  };
  Result<pid_t> child = start();
  ::close(out);
  ::close(info[1]);
  ::close(status[1]);
  if (!child) {
    ::close(info[0]);
    ::close(status[0]);
    return std::move(child).takeStatus().withContext("cannot confine QEMU for board " + name_);
  }
  pid_ = *child;
  status_fd_ = status[0];
  if (launcher_ < 0) pidfd_ = static_cast<int>(::syscall(SYS_pidfd_open, pid_, 0)); // unreaped: it names bubblewrap
  // QEMU creates the socket, then waits for the console to connect. It binds
  // the socket before it listens, and connecting in between would be
  // refused: wait until the kernel lists it as listening (without
  // connecting: the first connection starts the guest). The socket lives in
  // the sandbox's network namespace, listed in its own /proc/PID/net/unix
  // under the name QEMU bound (relative to its working directory).
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  pid_t sandboxed = readSandboxPid(info[0], deadline);
  ::close(info[0]);
  // Held from now on: the sandbox's pid 1 is bubblewrap's child, so while
  // bubblewrap is unreaped nobody else can reap it and reuse its pid (the
  // launcher, when it started bubblewrap, reaps it only once it ended).
  if (auto stat = sandboxed > 0 ? readProcessStat(sandboxed) : std::nullopt; stat && stat->ppid == pid_)
    sandbox_ = ProcessHandle::open(sandboxed, stat->start_time);
  std::string table = "/proc/" + std::to_string(sandboxed) + "/net/unix";
  struct stat st {};
  while (sandboxed <= 0 || ::stat(socket.c_str(), &st) != 0 || !S_ISSOCK(st.st_mode) ||
         !unixSocketListening(bound, table)) {
    if (sandboxed <= 0 || !running() || std::chrono::steady_clock::now() > deadline) {
      // The evidence: how the sandbox (or QEMU in it) ended, once it has
      // (it closed its report: it is exiting), and the end of its log.
      bool ending = sandboxed <= 0 || !running();
      for (int i = 0; ending && i < 100 && running(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
      Evidence evidence = running() || !end_ ? Evidence{} : end_->evidence();
      powerOff();
      evidence.tool_output = outputTail(log, 2048);
      std::string why = sandboxError(log);
      if (!why.empty())
        return Status::infrastructure(Code::unavailable,
                                      "cannot confine QEMU for board " + name_ + ": " + sandboxRefusal(why),
                                      std::move(evidence));
      return Status::infrastructure(Code::unavailable, "QEMU did not start for board " + name_ + " (see " + log + ")",
                                    std::move(evidence));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  *console = "unix:" + work_dir_ + "/sock/" + name_ + ".uart";
  return Status::success();
}

std::string sandboxRefusal(const std::string& bwrap_line) {
  // bubblewrap 0.8's words when unshare() or clone() is refused (EPERM)
  if (bwrap_line.find("new namespace") == std::string::npos ||
      bwrap_line.find("No permissions") == std::string::npos)
    return bwrap_line;
  return bwrap_line +
         " (hwfarmd may not create namespaces: the kernel denies them to unprivileged users, or its systemd unit "
         "does (RestrictNamespaces=), where QEMU is to be confined by hwfarm-launcher: hwfarmd "
         "--simulator-launcher /run/hwfarm-launcher.sock, as the packaged unit runs it)";
}

std::string guestLockup(const std::string& qemu_log) {
  static const std::string kFatal = "qemu: fatal: ";
  std::string tail = outputTail(qemu_log, 4096);
  size_t at = tail.find(kFatal + "Lockup");
  if (at == std::string::npos) return "";
  at += kFatal.size();
  return tail.substr(at, tail.find('\n', at) - at); // to the line's end (npos: the rest)
}

bool unixSocketListening(const std::string& path, const std::string& table_path) {
  std::ifstream table(table_path);
  if (!table) return false;
  std::string line;
  std::getline(table, line); // header: Num RefCount Protocol Flags Type St Inode Path
  while (std::getline(table, line)) {
    if (line.size() <= path.size() || line.compare(line.size() - path.size(), path.size(), path) != 0 ||
        line[line.size() - path.size() - 1] != ' ')
      continue;
    std::istringstream fields(line);
    std::string num, refcount, protocol, flags;
    fields >> num >> refcount >> protocol >> flags;
    constexpr unsigned long kAcceptCon = 0x10000; // __SO_ACCEPTCON: listen() was called
    if (std::stoul(flags, nullptr, 16) & kAcceptCon) return true;
  }
  return false;
}

std::string QemuEnd::describe(const std::string& subject) const {
  if (guest) return subject + " was reset by its firmware";
  std::string who = sandbox ? subject + "'s sandbox" : subject;
  if (signal) return who + " was killed by signal " + std::to_string(signal) + " (" + strsignal(signal) + ")";
  return who + " exited with status " + std::to_string(exit_code.value_or(-1));
}

Evidence QemuEnd::evidence() const {
  Evidence e;
  if (signal) e.signal = signal;
  else e.exit_code = exit_code;
  return e;
}

std::optional<int> QemuBoard::reportedExit() {
  std::string report;
  char buf[512];
  for (ssize_t n; (n = ::read(status_fd_, buf, sizeof buf)) > 0 || (n < 0 && errno == EINTR);)
    if (n > 0) report.append(buf, static_cast<size_t>(n));
  size_t key = report.find("\"exit-code\":");
  if (key == std::string::npos) return std::nullopt;
  return static_cast<int>(std::strtol(report.c_str() + key + 12, nullptr, 10));
}

void QemuBoard::reap(bool block) {
  if (pid_ <= 0) return;
  int raw;
  if (launcher_ >= 0) {
    // The launcher reports bubblewrap's end once it has killed its group
    // and reaped it, or closes without a report: it died (under systemd its
    // cgroup, bubblewrap included, went with it), and the sandbox is killed
    // here.
    pollfd p{launcher_, POLLIN, 0};
    int ready;
    do ready = ::poll(&p, 1, block ? -1 : 0);
    while (ready < 0 && errno == EINTR);
    if (ready <= 0) return;
    if (sandbox_) sandbox_->signal(SIGKILL);
    raw = readLaunchedExit(launcher_);
  } else {
    siginfo_t info{};
    int r = ::waitid(P_PID, static_cast<id_t>(pid_), &info, WEXITED | WNOWAIT | (block ? 0 : WNOHANG));
    if (r != 0 || info.si_pid != pid_) return;
    // Exited: its group goes with it before it is reaped (after that, its
    // pid could name another process), and so does the sandbox (its pid 1
    // has a session of its own, outside that group).
    if (sandbox_) sandbox_->signal(SIGKILL);
    raw = killGroupAndReap(pid_);
  }
  exit_status_ = WIFEXITED(raw) ? WEXITSTATUS(raw) : 128 + WTERMSIG(raw);
  // bubblewrap wrote QEMU's status before it exited; without one, it ended
  // by itself.
  QemuEnd end;
  if (std::optional<int> qemu = reportedExit()) {
    if (*qemu > 128 && *qemu < 128 + NSIG) end.signal = *qemu - 128; // bubblewrap's way to say "signal N"
    else end.exit_code = *qemu;
  } else {
    end.sandbox = true;
    if (WIFEXITED(raw)) end.exit_code = WEXITSTATUS(raw);
    else end.signal = WTERMSIG(raw);
  }
  // (its log must be there to say no signal came: a log gone says nothing)
  end.guest = !end.sandbox && end.exit_code == 0 && std::ifstream(logPath()).good() &&
              outputTail(logPath(), 4096).find("terminating on signal") == std::string::npos;
  end_ = end;
  closeHandles();
  pid_ = -1;
}

void QemuBoard::closeHandles() {
  if (pidfd_ >= 0) ::close(pidfd_);
  if (status_fd_ >= 0) ::close(status_fd_);
  if (launcher_ >= 0) ::close(launcher_);
  pidfd_ = status_fd_ = launcher_ = -1;
  sandbox_.reset();
}

bool QemuBoard::running() {
  reap(false);
  return pid_ > 0;
}

std::optional<int> QemuBoard::exitStatus() {
  reap(false);
  return exit_status_;
}

std::optional<QemuEnd> QemuBoard::end() {
  reap(false);
  return end_;
}

std::optional<QemuEnd> QemuBoard::waitEnd(std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (running()) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return std::nullopt;
    if (int fd = launcher_ >= 0 ? launcher_ : pidfd_; fd >= 0) {
      pollfd p{fd, POLLIN, 0};
      ::poll(&p, 1, static_cast<int>(left.count()));
    } else {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  }
  return end_;
}

void QemuBoard::powerOff() {
  if (!running()) { // it ended by itself: how is forgotten too (the board is off)
    exit_status_.reset();
    end_.reset();
    return;
  }
  if (launcher_ >= 0) {
    // The launcher kills the sandbox (bubblewrap's child, which it holds
    // unreaped: hwfarmd's view of bubblewrap's pid may be stale) and
    // bubblewrap's group, then reports the end; a launcher that does not
    // stops it when the connection closes.
    if (sandbox_) sandbox_->signal(SIGKILL);
    signalLaunched(launcher_, SIGKILL);
    waitEnd(std::chrono::seconds(5));
    if (running()) {
      closeHandles();
      pid_ = -1;
    }
    exit_status_.reset();
    end_.reset();
    return;
  }
  // The sandbox's pid 1 first: QEMU's pid namespace ends with it. Signals
  // to bubblewrap's group do not reach it (it has a session of its own, and
  // as a namespace's init it ignores SIGTERM), and bubblewrap's
  // --die-with-parent does not cover it while the sandbox is being set up.
  if (sandbox_) sandbox_->signal(SIGKILL);
  else signalChildren(pid_, SIGKILL); // not reported yet: bubblewrap's child, if it has one
  ::kill(-pid_, SIGTERM);
  waitEnd(std::chrono::seconds(2));
  if (running()) {
    ::kill(-pid_, SIGKILL);
    reap(true);
  }
  exit_status_.reset(); // stopped, not finished
  end_.reset();
}

} // namespace hwfarm::drivers
