// Simulated boards: real QEMU machines running the test firmware, their
// UARTs read by the same serial driver as real boards.
#include <catch2/catch.hpp>

#include <boost/asio/io_context.hpp>
#include <regex>

#include "drivers/console_log.h"
#include "drivers/qemu_board.h"
#include "drivers/serial_port.h"
#include "tests/support/process.h"

using namespace hwfarm::drivers;
using hwfarm::test::readFile;
using hwfarm::test::TempDir;
using namespace std::chrono_literals;

namespace {

std::string firmware(const std::string& variant) {
  return std::string(HWFARM_FIRMWARE_DIR) + "/hwfarm-" + variant + ".elf";
}

hwfarm::config::QemuConfig machine(const std::string& name = "mps2-an385") {
  hwfarm::config::QemuConfig c;
  c.machine = name;
  return c;
}

// Powers `board` on and attaches a console logging to `log`.
std::unique_ptr<SerialPort> boot(QemuBoard& board, boost::asio::io_context& io, ConsoleLog& log, bool* closed) {
  std::string console, error;
  Status s = board.powerOn(&console);
  REQUIRE(s.ok);
  SerialOptions o;
  o.lock_dir.clear();
  auto port = SerialPort::open(io, console, o, &error);
  REQUIRE(port);
  port->start(nullptr, [closed](const std::string&) { *closed = true; }, &log);
  return port;
}

void runUntil(boost::asio::io_context& io, const std::function<bool()>& done, std::chrono::seconds limit = 20s) {
  auto start = std::chrono::steady_clock::now();
  while (!done() && std::chrono::steady_clock::now() - start < limit) io.run_one_for(100ms);
}

} // namespace

TEST_CASE("two simulated boards run firmware at once and their consoles stay apart") {
  TempDir dir;
  boost::asio::io_context io;
  QemuBoard a("sim-a", machine(), dir.file("qemu")), b("sim-b", machine("mps2-an386"), dir.file("qemu"));
  REQUIRE(a.flash(firmware("pass")).ok);
  REQUIRE(b.flash(firmware("fail")).ok);
  ConsoleLog log_a(dir.file("trace__sim_a.txt"), 1 << 20), log_b(dir.file("trace__sim_b.txt"), 1 << 20);
  bool closed_a = false, closed_b = false;
  auto port_a = boot(a, io, log_a, &closed_a);
  auto port_b = boot(b, io, log_b, &closed_b);
  // The firmware ends with semihosting exit, QEMU exits, the console closes.
  runUntil(io, [&] { return closed_a && closed_b; });
  REQUIRE(closed_a);
  REQUIRE(closed_b);
  runUntil(io, [&] { return a.exitStatus() && b.exitStatus(); }, 5s);
  REQUIRE(a.exitStatus() == 0);
  REQUIRE(b.exitStatus() == 1); // the fail variant's status
  std::string ta = readFile(dir.file("trace__sim_a.txt")), tb = readFile(dir.file("trace__sim_b.txt"));
  REQUIRE(ta.find("] HWFARM TEST ramp PASS\n") != std::string::npos);
  REQUIRE(tb.find("] HWFARM TEST ramp FAIL expected 3 got 4\n") != std::string::npos);
  REQUIRE(ta.find("FAIL") == std::string::npos);
  REQUIRE(std::regex_search(ta, std::regex("\\] HWFARM OUTPUT square.y f32 8 -1.000000 .* 5.125000\n")));
  REQUIRE(ta.find("] HWFARM END\n") != std::string::npos);
}

TEST_CASE("power-cycling a simulated board restarts its firmware") {
  TempDir dir;
  boost::asio::io_context io;
  QemuBoard board("sim", machine(), dir.file("qemu"));
  REQUIRE(board.flash(firmware("hang")).ok);
  ConsoleLog log(dir.file("console.txt"), 1 << 20);
  for (int cycle = 0; cycle < 2; ++cycle) {
    bool closed = false;
    auto port = boot(board, io, log, &closed);
    std::optional<std::optional<std::string>> begin;
    port->expect(std::regex("^HWFARM BEGIN"), 10s, [&](auto line) { begin = line; });
    runUntil(io, [&] { return begin.has_value(); });
    REQUIRE((begin && begin->has_value()));
    REQUIRE(board.powerOff().ok);
    REQUIRE_FALSE(board.running());
  }
  std::string text = readFile(dir.file("console.txt"));
  size_t boots = 0;
  for (size_t at = text.find("hwfarm test firmware booting"); at != std::string::npos;
       at = text.find("hwfarm test firmware booting", at + 1))
    ++boots;
  REQUIRE(boots == 2);
}

TEST_CASE("a hung firmware is stopped at the deadline") {
  TempDir dir;
  boost::asio::io_context io;
  QemuBoard board("sim", machine(), dir.file("qemu"));
  REQUIRE(board.flash(firmware("hang")).ok);
  ConsoleLog log(dir.file("console.txt"), 1 << 20);
  bool closed = false;
  auto port = boot(board, io, log, &closed);
  std::optional<std::optional<std::string>> end;
  port->expect(std::regex("^HWFARM END"), 1500ms, [&](auto line) { end = line; });
  runUntil(io, [&] { return end.has_value(); });
  REQUIRE(end);
  REQUIRE_FALSE(end->has_value()); // no END before the deadline
  REQUIRE(board.running());
  pid_t pid = board.pid();
  REQUIRE(board.powerOff().ok);
  REQUIRE_FALSE(board.running());
  REQUIRE(::kill(pid, 0) != 0);
  REQUIRE_FALSE(board.exitStatus()); // stopped, so the firmware reported nothing
}

TEST_CASE("a simulated board without an image or with a missing image says so") {
  TempDir dir;
  QemuBoard board("sim", machine(), dir.file("qemu"));
  std::string console;
  REQUIRE(board.powerOn(&console).message == "board sim has no image: flash it first");
  Status missing = board.flash(dir.file("nope.elf"));
  REQUIRE_FALSE(missing.ok);
  REQUIRE_THAT(missing.message, Catch::StartsWith("cannot stage image " + dir.file("nope.elf") + ": "));
  hwfarm::config::QemuConfig bad = machine();
  bad.binary = "qemu-system-hwfarm-none";
  QemuBoard broken("sim2", bad, dir.file("qemu"));
  REQUIRE(broken.flash(firmware("pass")).ok);
  Status s = broken.powerOn(&console);
  REQUIRE_FALSE(s.ok);
  REQUIRE(s.message == "QEMU did not start for board sim2 (see " + broken.logPath() + ")");
  REQUIRE(readFile(broken.logPath()).find("cannot run qemu-system-hwfarm-none") != std::string::npos);
}
