// The simulator launcher (drivers/sim_launcher.h): a real hwfarm-launcher
// process on a real socket confines real QEMU boards for this process,
// which plays hwfarmd; and the launch request's parser.
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <thread>

#include "drivers/process_table.h"
#include "drivers/qemu_board.h"
#include "drivers/serial_port.h"
#include "drivers/sim_launcher.h"
#include "drivers/spawn.h"
#include "tests/support/firmware.h"
#include "tests/support/simulator.h"
#include "tests/support/process.h"
#include "tests/support/wait.h"

using namespace hwfarm::drivers;
using hwfarm::Status;
using hwfarm::test::bootFirmware;
using hwfarm::test::bootHang;
using hwfarm::test::firmware;
using hwfarm::test::qemuGone;
using hwfarm::test::qemuPid;
using hwfarm::test::readConsole;
using hwfarm::test::Process;
using hwfarm::test::readFile;
using hwfarm::test::TempDir;
using hwfarm::test::waitWhile;
using namespace std::chrono_literals;

namespace {

hwfarm::config::QemuConfig machine() {
  hwfarm::config::QemuConfig c;
  c.machine = "mps2-an385";
  return c;
}

// A hwfarm-launcher listening in `dir`, used by every QEMU board this
// process powers on while it exists.
class Launcher {
 public:
  explicit Launcher(const TempDir& dir)
      : socket_(dir.file("launcher.sock")),
        process_({HWFARM_LAUNCHER_BIN, "--listen", socket_}, dir.file("launcher.out"), dir.file("launcher.err")) {
    waitWhile([&] { return !unixSocketListening(socket_); }, 5s); // bound, then listening
    REQUIRE(unixSocketListening(socket_));
    setSimulatorLauncher(socket_);
  }
  ~Launcher() { setSimulatorLauncher(""); }
  const std::string& socket() const { return socket_; }
  Process& process() { return process_; }

 private:
  std::string socket_;
  Process process_;
};

// Sends `payload` with `fds` to the launcher at `socket`; its answer.
std::string ask(const std::string& socket, const std::string& payload, const std::vector<int>& fds) {
  auto fd = connectUnixSocket(socket, SOCK_SEQPACKET);
  REQUIRE(fd);
  REQUIRE(sendWithDescriptors(*fd, payload, fds));
  pollfd p{*fd, POLLIN, 0};
  REQUIRE(::poll(&p, 1, 10000) == 1);
  char answer[4096];
  ssize_t n = ::recv(*fd, answer, sizeof answer, 0);
  ::close(*fd);
  return n > 0 ? std::string(answer, static_cast<size_t>(n)) : "";
}

LaunchRequest validRequest() {
  return LaunchRequest{"/var/lib/hwfarm/boards/sim-0/sim-0.elf",
                       "/var/lib/hwfarm/boards/sim-0/sock",
                       true,
                       {"HWFARM_INSTANCE=12.345", "HWFARM_CHILD=QEMU simulator sim-0"},
                       {"/usr/bin/qemu-system-arm", "-M", "mps2-an385", "-kernel", "/x.elf"}};
}

}  // namespace

TEST_CASE("a launch request round-trips, and every malformed one is refused with what is wrong") {
  LaunchRequest request = validRequest();
  auto parsed = parseLaunchRequest(encodeLaunchRequest(request));
  REQUIRE(parsed);
  CHECK(parsed->image == request.image);
  CHECK(parsed->socket_dir == request.socket_dir);
  CHECK(parsed->with_proc);
  CHECK(parsed->marks == request.marks);
  CHECK(parsed->qemu == request.qemu);
  request.with_proc = false;
  request.qemu.push_back("");  // an empty argument stays one
  parsed = parseLaunchRequest(encodeLaunchRequest(request));
  REQUIRE(parsed);
  CHECK_FALSE(parsed->with_proc);
  CHECK(parsed->qemu == request.qemu);

  auto error = [](const std::string& payload) {
    auto r = parseLaunchRequest(payload);
    REQUIRE_FALSE(r);
    CHECK(r.status().isInfrastructure());
    return r.status().message();
  };
  using namespace std::string_literals;
  const std::string head = "hwfarm-launch 1\0image=/a/b.elf\0socket_dir=/a/sock\0"s;
  CHECK(error("") == "launch request: not a list of NUL-terminated fields");
  CHECK(error("hwfarm-launch 2\0"s) == "launch request: not \"hwfarm-launch 1\" (another hwfarm version's launcher?)");
  CHECK(error(head + "arg=/usr/bin/qemu"s) == "launch request: not a list of NUL-terminated fields");
  CHECK(error(head) == "launch request: no QEMU command");
  CHECK(error("hwfarm-launch 1\0socket_dir=/a\0arg=/q\0"s) == "launch request: no image");
  CHECK(error("hwfarm-launch 1\0image=/a\0arg=/q\0"s) == "launch request: no socket_dir");
  CHECK(error(head + "image=/c\0"s) == "launch request: image given twice");
  CHECK(error("hwfarm-launch 1\0image=a/b.elf\0"s) ==
        "launch request: image \"a/b.elf\" is not an absolute, normalized path");
  CHECK(error("hwfarm-launch 1\0image=/a/../etc/shadow\0"s) ==
        "launch request: image \"/a/../etc/shadow\" is not an absolute, normalized path");
  CHECK(error("hwfarm-launch 1\0image=/a\0socket_dir=/\0"s) ==
        "launch request: socket_dir \"/\" is not an absolute, normalized path");
  CHECK(error(head + "proc=yes\0"s) == "launch request: proc is \"yes\", not 0 or 1");
  CHECK(error(head + "arg=qemu-system-arm\0"s) == "launch request: QEMU \"qemu-system-arm\" is not an absolute path");
  CHECK(error(head + "noise\0"s) == "launch request: field 3 has no '='");
  CHECK(error(head + "bind=/etc\0"s) == "launch request: unknown field \"bind\"");
  // bubblewrap's environment is the marks: nothing else gets in.
  CHECK(error(head + "mark=LD_PRELOAD=/tmp/x.so\0"s) ==
        "launch request: mark \"LD_PRELOAD=/tmp/x.so\" is not one of hwfarmd's marks");
  // nor a line of its own in the launcher's log.
  CHECK(error(head + "mark=HWFARM_CHILD=x\nhwfarm-launcher: forged\0"s) ==
        "launch request: mark \"HWFARM_CHILD=x\nhwfarm-launcher: forged\" is not one of hwfarmd's marks");
  std::string marks = head;
  for (size_t i = 0; i <= kLaunchMarksMax; ++i) marks += "mark=HWFARM_CHILD=x\0"s;
  CHECK(error(marks) == "launch request: more than 16 marks");
  std::string args = head;
  for (size_t i = 0; i <= kLaunchArgsMax; ++i) args += "arg=/q\0"s;
  CHECK(error(args) == "launch request: more than 512 arguments");
  CHECK(error(std::string(kLaunchRequestMax + 1, '\0')) == "launch request: larger than 65536 bytes");
}

TEST_CASE("through the launcher, a simulated board runs firmware to its end, confined as before") {
  TempDir dir;
  Launcher launcher(dir);
  struct stat st {};
  REQUIRE(::stat(launcher.socket().c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0600);  // only its own user (and root) may connect
  // Given a qemu.binary that looks around before it becomes QEMU,
  hwfarm::config::QemuConfig c = machine();
  c.binary = dir.script("qemu-look",
                    "for f in /etc/passwd " + dir.file("launcher.err") + " " + dir.file("qemu/sim.elf") +
                        "; do if [ -e \"$f\" ]; then echo \"visible $f\"; else echo \"hidden $f\"; fi; done\n"
                        "grep -E '^(CapEff|NoNewPrivs)' /proc/self/status\n"
                        "echo fds $(ls /proc/self/fd)\n"
                        "echo marks $HWFARM_CHILD\n"
                        "exec qemu-system-arm \"$@\"\n");
  QemuBoard board("sim", c, dir.file("qemu"));
  int fd = bootFirmware(board, "pass");
  // the launcher started bubblewrap (not this process),
  auto stat = readProcessStat(board.pid());
  REQUIRE(stat);
  CHECK(stat->ppid == launcher.process().pid());
  CHECK(std::find(processEnvironment(board.pid()).begin(), processEnvironment(board.pid()).end(),
                  "HWFARM_CHILD=QEMU simulator sim") != processEnvironment(board.pid()).end());
  // the firmware runs to its END and resets the simulator,
  CHECK(readConsole(fd, "HWFARM END status=0"));
  CHECK(readConsole(fd, ""));
  ::close(fd);
  std::optional<QemuEnd> end = board.waitEnd(10s);
  REQUIRE(end);
  CHECK(end->describe() == "QEMU was reset by its firmware");
  CHECK(board.exitStatus() == 0);
  // and QEMU saw what it sees without the launcher: its image, no host
  // file, no capability, only stdin, stdout and stderr, hwfarmd's marks.
  std::string seen = readFile(board.logPath());
  INFO(seen);
  CHECK(seen.find("hidden /etc/passwd\n") != std::string::npos);
  CHECK(seen.find("hidden " + dir.file("launcher.err") + "\n") != std::string::npos);
  CHECK(seen.find("visible " + dir.file("qemu/sim.elf") + "\n") != std::string::npos);
  CHECK(seen.find("CapEff:\t0000000000000000\n") != std::string::npos);
  CHECK(seen.find("NoNewPrivs:\t1\n") != std::string::npos);
  CHECK(seen.find("fds 0 1 2 3\n") != std::string::npos);
  CHECK(seen.find("marks QEMU simulator sim\n") != std::string::npos);
}

TEST_CASE("through the launcher, power off stops QEMU and a killed QEMU or sandbox is reported as before") {
  TempDir dir;
  Launcher launcher(dir);
  QemuBoard board("sim", machine(), dir.file("qemu"));
  // Power off: QEMU and its sandbox are gone, the board is off.
  int fd = bootHang(board);
  pid_t bwrap = board.pid();
  board.powerOff();
  CHECK_FALSE(board.running());
  CHECK_FALSE(board.end());
  CHECK(readConsole(fd, ""));
  ::close(fd);
  waitWhile([&] { return qemuPid(dir.path()) != 0 || readProcessStat(bwrap); }, 5s);
  CHECK(qemuPid(dir.path()) == 0);
  CHECK_FALSE(readProcessStat(bwrap));  // reaped by the launcher
  // QEMU killed by a signal: the signal, from bubblewrap's report.
  fd = bootHang(board);
  pid_t qemu = qemuPid(dir.path());
  REQUIRE(qemu > 0);
  REQUIRE(::kill(qemu, SIGABRT) == 0);
  std::optional<QemuEnd> end = board.waitEnd(10s);
  REQUIRE(end);
  CHECK(end->describe() == "QEMU was killed by signal 6 (Aborted)");
  CHECK(board.exitStatus() == 128 + SIGABRT);
  ::close(fd);
  // The sandbox killed from outside: told apart, QEMU gone with it.
  fd = bootHang(board);
  REQUIRE(::kill(board.pid(), SIGKILL) == 0);
  end = board.waitEnd(10s);
  REQUIRE(end);
  CHECK(end->describe() == "QEMU's sandbox was killed by signal 9 (Killed)");
  CHECK(readConsole(fd, ""));
  ::close(fd);
  CHECK(qemuGone(dir.path()));
  // The launcher still serves.
  CHECK(launcher.process().running());
}

TEST_CASE("a simulator does not outlive the hwfarmd that asked for it, nor the launcher that started it") {
  TempDir dir;
  Launcher launcher(dir);
  SECTION("the client dies (kill -9) with its simulator running: the launcher stops it") {
    int up[2];
    REQUIRE(::pipe(up) == 0);
    pid_t client = ::fork();
    REQUIRE(client >= 0);
    if (client == 0) {  // plays hwfarmd: powers a board on and waits to be killed
      QemuBoard board("sim", machine(), dir.file("qemu"));
      std::string console;
      bool on = board.flash(firmware("hang")).ok() && board.powerOn(&console).ok();
      char c = on ? '1' : '0';
      (void)!::write(up[1], &c, 1);
      ::pause();
      ::_exit(0);
    }
    ::close(up[1]);
    char c = 0;
    REQUIRE(::read(up[0], &c, 1) == 1);
    ::close(up[0]);
    REQUIRE(c == '1');
    REQUIRE(qemuPid(dir.path()) != 0);
    ::kill(client, SIGKILL);
    ::waitpid(client, nullptr, 0);
    CHECK(qemuGone(dir.path()));
    CHECK(launcher.process().running());
    CHECK(hwfarm::test::waitForText(dir.file("launcher.err"), "hwfarm-launcher: QEMU simulator sim ended", 5s));
  }
  SECTION("the launcher dies: the board reports its sandbox killed, and QEMU is gone") {
    QemuBoard board("sim", machine(), dir.file("qemu"));
    int fd = bootHang(board);
    launcher.process().signal(SIGKILL);
    std::optional<QemuEnd> end = board.waitEnd(10s);
    REQUIRE(end);
    CHECK(end->describe() == "QEMU's sandbox was killed by signal 9 (Killed)");
    CHECK(readConsole(fd, ""));
    ::close(fd);
    CHECK(qemuGone(dir.path()));
  }
  SECTION("SIGTERM stops the launcher and every simulator it runs") {
    QemuBoard board("sim", machine(), dir.file("qemu"));
    int fd = bootHang(board);
    launcher.process().signal(SIGTERM);
    auto status = launcher.process().wait(10s);
    REQUIRE(status);
    CHECK(status->exited);
    CHECK(status->code == 0);
    std::optional<QemuEnd> end = board.waitEnd(10s);
    REQUIRE(end);
    CHECK(end->describe() == "QEMU's sandbox was killed by signal 9 (Killed)");
    ::close(fd);
    CHECK(qemuGone(dir.path()));
  }
}

TEST_CASE("the launcher refuses what it cannot serve, with what is wrong, and power on fails as infrastructure") {
  TempDir dir;
  QemuBoard board("sim", machine(), dir.file("qemu"));
  REQUIRE(board.flash(firmware("pass")).ok());
  std::string console;
  SECTION("no launcher listening") {
    setSimulatorLauncher(dir.file("none.sock"));
    Status s = board.powerOn(&console);
    setSimulatorLauncher("");
    REQUIRE_FALSE(s.ok());
    CHECK(s.isInfrastructure());
    CHECK(s.message() == "cannot confine QEMU for board sim: cannot reach the simulator launcher at " +
                             dir.file("none.sock") +
                             " (is hwfarm-launcher.socket started?): No such file or directory");
    CHECK_FALSE(board.running());
  }
  SECTION("a launcher without bubblewrap") {
    Launcher launcher(dir);
    // (restarted without bwrap in its PATH)
    launcher.process().signal(SIGKILL);
    launcher.process().wait(5s);
    Process bare({HWFARM_LAUNCHER_BIN, "--listen", launcher.socket()}, dir.file("bare.out"), dir.file("bare.err"),
                 {{"PATH", dir.file("nothing-here")}});
    waitWhile([&] { return readFile(dir.file("bare.err")).empty(); }, 5s);
    CHECK(readFile(dir.file("bare.err")) ==
          "hwfarm-launcher: bwrap not found in PATH: every simulator will be refused\n");
    Status s = board.powerOn(&console);
    REQUIRE_FALSE(s.ok());
    CHECK(s.message() ==
          "cannot confine QEMU for board sim: bwrap not found in PATH (install Debian's bubblewrap package)");
    CHECK_FALSE(board.running());
  }
  SECTION("requests that are not hwfarmd's") {
    Launcher launcher(dir);
    int pipe_fds[2];
    REQUIRE(::pipe(pipe_fds) == 0);
    std::string bad = encodeLaunchRequest(validRequest()) + "mark=LD_PRELOAD=/tmp/x.so";
    bad += '\0';
    CHECK(ask(launcher.socket(), bad, {pipe_fds[1], pipe_fds[1], pipe_fds[1]}) ==
          "error launch request: mark \"LD_PRELOAD=/tmp/x.so\" is not one of hwfarmd's marks");
    CHECK(ask(launcher.socket(), encodeLaunchRequest(validRequest()), {}) ==
          "error launch request: not sent with exactly 3 descriptors");
    CHECK(ask(launcher.socket(), std::string(kLaunchRequestMax + 10, 'x'), {pipe_fds[1], pipe_fds[1], pipe_fds[1]}) ==
          "error launch request: larger than 65536 bytes");
    ::close(pipe_fds[0]);
    ::close(pipe_fds[1]);
    // and it still serves hwfarmd's.
    Status s = board.powerOn(&console);
    INFO(s.toString());
    CHECK(s.ok());
    board.powerOff();
  }
}

TEST_CASE("hwfarm-launcher's command line") {
  auto help = hwfarm::test::runCommand({HWFARM_LAUNCHER_BIN, "--help"});
  CHECK(help.status.exited);
  CHECK(help.status.code == 0);
  CHECK(help.out.rfind("usage: hwfarm-launcher [--listen PATH]\n", 0) == 0);
  auto bad = hwfarm::test::runCommand({HWFARM_LAUNCHER_BIN, "--bogus"});
  CHECK(bad.status.code == 2);
  CHECK(bad.err.rfind("hwfarm-launcher: unknown argument \"--bogus\"\n", 0) == 0);
  // Not started by systemd and no --listen: nothing to serve.
  auto none = hwfarm::test::runCommand({HWFARM_LAUNCHER_BIN});
  CHECK(none.status.code == 1);
  CHECK(none.err == "hwfarm-launcher: no socket from systemd (LISTEN_FDS); use --listen PATH\n");
}

TEST_CASE("a child can get the descriptors it is passed at 3, 4, ... whatever numbers they had") {
  // Given two pipes whose read ends sit at 4 and 3 (each at the other's
  // target), saved and restored around the test,
  int saved3 = ::fcntl(3, F_DUPFD_CLOEXEC, 100), saved4 = ::fcntl(4, F_DUPFD_CLOEXEC, 100);
  int a[2], b[2];
  REQUIRE(::pipe2(a, O_CLOEXEC) == 0);
  REQUIRE(::pipe2(b, O_CLOEXEC) == 0);
  for (int* fd : {&a[0], &a[1], &b[0], &b[1]}) {  // away from 3 and 4 first
    int high = ::fcntl(*fd, F_DUPFD_CLOEXEC, 50);
    ::close(*fd);
    *fd = high;
  }
  REQUIRE(::dup3(a[0], 4, O_CLOEXEC) == 4);
  REQUIRE(::dup3(b[0], 3, O_CLOEXEC) == 3);
  REQUIRE(::write(a[1], "first\n", 6) == 6);
  REQUIRE(::write(b[1], "second\n", 7) == 7);
  for (int fd : {a[0], a[1], b[0], b[1]}) ::close(fd);
  TempDir dir;
  int out = ::open(dir.file("out").c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
  SpawnOptions options;
  options.argv = {"/bin/sh", "-c", "read x <&3; read y <&4; echo \"$x $y\"; ls /proc/self/fd | tr '\\n' ' '"};
  options.stdout_fd = out;
  options.keep_fds = {4, 3};  // a's read end first: it becomes 3
  options.renumber_keep_fds = true;
  options.environment = std::vector<std::string>{"HWFARM_CHILD=renumbered"};
  auto child = spawnProcess(options);
  REQUIRE(child);
  int raw = killGroupAndReap(*child);
  ::close(out);
  for (int fd : {3, 4}) ::close(fd);
  if (saved3 >= 0) ::dup3(saved3, 3, O_CLOEXEC), ::close(saved3);
  if (saved4 >= 0) ::dup3(saved4, 4, O_CLOEXEC), ::close(saved4);
  CHECK(WIFEXITED(raw));
  // the child reads the first pipe at 3 and the second at 4, and holds
  // nothing else (5: ls reading /proc/self/fd).
  CHECK(readFile(dir.file("out")) == "first second\n0 1 2 3 4 5 ");
}
