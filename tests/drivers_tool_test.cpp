// Flashers and power switches run as real processes: deadlines kill the
// whole process group, output is captured, missing tools are named.
#include <catch2/catch.hpp>

#include <dlfcn.h>
#include <linux/sched.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <thread>

#include <atomic>
#include <cstring>
#include <fcntl.h>

#include "drivers/flasher.h"
#include "drivers/power.h"
#include "drivers/tool_runner.h"
#include "tests/support/process.h"
#include "tests/support/wait.h"

using namespace hwfarm::drivers;
using hwfarm::test::waitWhile;
using hwfarm::test::readFile;
using hwfarm::test::TempDir;
using namespace std::chrono_literals;

namespace {

bool alive(pid_t pid) { return hwfarm::test::processAlive(pid); }

hwfarm::config::FlashConfig preset(const std::string& driver, std::map<std::string, std::string> options) {
  hwfarm::config::FlashConfig c;
  c.driver = driver;
  c.options = std::move(options);
  return c;
}

// Pid reuse on demand. While `g_reuse_reaped` is set, every pid that
// waitpid() reaps is at once given to a new process (clone3 with set_tid,
// which needs root: CI runs as root) that leads a process group of that id,
// as an unrelated process started right after could. The code under test
// calls waitpid through this definition (it interposes libc's).
std::atomic<bool> g_reuse_reaped{false};
std::vector<pid_t> g_reusers; // the processes that took a reaped pid
std::string g_reuse_error;

pid_t startReuser(pid_t pid) {
  int ready[2];
  if (::pipe(ready) != 0) return -1;
  clone_args args{};
  args.exit_signal = SIGCHLD;
  args.set_tid = reinterpret_cast<uint64_t>(&pid);
  args.set_tid_size = 1;
  long child = ::syscall(SYS_clone3, &args, sizeof args);
  if (child == 0) {
    ::setpgid(0, 0);
    char c = 1;
    if (::write(ready[1], &c, 1) < 0) ::_exit(1);
    for (;;) ::pause();
  }
  ::close(ready[1]);
  char c;
  if (child > 0 && ::read(ready[0], &c, 1) != 1) child = -1;
  ::close(ready[0]);
  return static_cast<pid_t>(child);
}

} // namespace

extern "C" pid_t waitpid(pid_t pid, int* status, int options) {
  using Real = pid_t (*)(pid_t, int*, int);
  static Real real = reinterpret_cast<Real>(::dlsym(RTLD_NEXT, "waitpid"));
  pid_t reaped = real(pid, status, options);
  if (reaped > 0 && g_reuse_reaped.exchange(false)) {
    pid_t reuser = startReuser(reaped);
    if (reuser == reaped) g_reusers.push_back(reuser);
    else g_reuse_error = "cannot start a process with the reaped pid " + std::to_string(reaped) + ": " +
                         std::strerror(errno) + " (this test needs root)";
  }
  return reaped;
}

TEST_CASE("a tool's process group is killed before the tool is reaped (pid reuse)") {
  TempDir dir;
  ToolOptions options;
  options.log_path = dir.file("flash.log");
  // Given a flasher that exits, and a new process that takes the flasher's
  // pid (and leads a group of that id) the moment the flasher is reaped,
  g_reuse_reaped = true;
  auto r = runTool({"/bin/sh", "-c", "echo flashed"}, options);
  g_reuse_reaped = false;
  REQUIRE(r.ok());
  INFO(g_reuse_error);
  REQUIRE(g_reuse_error.empty());
  REQUIRE(g_reusers.size() == 1);
  pid_t reuser = g_reusers.back();
  g_reusers.clear();
  // the runner's "kill whatever the tool left behind" did not hit that
  // process: the group was killed while the flasher was still unreaped.
  // (A SIGKILL sent earlier fixes the exit signal at once; our SIGUSR1 is the
  // exit signal only if nothing killed it before.)
  ::kill(reuser, SIGUSR1);
  int status = 0;
  ::waitpid(reuser, &status, 0);
  REQUIRE(WIFSIGNALED(status));
  REQUIRE(WTERMSIG(status) == SIGUSR1);
}

TEST_CASE("a tool that exits leaves no background process behind") {
  TempDir dir;
  ToolOptions options;
  options.log_path = dir.file("flash.log");
  std::string pidfile = dir.file("grandchild.pid");
  auto r = runTool({"/bin/sh", "-c", "sleep 60 & echo $! > " + pidfile + "; echo flashed"}, options);
  REQUIRE(r.ok());
  pid_t grandchild = std::stoi(readFile(pidfile));
  waitWhile([&] { return alive(grandchild); }, 1s);
  REQUIRE_FALSE(alive(grandchild));
}

TEST_CASE("a tool inherits no descriptor but stdin, stdout and stderr") {
  TempDir dir;
  // Given descriptors open in the caller, one of them without close-on-exec,
  int plain = ::open(dir.write("secret", "x").c_str(), O_RDONLY);
  int pipe_fds[2];
  REQUIRE(::pipe(pipe_fds) == 0);
  REQUIRE(plain > 2);
  ToolOptions options;
  options.log_path = dir.file("fds.log");
  // the tool sees only 0, 1 and 2 (and ls's own directory handle).
  auto r = runTool({"/bin/sh", "-c", "ls /proc/self/fd"}, options);
  ::close(plain);
  ::close(pipe_fds[0]);
  ::close(pipe_fds[1]);
  REQUIRE(r.ok());
  std::string fds = readFile(dir.file("fds.log"));
  REQUIRE((fds == "0\n1\n2\n3\n")); // 3: ls reading /proc/self/fd
}

TEST_CASE("a tool past its deadline is killed with every process it started") {
  TempDir dir;
  ToolOptions options;
  options.timeout = 300ms;
  options.kill_grace = 300ms;
  options.log_path = dir.file("flash.log");
  std::string pidfile = dir.file("grandchild.pid");
  // The "flasher" starts a grandchild that ignores SIGTERM, then hangs.
  auto r = runTool({"/bin/sh", "-c", "(trap '' TERM; exec sleep 60) & echo $! > " + pidfile + "; echo flashing; sleep 60"},
                   options);
  REQUIRE(r.started);
  REQUIRE(r.timed_out);
  REQUIRE_FALSE(r.ok());
  REQUIRE(r.describe() == "killed after its 0.3 s timeout");
  REQUIRE(r.output_tail == "flashing\n");
  // As a Status: a timeout of the lab, with the signal that ended the tool
  // (the shell, by SIGTERM) and no exit status.
  hwfarm::Status s = r.toStatus("flash: ");
  REQUIRE(s.is(hwfarm::Code::timeout));
  REQUIRE(s.isInfrastructure());
  REQUIRE_FALSE(s.evidence().exit_code);
  REQUIRE(s.evidence().signal == SIGTERM);
  REQUIRE(s.evidence().tool_output == "flashing\n");
  REQUIRE(s.message() == "flash: killed after its 0.3 s timeout; output: flashing\n");
  pid_t grandchild = std::stoi(readFile(pidfile));
  waitWhile([&] { return alive(grandchild); }, 5s); // killed, not yet reaped
  REQUIRE_FALSE(alive(grandchild));
}

TEST_CASE("a failing tool reports its status and the tail of its output") {
  TempDir dir;
  ToolOptions options;
  options.log_path = dir.file("flash.log");
  options.tail_bytes = 48; // the last two lines and a partial one, which is dropped
  auto r = runTool({"/bin/sh", "-c", "for i in 1 2 3 4 5 6; do echo line $i of noise; done; "
                                     "echo 'Error: no ST-LINK detected' >&2; exit 3"},
                   options);
  REQUIRE(r.started);
  REQUIRE(r.exit_code == 3);
  REQUIRE(r.describe() == "exited with status 3");
  REQUIRE(r.output_tail == "line 6 of noise\nError: no ST-LINK detected\n");
  REQUIRE(readFile(dir.file("flash.log")).find("line 1 of noise") == 0); // the whole log is kept
  // A tool a signal ends has that signal and no exit status as evidence.
  hwfarm::Status killed = runTool({"/bin/sh", "-c", "kill -USR1 $$"}, options).toStatus();
  REQUIRE(killed.is(hwfarm::Code::io_error));
  REQUIRE(killed.isInfrastructure());
  REQUIRE(killed.evidence().signal == SIGUSR1);
  REQUIRE_FALSE(killed.evidence().exit_code);
  REQUIRE(killed.message() == "killed by signal 10 (User defined signal 1)");
  REQUIRE(runTool({"/bin/true"}, options).toStatus().ok());
}

TEST_CASE("a missing tool is named in the error") {
  auto r = runTool({"hwfarm-no-such-flasher", "--version"}, {});
  REQUIRE_FALSE(r.started);
  REQUIRE(r.describe() == "tool \"hwfarm-no-such-flasher\" not found in PATH or not executable");
  auto abs = runTool({"/nonexistent/openocd"}, {});
  REQUIRE(abs.describe() == "tool \"/nonexistent/openocd\" not found or not executable");
  // It never ran: not_found, with no evidence from a tool.
  hwfarm::Status missing = r.toStatus();
  REQUIRE(missing.is(hwfarm::Code::not_found));
  REQUIRE(missing.isInfrastructure());
  REQUIRE(missing.evidence().empty());
}

TEST_CASE("flasher presets pass the board's USB serial to pick the right probe") {
  TempDir dir;
  FlashTarget t{"nucleo-1", "066DFF535155", "/dev/ttyACM3"};
  REQUIRE(flashArgv(preset("openocd", {{"interface", "interface/stlink.cfg"}, {"target", "target/stm32f4x.cfg"}}),
                    "fw.elf", t, dir.path()).value() ==
          std::vector<std::string>{"openocd", "-f", "interface/stlink.cfg", "-c", "adapter serial 066DFF535155", "-f",
                                   "target/stm32f4x.cfg", "-c", "program {fw.elf} verify reset exit"});
  REQUIRE(flashArgv(preset("pyocd", {{"target", "stm32f429zi"}}), "fw.elf", t, dir.path()).value() ==
          std::vector<std::string>{"pyocd", "flash", "--target", "stm32f429zi", "--uid", "066DFF535155", "fw.elf"});
  REQUIRE(flashArgv(preset("st-flash", {{"address", "0x08000000"}}), "fw.bin", t, dir.path()).value() ==
          std::vector<std::string>{"st-flash", "--serial", "066DFF535155", "--reset", "write", "fw.bin", "0x08000000"});
  REQUIRE(flashArgv(preset("dfu-util", {{"alt", "0"}, {"address", "0x08000000"}}), "fw.bin", t, dir.path()).value() ==
          std::vector<std::string>{"dfu-util", "--alt", "0", "--serial", "066DFF535155", "--dfuse-address",
                                   "0x08000000:leave", "--download", "fw.bin"});
  REQUIRE(flashArgv(preset("esptool", {{"chip", "esp32"}, {"baud", "460800"}, {"address", "0x0"}}), "fw.bin", t,
                    dir.path()).value() ==
          std::vector<std::string>{"esptool", "--chip", "esp32", "--port", "/dev/ttyACM3", "--baud", "460800",
                                   "write_flash", "0x0", "fw.bin"});
  REQUIRE(flashArgv(preset("nrfjprog", {{"family", "NRF52"}}), "fw.hex", t, dir.path()).value() ==
          std::vector<std::string>{"nrfjprog", "--family", "NRF52", "--snr", "066DFF535155", "--program", "fw.hex",
                                   "--sectorerase", "--verify", "--reset"});
  auto jlink = flashArgv(preset("jlink", {{"device", "STM32F429ZI"}, {"interface", "SWD"}, {"speed_khz", "4000"},
                                          {"address", "0x08000000"}}),
                         "fw.bin", t, dir.path()).value();
  REQUIRE(jlink == std::vector<std::string>{"JLinkExe", "-USB", "066DFF535155", "-device", "STM32F429ZI", "-if", "SWD",
                                            "-speed", "4000", "-autoconnect", "1", "-ExitOnError", "1",
                                            "-CommandFile", dir.file("jlink-nucleo-1.jlink")});
  REQUIRE(readFile(dir.file("jlink-nucleo-1.jlink")) == "loadfile fw.bin 0x08000000\nr\ng\nexit\n");
  auto with_tool = preset("pyocd", {{"target", "x"}});
  with_tool.tool = "/opt/pyocd/bin/pyocd";
  with_tool.extra_args = {"--connect", "under-reset", "--board-id={usb_serial}"};
  auto argv = flashArgv(with_tool, "fw.elf", t, dir.path()).value();
  REQUIRE(argv.front() == "/opt/pyocd/bin/pyocd");
  REQUIRE(argv.back() == "--board-id=066DFF535155");
}

TEST_CASE("a command flasher substitutes its placeholders and runs without a shell") {
  TempDir dir;
  hwfarm::config::FlashConfig c;
  c.driver = "command";
  c.argv = {"/bin/echo", "{board}", "sn={usb_serial}", "{image}", "on {serial_port}", "$HOME;true"};
  c.timeout_s = 5;
  auto r = flash(c, "/tmp/fw image.elf", {"b1", "066D", "/dev/ttyACM0"}, dir.file("log"), dir.path());
  REQUIRE(r.ok());
  // No shell: "$HOME;true" reaches the tool verbatim, the space stays in one argument.
  REQUIRE(readFile(dir.file("log")) == "b1 sn=066D /tmp/fw image.elf on /dev/ttyACM0 $HOME;true\n");
}

TEST_CASE("a failing command flasher is an infrastructure failure with its exit status and output") {
  TempDir dir;
  hwfarm::config::FlashConfig c;
  c.driver = "command";
  c.argv = {"/bin/sh", "-c", "echo 'probe {usb_serial} not found' >&2; exit 3"};
  c.timeout_s = 5;
  // Given a flasher that prints why and exits 3,
  hwfarm::Status s = flash(c, "/tmp/fw.elf", {"b1", "066D", ""}, dir.file("log"), dir.path());
  // the flash fails as the lab's failure, with the exit status and the
  // tool's output as evidence, and the same text in the message.
  REQUIRE_FALSE(s.ok());
  REQUIRE(s.isInfrastructure());
  REQUIRE(s.is(hwfarm::Code::io_error));
  REQUIRE(s.evidence().exit_code == 3);
  REQUIRE(s.evidence().signal == 0);
  REQUIRE(s.evidence().tool_output == "probe 066D not found\n");
  REQUIRE(s.message() == "exited with status 3; output: probe 066D not found\n");
}

TEST_CASE("power switches: uhubctl ports, operator commands and none") {
  TempDir dir;
  FlashTarget t{"nucleo-1", "066D", "/dev/ttyACM3"};
  hwfarm::config::PowerConfig hub;
  hub.driver = "uhubctl";
  hub.hub = "1-1.4";
  hub.port = 2;
  hub.off_s = 1.5;
  REQUIRE(powerArgv(hub, PowerAction::cycle, t) ==
          std::vector<std::vector<std::string>>{{"uhubctl", "--location", "1-1.4", "--ports", "2", "--action", "cycle",
                                                 "--delay", "1.5"}});
  REQUIRE(powerArgv(hub, PowerAction::off, t).at(0).at(6) == "off");
  // A run's boot turns the board off (the off half of a cycle), then on.
  REQUIRE(powerArgv(hub, PowerAction::cycle_off, t) == powerArgv(hub, PowerAction::off, t));

  hwfarm::config::PowerConfig relay;
  relay.driver = "command";
  relay.on = {"/bin/sh", "-c", "echo on {board} >> " + dir.file("relay.log")};
  relay.off = {"/bin/sh", "-c", "echo off {board} >> " + dir.file("relay.log")};
  relay.off_s = 0.05;
  // A cycle without its own command is off, a pause, then on.
  REQUIRE(power(relay, PowerAction::cycle, t, dir.file("power.log")).ok());
  REQUIRE(readFile(dir.file("relay.log")) == "off nucleo-1\non nucleo-1\n");
  // The off half of a cycle runs the off command only, even with a cycle
  // command of its own, and says "off" in its failures.
  relay.cycle = {"/bin/sh", "-c", "echo cycle {board} >> " + dir.file("relay.log")};
  REQUIRE(power(relay, PowerAction::cycle_off, t, dir.file("power.log")).ok());
  REQUIRE(readFile(dir.file("relay.log")) == "off nucleo-1\non nucleo-1\noff nucleo-1\n");
  relay.cycle.clear();

  relay.on = {"/bin/sh", "-c", "echo relay board not answering; exit 4"};
  hwfarm::Status failed = power(relay, PowerAction::on, t, dir.file("power.log"));
  REQUIRE_FALSE(failed.ok());
  REQUIRE(failed.message() ==
          "power on of board nucleo-1: /bin/sh exited with status 4; output: relay board not answering\n");
  // A failing switch is the lab's failure, with the tool's status and output as evidence.
  REQUIRE(failed.failureClass() == hwfarm::FailureClass::infrastructure);
  REQUIRE(failed.is(hwfarm::Code::io_error));
  REQUIRE(failed.evidence().exit_code == 4);
  REQUIRE(failed.evidence().tool_output == "relay board not answering\n");

  hwfarm::config::PowerConfig none;
  REQUIRE(powerArgv(none, PowerAction::cycle, t).empty());
  REQUIRE(power(none, PowerAction::cycle, t, "").ok());
}
