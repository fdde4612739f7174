#include "drivers/qemu_board.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>
#include <vector>

namespace hwfarm::drivers {

QemuBoard::QemuBoard(std::string name, config::QemuConfig config, std::string work_dir)
    : name_(std::move(name)), config_(std::move(config)), work_dir_(std::move(work_dir)) {}

QemuBoard::~QemuBoard() { powerOff(); }

Status QemuBoard::flash(const std::string& image) {
  std::error_code ec;
  std::filesystem::create_directories(work_dir_, ec);
  std::string staged = work_dir_ + "/" + name_ + ".elf";
  std::filesystem::copy_file(image, staged, std::filesystem::copy_options::overwrite_existing, ec);
  if (ec) return Status::failure("cannot stage image " + image + ": " + ec.message());
  image_ = staged;
  return Status::success();
}

void QemuBoard::clearImage() {
  if (!image_.empty()) ::unlink(image_.c_str());
  image_.clear();
}

Status QemuBoard::powerOn(std::string* console) {
  if (running()) return Status::failure("board " + name_ + " is already powered on");
  if (image_.empty()) return Status::failure("board " + name_ + " has no image: flash it first");
  std::string socket = work_dir_ + "/" + name_ + ".uart";
  ::unlink(socket.c_str());
  std::vector<std::string> argv{config_.binary, "-M", config_.machine};
  if (!config_.cpu.empty()) argv.insert(argv.end(), {"-cpu", config_.cpu});
  argv.insert(argv.end(), {"-display", "none", "-monitor", "none", "-chardev",
                           "socket,id=uart0,path=" + socket + ",server=on,wait=on", "-serial", "chardev:uart0",
                           "-semihosting-config", "enable=on,target=native", "-kernel", image_});
  argv.insert(argv.end(), config_.extra_args.begin(), config_.extra_args.end());
  if (socket.size() > 107)
    return Status::failure("the UART socket path " + socket + " is longer than 107 bytes: use a shorter state_dir");
  std::string log = logPath();
  exit_status_.reset();
  // Everything the child needs is prepared before fork(): a multithreaded
  // parent's child may only call async-signal-safe functions.
  std::vector<char*> args;
  for (auto& a : argv) args.push_back(a.data());
  args.push_back(nullptr);
  std::string cannot_run = "cannot run " + argv[0] + "\n";
  pid_t parent = ::getpid();
  pid_ = ::fork();
  if (pid_ < 0) return Status::failure(std::string("fork: ") + std::strerror(errno));
  if (pid_ == 0) {
    ::setpgid(0, 0);
    // A simulator must not outlive hwfarmd (kill -9 included): it would wait
    // for its console forever. (The check closes the race with an exit
    // that happened before prctl.)
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(1);
    int out = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    int in = ::open("/dev/null", O_RDONLY);
    // Without its log (a full disk) QEMU writes where hwfarmd does; a
    // redirection that fails half-way does not run at all.
    if (out >= 0 && (::dup2(out, 1) < 0 || ::dup2(out, 2) < 0)) ::_exit(126);
    if (in >= 0 && ::dup2(in, 0) < 0) ::_exit(126);
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    ::execvp(args[0], args.data());
    if (::write(2, cannot_run.data(), cannot_run.size()) < 0) {
      // Nothing more to do in a failed child.
    }
    ::_exit(127);
  }
  // QEMU creates the socket, then waits for the console to connect. It binds
  // the socket before it listens, and connecting in between would be
  // refused: wait until the kernel lists it as listening (without
  // connecting: the first connection starts the guest).
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  struct stat st {};
  while (::stat(socket.c_str(), &st) != 0 || !S_ISSOCK(st.st_mode) || !unixSocketListening(socket)) {
    if (!running() || std::chrono::steady_clock::now() > deadline) {
      powerOff();
      return Status::failure("QEMU did not start for board " + name_ + " (see " + log + ")");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  *console = "unix:" + socket;
  return Status::success();
}

bool unixSocketListening(const std::string& path) {
  std::ifstream table("/proc/net/unix");
  if (!table) return true; // cannot tell: assume it is (the connect will say otherwise)
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

void QemuBoard::reap(bool block) {
  if (pid_ <= 0) return;
  int raw = 0;
  pid_t r = ::waitpid(pid_, &raw, block ? 0 : WNOHANG);
  if (r != pid_) return;
  exit_status_ = WIFEXITED(raw) ? WEXITSTATUS(raw) : 128 + WTERMSIG(raw);
  pid_ = -1;
}

bool QemuBoard::running() {
  reap(false);
  return pid_ > 0;
}

std::optional<int> QemuBoard::exitStatus() {
  reap(false);
  return exit_status_;
}

Status QemuBoard::powerOff() {
  if (!running()) return Status::success();
  ::kill(-pid_, SIGTERM);
  for (int i = 0; i < 200 && running(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  if (running()) {
    ::kill(-pid_, SIGKILL);
    reap(true);
  }
  exit_status_.reset(); // stopped, not finished: the firmware has no status
  return Status::success();
}

} // namespace hwfarm::drivers
