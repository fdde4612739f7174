#include "drivers/qemu_sandbox.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "drivers/spawn.h"
#include "drivers/tool_runner.h"

namespace hwfarm::drivers {

namespace {

using SteadyClock = std::chrono::steady_clock;
constexpr const char* kProtocol = "hwfarm-qemu-sandbox/1";
constexpr size_t kMaxRequest = 64 * 1024;
constexpr auto kStartTimeout = std::chrono::seconds(10);

// Descriptors the sandbox binds instead of paths (the service's case: it
// gets them from hwfarmd and need not reach the paths itself).
struct Binds {
  int image_fd = -1;
  int socket_dir_fd = -1;
};

// The bubblewrap arguments that give QEMU its own view: /usr and the
// top-level links into it read-only, a private /dev and /proc, its image
// read-only, its socket directory, and nothing else; every namespace new
// (no network, no host processes), no capabilities, no new user namespaces,
// killed with its parent.
std::vector<std::string> sandboxArgv(const std::string& bwrap, int info_fd, const SandboxSpec& spec,
                                     const Binds& binds, bool with_proc) {
  std::vector<std::string> argv{bwrap, "--die-with-parent", "--new-session", "--unshare-all", "--unshare-user",
                                "--disable-userns", "--cap-drop", "ALL", "--clearenv", "--setenv", "PATH",
                                "/usr/bin:/bin", "--info-fd", std::to_string(info_fd), "--ro-bind", "/usr", "/usr"};
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
  if (spec.qemu.rfind("/usr/", 0) != 0) argv.insert(argv.end(), {"--ro-bind", spec.qemu, spec.qemu});
  if (binds.image_fd >= 0) argv.insert(argv.end(), {"--ro-bind-fd", std::to_string(binds.image_fd), spec.image});
  else argv.insert(argv.end(), {"--ro-bind", spec.image, spec.image});
  if (binds.socket_dir_fd >= 0)
    argv.insert(argv.end(), {"--bind-fd", std::to_string(binds.socket_dir_fd), spec.socket_dir});
  else argv.insert(argv.end(), {"--bind", spec.socket_dir, spec.socket_dir});
  argv.insert(argv.end(), {"--chdir", spec.socket_dir, "--", spec.qemu});
  argv.insert(argv.end(), spec.qemu_args.begin(), spec.qemu_args.end());
  return argv;
}

// Reads bubblewrap's --info-fd report ({"child-pid": N, ...}) until it closes
// it, up to `deadline`. 0 when there was none (bubblewrap failed first).
pid_t readSandboxPid(int fd, SteadyClock::time_point deadline) {
  std::string info;
  char buf[512];
  for (;;) {
    int wait_ms = static_cast<int>(
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - SteadyClock::now()).count());
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

// The log's text as the descriptor has it (at most 64 KiB).
std::string logText(int fd) {
  std::string text(64 * 1024, '\0');
  ssize_t n = ::pread(fd, text.data(), text.size(), 0);
  text.resize(n > 0 ? static_cast<size_t>(n) : 0);
  return text;
}

// The log's first 64 KiB, by its path.
std::string logText(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::string text(64 * 1024, '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  text.resize(static_cast<size_t>(in.gcount()));
  return text;
}

// The first line bubblewrap wrote to the log about itself ("bwrap: ..."), if any.
std::string sandboxError(const std::string& log) {
  std::istringstream in(log);
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("bwrap: ", 0) == 0) return line;
  return "";
}

Evidence evidenceOf(int raw_status) {
  Evidence e;
  if (WIFEXITED(raw_status)) e.exit_code = WEXITSTATUS(raw_status);
  else e.signal = WTERMSIG(raw_status);
  return e;
}

// A sandbox this process runs: bubblewrap is its child and leads the
// process group QEMU is in.
class LocalSandbox : public Sandbox {
 public:
  explicit LocalSandbox(pid_t pid) : pid_(pid) {}
  ~LocalSandbox() override { stop(); }

  bool running() override {
    reap(false);
    return pid_ > 0;
  }
  std::optional<int> exitStatus() override {
    reap(false);
    return exit_status_;
  }
  Evidence exitEvidence() override { return evidence_; }
  void stop() override {
    if (!running()) return;
    ::kill(-pid_, SIGTERM); // the sandbox: QEMU dies with it (--die-with-parent)
    for (int i = 0; i < 200 && running(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    if (running()) {
      ::kill(-pid_, SIGKILL);
      reap(true);
    }
    exit_status_.reset(); // stopped, not finished
  }
  pid_t pid() const override { return pid_; }
  // The descriptor that becomes readable when it exits (the service waits
  // on it), or -1.
  int pidfd() const { return static_cast<int>(::syscall(SYS_pidfd_open, pid_, 0)); }

 private:
  void reap(bool block) {
    if (pid_ <= 0) return;
    siginfo_t info{};
    int r = ::waitid(P_PID, static_cast<id_t>(pid_), &info, WEXITED | WNOWAIT | (block ? 0 : WNOHANG));
    if (r != 0 || info.si_pid != pid_) return;
    // Exited: its group goes with it before it is reaped (after that, its
    // pid could name another process).
    int raw = killGroupAndReap(pid_);
    exit_status_ = WIFEXITED(raw) ? WEXITSTATUS(raw) : 128 + WTERMSIG(raw);
    evidence_ = evidenceOf(raw);
    pid_ = -1;
  }

  pid_t pid_;
  std::optional<int> exit_status_;
  Evidence evidence_;
};

struct Launch {
  std::unique_ptr<LocalSandbox> sandbox; // set once QEMU listens
  Evidence evidence;                      // otherwise: how the sandbox ended, if it did
  std::string failure;                    // otherwise: a failure before bubblewrap ran ("fork: ...")
};

// Starts bubblewrap around QEMU as a child, its output to `log_fd`, and
// waits until QEMU listens on its socket. QEMU binds the socket before it
// listens, and connecting in between would be refused: the kernel's table
// of the sandbox's network namespace (/proc/PID/net/unix) says when it
// listens, without connecting (the first connection starts the guest).
Launch launchOnce(const std::string& bwrap, const SandboxSpec& spec, int log_fd, const Binds& binds, bool with_proc) {
  Launch launch;
  int info[2];
  if (::pipe2(info, O_CLOEXEC) != 0) {
    launch.failure = std::string("pipe: ") + std::strerror(errno);
    return launch;
  }
  SpawnOptions options;
  options.argv = sandboxArgv(bwrap, info[1], spec, binds, with_proc);
  options.stdout_fd = log_fd;
  options.stderr_fd = log_fd;
  options.keep_fds = {info[1]};
  for (int fd : {binds.image_fd, binds.socket_dir_fd})
    if (fd >= 0) options.keep_fds.push_back(fd);
  // A simulator must not outlive who started it (kill -9 included): it
  // would wait for its console forever.
  options.die_with_parent = true;
  Result<pid_t> child = spawnProcess(options);
  ::close(info[1]);
  if (!child) {
    ::close(info[0]);
    launch.failure = child.status().message();
    return launch;
  }
  auto sandbox = std::make_unique<LocalSandbox>(*child);
  auto deadline = SteadyClock::now() + kStartTimeout;
  pid_t sandboxed = readSandboxPid(info[0], deadline);
  ::close(info[0]);
  std::string table = "/proc/" + std::to_string(sandboxed) + "/net/unix";
  struct stat st {};
  while (sandboxed <= 0 || ::stat(spec.socket.c_str(), &st) != 0 || !S_ISSOCK(st.st_mode) ||
         !unixSocketListening(spec.socket, table)) {
    if (sandboxed <= 0 || !sandbox->running() || SteadyClock::now() > deadline) {
      // How the sandbox (or QEMU in it) ended, once it has (it closed its
      // report: it is exiting).
      bool ending = sandboxed <= 0 || !sandbox->running();
      for (int i = 0; ending && i < 100 && sandbox->running(); ++i)
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      if (!sandbox->running()) launch.evidence = sandbox->exitEvidence();
      sandbox->stop();
      return launch;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  launch.sandbox = std::move(sandbox);
  return launch;
}

// A private /proc where the kernel allows one; where it does not (a service
// whose /proc has read-only overmounts, e.g. systemd's
// ProtectKernelTunables=), QEMU runs without /proc: it needs none.
Launch launch(const std::string& bwrap, const SandboxSpec& spec, int log_fd, const Binds& binds) {
  Launch first = launchOnce(bwrap, spec, log_fd, binds, true);
  if (first.sandbox || logText(log_fd).find("Can't mount proc") == std::string::npos) return first;
  if (::ftruncate(log_fd, 0) != 0) return first;
  return launchOnce(bwrap, spec, log_fd, binds, false);
}

// Why the sandbox did not start, from its log: bubblewrap's own error, or
// QEMU's failure in it.
Status failedToStart(const SandboxSpec& spec, const std::string& log_path, Evidence evidence) {
  evidence.tool_output = outputTail(log_path, 2048);
  std::string why = sandboxError(logText(log_path));
  if (!why.empty())
    return Status::infrastructure(Code::unavailable, "cannot confine QEMU for board " + spec.board + ": " + why,
                                  std::move(evidence));
  return Status::infrastructure(Code::unavailable,
                                "QEMU did not start for board " + spec.board + " (see " + log_path + ")",
                                std::move(evidence));
}

Status cannotConfine(const SandboxSpec& spec, const std::string& why) {
  return Status::infrastructure(Code::unavailable, "cannot confine QEMU for board " + spec.board + ": " + why);
}

Result<std::unique_ptr<Sandbox>> startLocal(const SandboxSpec& spec, const std::string& log_path) {
  std::string bwrap = findProgram("bwrap");
  if (bwrap.empty())
    return Status::infrastructure(Code::not_found,
                                  "cannot confine QEMU for board " + spec.board +
                                      ": bwrap not found in PATH (install Debian's bubblewrap package)");
  int log_fd = ::open(log_path.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0644);
  if (log_fd < 0) return Status::fromErrno("cannot open " + log_path, errno);
  Launch l = launch(bwrap, spec, log_fd, Binds{});
  ::close(log_fd);
  if (!l.failure.empty()) return cannotConfine(spec, l.failure);
  if (!l.sandbox) return failedToStart(spec, log_path, l.evidence);
  return std::unique_ptr<Sandbox>(std::move(l.sandbox));
}

// ---- the service's protocol ------------------------------------------------

// Sends `text` on the connection; false when hwfarmd is gone.
bool sendLine(int fd, const std::string& text) {
  std::string line = text + "\n";
  return ::send(fd, line.data(), line.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(line.size());
}

std::string statusWords(const Evidence& e) {
  if (e.exit_code) return "exit " + std::to_string(*e.exit_code);
  if (e.signal) return "signal " + std::to_string(e.signal);
  return "none 0";
}

Evidence parseStatusWords(std::istream& in) {
  std::string kind;
  int n = 0;
  in >> kind >> n;
  Evidence e;
  if (kind == "exit") e.exit_code = n;
  else if (kind == "signal") e.signal = n;
  return e;
}

// A sandbox the service runs for this process, on one connection.
class ServiceSandbox : public Sandbox {
 public:
  ServiceSandbox(int fd, pid_t pid) : fd_(fd), pid_(pid) {}
  ~ServiceSandbox() override { stop(); }

  bool running() override {
    read(0);
    return !ended_;
  }
  std::optional<int> exitStatus() override {
    read(0);
    return exit_status_;
  }
  Evidence exitEvidence() override { return evidence_; }
  // Hanging up stops it: the service kills the sandbox, reaps it, exits and
  // so closes its end, which is awaited (up to 5 s).
  void stop() override {
    if (fd_ < 0) return;
    ::shutdown(fd_, SHUT_WR);
    auto deadline = SteadyClock::now() + std::chrono::seconds(5);
    while (!eof_ && SteadyClock::now() < deadline) read(100);
    ::close(fd_);
    fd_ = -1;
    ended_ = true;
    exit_status_.reset(); // stopped, not finished
  }
  pid_t pid() const override { return ended_ ? -1 : pid_; }

 private:
  // Reads what the service said, waiting up to `wait_ms`.
  void read(int wait_ms) {
    if (fd_ < 0 || eof_) return;
    pollfd p{fd_, POLLIN, 0};
    if (::poll(&p, 1, wait_ms) <= 0) return;
    char buf[256];
    ssize_t n = ::recv(fd_, buf, sizeof buf, MSG_DONTWAIT);
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) return;
    if (n <= 0) {
      eof_ = true;
      if (!ended_) { // the service went away without a word
        ended_ = true;
        evidence_.signal = SIGKILL;
        exit_status_ = 128 + SIGKILL;
      }
      return;
    }
    pending_.append(buf, static_cast<size_t>(n));
    for (size_t end; (end = pending_.find('\n')) != std::string::npos; pending_.erase(0, end + 1)) {
      std::istringstream line(pending_.substr(0, end));
      std::string word;
      line >> word;
      if (word != "ended") continue;
      evidence_ = parseStatusWords(line);
      exit_status_ = evidence_.exit_code ? *evidence_.exit_code : 128 + evidence_.signal;
      ended_ = true;
    }
  }

  int fd_;
  pid_t pid_;
  bool ended_ = false;
  bool eof_ = false;
  std::string pending_;
  std::optional<int> exit_status_;
  Evidence evidence_;
};

// Sends the request: its length, the strings, and the three descriptors
// with the first byte.
bool sendRequest(int fd, const std::vector<std::string>& fields, const std::array<int, 3>& fds) {
  std::string body;
  for (const auto& f : fields) body.append(f).push_back('\0');
  uint32_t size = static_cast<uint32_t>(body.size());
  std::string message(reinterpret_cast<const char*>(&size), sizeof size);
  message += body;
  iovec iov{message.data(), 1};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * 3)] = {};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof control;
  cmsghdr* cm = CMSG_FIRSTHDR(&msg);
  cm->cmsg_level = SOL_SOCKET;
  cm->cmsg_type = SCM_RIGHTS;
  cm->cmsg_len = CMSG_LEN(sizeof(int) * 3);
  std::memcpy(CMSG_DATA(cm), fds.data(), sizeof(int) * 3);
  if (::sendmsg(fd, &msg, MSG_NOSIGNAL) != 1) return false;
  for (size_t done = 1; done < message.size();) {
    ssize_t n = ::send(fd, message.data() + done, message.size() - done, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += static_cast<size_t>(n);
  }
  return true;
}

// The service's first line, within `timeout`; empty on EOF or timeout.
std::string readLine(int fd, std::chrono::milliseconds timeout) {
  auto deadline = SteadyClock::now() + timeout;
  std::string line;
  char c;
  while (line.size() < 4096) {
    int wait_ms = static_cast<int>(
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - SteadyClock::now()).count());
    pollfd p{fd, POLLIN, 0};
    if (wait_ms <= 0 || ::poll(&p, 1, wait_ms) <= 0) return "";
    ssize_t n = ::recv(fd, &c, 1, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return "";
    if (c == '\n') return line;
    line += c;
  }
  return line;
}

struct Fd {
  int fd = -1;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

Result<std::unique_ptr<Sandbox>> startViaService(const SandboxSpec& spec, const std::string& log_path,
                                                 const std::string& socket_path) {
  std::string service = "the QEMU sandbox service " + socket_path;
  Fd image{::open(spec.image.c_str(), O_RDONLY | O_CLOEXEC)};
  if (image.fd < 0) return Status::fromErrno("cannot open " + spec.image, errno);
  Fd dir{::open(spec.socket_dir.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC)};
  if (dir.fd < 0) return Status::fromErrno("cannot open " + spec.socket_dir, errno);
  Fd log{::open(log_path.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0644)};
  if (log.fd < 0) return Status::fromErrno("cannot open " + log_path, errno);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (socket_path.size() >= sizeof addr.sun_path) return cannotConfine(spec, service + ": path too long");
  std::memcpy(addr.sun_path, socket_path.c_str(), socket_path.size() + 1);
  Fd conn{::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0)};
  if (conn.fd < 0 || ::connect(conn.fd, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) != 0)
    return cannotConfine(spec, service + ": cannot connect: " + std::strerror(errno) +
                                   " (is hwfarm-qemu-sandbox.socket active?)");
  std::vector<std::string> fields{kProtocol, spec.image, spec.socket_dir, spec.socket, spec.qemu};
  fields.insert(fields.end(), spec.qemu_args.begin(), spec.qemu_args.end());
  if (!sendRequest(conn.fd, fields, {image.fd, dir.fd, log.fd}))
    return cannotConfine(spec, service + ": cannot send the request: " + std::strerror(errno));
  // The service may try twice (with and without /proc).
  std::string answer = readLine(conn.fd, 2 * kStartTimeout + std::chrono::seconds(5));
  std::istringstream words(answer);
  std::string word;
  words >> word;
  if (word == "ready") {
    pid_t pid = 0;
    words >> pid;
    auto sandbox = std::make_unique<ServiceSandbox>(std::exchange(conn.fd, -1), pid);
    return std::unique_ptr<Sandbox>(std::move(sandbox));
  }
  if (word == "failed") {
    Evidence evidence = parseStatusWords(words);
    std::string why;
    std::getline(words >> std::ws, why);
    if (!why.empty()) return cannotConfine(spec, why);
    return failedToStart(spec, log_path, std::move(evidence));
  }
  return cannotConfine(spec, service + " did not answer (see journalctl -u 'hwfarm-qemu-sandbox@*')");
}

// Reads the request of serveSandboxRequest: its fields and descriptors.
bool readRequest(int fd, std::vector<std::string>* fields, std::vector<int>* fds, std::string* error) {
  uint32_t size = 0;
  iovec iov{&size, sizeof size};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * 4)] = {};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof control;
  ssize_t n = ::recvmsg(fd, &msg, MSG_CMSG_CLOEXEC | MSG_WAITALL);
  for (cmsghdr* cm = CMSG_FIRSTHDR(&msg); cm; cm = CMSG_NXTHDR(&msg, cm))
    if (cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == SCM_RIGHTS)
      for (size_t i = 0; i < (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int); ++i)
        fds->push_back(reinterpret_cast<int*>(CMSG_DATA(cm))[i]);
  if (n != sizeof size || size == 0 || size > kMaxRequest || fds->size() != 3 || (msg.msg_flags & MSG_CTRUNC)) {
    *error = "a malformed request";
    return false;
  }
  std::string body(size, '\0');
  for (size_t done = 0; done < size;) {
    ssize_t r = ::recv(fd, body.data() + done, size - done, 0);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) {
      *error = "a request cut short";
      return false;
    }
    done += static_cast<size_t>(r);
  }
  if (body.back() != '\0') {
    *error = "a malformed request";
    return false;
  }
  for (size_t at = 0; at < body.size(); at = body.find('\0', at) + 1) fields->push_back(body.c_str() + at);
  return true;
}

bool absoluteClean(const std::string& path) {
  return !path.empty() && path[0] == '/' && path.find("/../") == std::string::npos &&
         path.find("/./") == std::string::npos && path.compare(path.size() - std::min<size_t>(3, path.size()), 3, "/..") != 0;
}

} // namespace

Result<std::unique_ptr<Sandbox>> startSandbox(const SandboxSpec& spec, const std::string& log_path,
                                              const std::string& service_socket) {
  if (!service_socket.empty()) return startViaService(spec, log_path, service_socket);
  return startLocal(spec, log_path);
}

int serveSandboxRequest(int fd) {
  std::vector<std::string> fields;
  std::vector<int> fds;
  std::string error;
  if (!readRequest(fd, &fields, &fds, &error) || fields.size() < 5 || fields[0] != kProtocol) {
    sendLine(fd, "failed none 0 the QEMU sandbox service got " + (error.empty() ? "an unknown request" : error));
    return 1;
  }
  SandboxSpec spec;
  spec.image = fields[1];
  spec.socket_dir = fields[2];
  spec.socket = fields[3];
  spec.qemu = fields[4];
  spec.qemu_args.assign(fields.begin() + 5, fields.end());
  // The paths are only where the descriptors appear inside the sandbox, and
  // where QEMU is found: absolute, without "..".
  for (const std::string* p : {&spec.image, &spec.socket_dir, &spec.socket, &spec.qemu})
    if (!absoluteClean(*p)) {
      sendLine(fd, "failed none 0 the QEMU sandbox service refuses the path \"" + *p + "\"");
      return 1;
    }
  std::string bwrap = findProgram("bwrap");
  if (bwrap.empty()) {
    sendLine(fd, "failed none 0 bwrap not found in the QEMU sandbox service's PATH (install Debian's bubblewrap)");
    return 1;
  }
  Launch l = launch(bwrap, spec, fds[2], Binds{fds[0], fds[1]});
  for (int d : fds) ::close(d);
  if (!l.failure.empty()) {
    sendLine(fd, "failed none 0 " + l.failure);
    return 1;
  }
  if (!l.sandbox) {
    sendLine(fd, "failed " + statusWords(l.evidence));
    return 1;
  }
  if (!sendLine(fd, "ready " + std::to_string(l.sandbox->pid()))) return 0; // hwfarmd left: the sandbox goes
  // Until hwfarmd hangs up (then the sandbox is stopped) or QEMU ends (then
  // hwfarmd is told how).
  int exited = l.sandbox->pidfd();
  for (;;) {
    pollfd p[2] = {{fd, POLLIN | POLLRDHUP, 0}, {exited, POLLIN, 0}};
    int n = ::poll(p, exited >= 0 ? 2 : 1, exited >= 0 ? -1 : 100);
    if (n < 0 && errno != EINTR) break;
    if (p[0].revents) {
      char buf[64];
      if (::recv(fd, buf, sizeof buf, MSG_DONTWAIT) <= 0) break;
    }
    if (!l.sandbox->running()) {
      sendLine(fd, "ended " + statusWords(l.sandbox->exitEvidence()));
      return 0;
    }
  }
  l.sandbox->stop();
  return 0;
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

} // namespace hwfarm::drivers
