// Simulated boards: real QEMU machines running the test firmware, their
// UARTs read by the same serial driver as real boards.
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <boost/asio/io_context.hpp>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <regex>
#include <sstream>
#include <thread>

#include "daemon/core/run/compare.h"
#include "daemon/core/run/protocol.h"
#include "drivers/console_log.h"
#include "drivers/process_table.h"
#include "drivers/qemu_board.h"
#include "drivers/serial_port.h"
#include "drivers/simulator_run.h"
#include "tests/support/process.h"
#include "tests/support/firmware.h"
#include "tests/support/simulator.h"
#include "tests/support/wait.h"

using namespace hwfarm::drivers;
using hwfarm::test::waitWhile;
using hwfarm::Status;
using hwfarm::test::bootHang;
using hwfarm::test::firmware;
using hwfarm::test::qemuGone;
using hwfarm::test::qemuPid;
using hwfarm::test::readConsole;
using hwfarm::test::readFile;
using hwfarm::test::sandboxSocketConnected;
using hwfarm::test::TempDir;
using namespace std::chrono_literals;

namespace {

hwfarm::config::QemuConfig machine(const std::string& name = "mps2-an385") {
  hwfarm::config::QemuConfig c;
  c.machine = name;
  return c;
}

// Powers `board` on and attaches a console logging to `log` (and handing its
// lines to `on_line`, if set).
std::unique_ptr<SerialPort> boot(QemuBoard& board, boost::asio::io_context& io, ConsoleLog& log, bool* closed,
                                 SerialPort::LineHandler on_line = nullptr) {
  std::string console;
  Status s = board.powerOn(&console);
  REQUIRE(s.ok());
  SerialOptions o;
  o.lock_dir.clear();
  auto opened = SerialPort::open(io, console, o);
  INFO(opened.status().toString());
  REQUIRE(opened.ok());
  auto port = std::move(opened).value();
  port->start(std::move(on_line), [closed](const std::string&) { *closed = true; }, &log);
  return port;
}

void runUntil(boost::asio::io_context& io, const std::function<bool()>& done, std::chrono::seconds limit = 20s) {
  auto start = std::chrono::steady_clock::now();
  while (!done() && std::chrono::steady_clock::now() - start < limit) io.run_one_for(100ms);
}

} // namespace

namespace {

// Powers `board` on, reads its console until the firmware began, and
// powers it off again.
void bootsToBegin(QemuBoard& board, boost::asio::io_context& io, ConsoleLog& log) {
  bool closed = false;
  auto port = boot(board, io, log, &closed);
  std::optional<std::optional<std::string>> begin;
  port->expect(std::regex("^HWFARM BEGIN"), 10s, [&](auto line) { begin = line; });
  runUntil(io, [&] { return begin.has_value(); });
  REQUIRE((begin && begin->has_value()));
  board.powerOff();
  REQUIRE_FALSE(board.running());
}

} // namespace

TEST_CASE("two simulated boards run firmware at once and their consoles stay apart") {
  TempDir dir;
  boost::asio::io_context io;
  QemuBoard a("sim-a", machine(), dir.file("qemu")), b("sim-b", machine("mps2-an386"), dir.file("qemu"));
  REQUIRE(a.flash(firmware("pass")).ok());
  REQUIRE(b.flash(firmware("fail")).ok());
  ConsoleLog log_a(dir.file("trace__sim_a.txt"), 1 << 20), log_b(dir.file("trace__sim_b.txt"), 1 << 20);
  bool closed_a = false, closed_b = false;
  auto port_a = boot(a, io, log_a, &closed_a);
  auto port_b = boot(b, io, log_b, &closed_b);
  // Each firmware reports its status on its console, then resets the core,
  std::optional<std::optional<std::string>> end_a, end_b;
  port_a->expect(std::regex("^HWFARM END"), 20s, [&](auto line) { end_a = line; });
  port_b->expect(std::regex("^HWFARM END"), 20s, [&](auto line) { end_b = line; });
  runUntil(io, [&] { return end_a && end_b; });
  REQUIRE((end_a && *end_a == "HWFARM END status=0"));
  REQUIRE((end_b && *end_b == "HWFARM END status=1")); // the fail variant's status
  // which stops its QEMU (run with -no-reboot): the consoles close by
  // themselves,
  runUntil(io, [&] { return closed_a && closed_b; });
  REQUIRE(closed_a);
  REQUIRE(closed_b);
  // and the driver tells the firmware's reset from a crash.
  std::optional<QemuEnd> ended_a = a.waitEnd(5s), ended_b = b.waitEnd(5s);
  REQUIRE(ended_a);
  REQUIRE(ended_b);
  CHECK(ended_a->guest);
  CHECK(ended_b->guest);
  CHECK(ended_a->exit_code == 0);
  CHECK(ended_a->describe() == "QEMU was reset by its firmware");
  std::string ta = readFile(dir.file("trace__sim_a.txt")), tb = readFile(dir.file("trace__sim_b.txt"));
  REQUIRE(ta.find("] HWFARM TEST ramp PASS\n") != std::string::npos);
  REQUIRE(tb.find("] HWFARM TEST ramp FAIL expected 3 got 4\n") != std::string::npos);
  REQUIRE(ta.find("FAIL") == std::string::npos);
  REQUIRE(ta.find("] HWFARM OUTPUT square.y f32 8 -1 -0.875 -0.5 0.125 1 2.125 3.5 5.125\n") != std::string::npos);
  REQUIRE(ta.find("] HWFARM END status=0\n") != std::string::npos);
}

TEST_CASE("power-cycling a simulated board restarts its firmware") {
  TempDir dir;
  boost::asio::io_context io;
  QemuBoard board("sim", machine(), dir.file("qemu"));
  REQUIRE(board.flash(firmware("hang")).ok());
  ConsoleLog log(dir.file("console.txt"), 1 << 20);
  for (int cycle = 0; cycle < 2; ++cycle) bootsToBegin(board, io, log);
  std::string text = readFile(dir.file("console.txt"));
  size_t boots = 0;
  for (size_t at = text.find("hwfarm test firmware booting"); at != std::string::npos;
       at = text.find("hwfarm test firmware booting", at + 1))
    ++boots;
  REQUIRE(boots == 2);
}

TEST_CASE("a simulated board runs under a state directory longer than a socket address holds") {
  TempDir dir;
  boost::asio::io_context io;
  // A work directory whose UART socket path is well past the 107 bytes of
  // a socket address (a checkout deep in a CI workspace):
  std::string deep = dir.file(std::string(60, 'd') + "/" + std::string(60, 'e'));
  REQUIRE((deep + "/sock/sim.uart").size() > 120);
  QemuBoard board("sim", machine(), deep);
  REQUIRE(board.flash(firmware("hang")).ok());
  ConsoleLog log(dir.file("console.txt"), 1 << 20);
  for (int cycle = 0; cycle < 2; ++cycle) bootsToBegin(board, io, log); // (again: its old socket is replaced)
  // and a name longer than a socket address is refused, saying why.
  auto refused = connectUnixSocket(deep + "/" + std::string(120, 'n'));
  REQUIRE_FALSE(refused);
  CHECK(refused.status().message().find("longer than the 107 bytes a socket address holds") != std::string::npos);
}

TEST_CASE("a hung firmware is stopped at the deadline") {
  TempDir dir;
  boost::asio::io_context io;
  QemuBoard board("sim", machine(), dir.file("qemu"));
  REQUIRE(board.flash(firmware("hang")).ok());
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
  board.powerOff();
  REQUIRE_FALSE(board.running());
  REQUIRE(::kill(pid, 0) != 0);
  REQUIRE_FALSE(board.exitStatus()); // stopped, so the firmware reported nothing
}

TEST_CASE("a simulated board without an image or with a missing image says so") {
  TempDir dir;
  QemuBoard board("sim", machine(), dir.file("qemu"));
  std::string console;
  REQUIRE(board.powerOn(&console).message() == "board sim has no image: flash it first");
  Status missing = board.flash(dir.file("nope.elf"));
  REQUIRE_FALSE(missing.ok());
  REQUIRE_THAT(missing.message(), Catch::StartsWith("cannot stage image " + dir.file("nope.elf") + ": "));
  REQUIRE(missing.is(hwfarm::Code::not_found)); // errno ENOENT, through Status::fromErrno
  REQUIRE(missing.isInfrastructure());
  hwfarm::config::QemuConfig bad = machine();
  bad.binary = "qemu-system-hwfarm-none";
  QemuBoard broken("sim2", bad, dir.file("qemu"));
  REQUIRE(broken.flash(firmware("pass")).ok());
  Status s = broken.powerOn(&console);
  REQUIRE_FALSE(s.ok());
  REQUIRE(s.is(hwfarm::Code::not_found));
  REQUIRE(s.isInfrastructure());
  REQUIRE(s.message() == "QEMU did not start for board sim2: \"qemu-system-hwfarm-none\" not found in PATH or not "
                       "executable");
}

namespace {

struct Capture {
  std::string log;     // the console log (timestamped lines, hwfarmd's notes)
  std::string console; // the lines as the firmware printed them, each ended with "\n"
  bool ended = false;  // an END record arrived before the limit
  std::shared_ptr<hwfarm::run::Parser> parser = std::make_shared<hwfarm::run::Parser>(); // fed every line
};

// Runs `board` (flashed) until its firmware prints a line matching `until`
// (its END record) or `limit`, then powers it off.
Capture capture(QemuBoard& board, boost::asio::io_context& io, const std::string& log_path,
                std::chrono::milliseconds limit = 20s, const std::string& until = "^HWFARM END") {
  io.restart(); // a previous run may have left it out of work, stopped
  Capture c;
  {
    ConsoleLog log(log_path, 1 << 20);
    bool closed = false;
    auto port = boot(board, io, log, &closed, [&c](const hwfarm::ConsoleLine& line) {
      c.console += std::string(line.text) + "\n";
      c.parser->line(line);
    });
    std::optional<std::optional<std::string>> end;
    port->expect(std::regex(until), limit, [&](auto line) { end = line; });
    runUntil(io, [&] { return end.has_value(); });
    c.ended = end && end->has_value();
    board.powerOff();
    runUntil(io, [&] { return closed; }, 5s);
  }
  c.log = readFile(log_path);
  return c;
}

// Runs `board` (flashed) until its firmware's END record; returns the console log.
std::string runToEnd(QemuBoard& board, boost::asio::io_context& io, const std::string& log_path) {
  Capture c = capture(board, io, log_path);
  INFO("console: " << c.log << "\nQEMU log: " << readFile(board.logPath()));
  REQUIRE(c.ended);
  return c.log;
}

} // namespace

TEST_CASE("a simulator hands the firmware its identity: target or reference") {
  TempDir dir;
  boost::asio::io_context io;
  // Given one image on a simulator run as a target and on one run as the
  // reference (the default role),
  QemuBoard target("sim-t", machine(), dir.file("qemu"), SimRole::target);
  QemuBoard reference("sim-r", machine(), dir.file("qemu"));
  REQUIRE(target.role() == SimRole::target);
  REQUIRE(reference.role() == SimRole::reference);
  REQUIRE(target.flash(firmware("slight")).ok());
  REQUIRE(reference.flash(firmware("slight")).ok());
  std::string t = runToEnd(target, io, dir.file("target.txt"));
  std::string r = runToEnd(reference, io, dir.file("reference.txt"));
  // each firmware reads the word its simulator wrote into its RAM,
  REQUIRE(t.find("] hwfarm board identity 1: target\n") != std::string::npos);
  REQUIRE(r.find("] hwfarm board identity 0: reference\n") != std::string::npos);
  // and only the target perturbs its output; the rest is the same.
  REQUIRE(r.find("] HWFARM OUTPUT square.y f32 8 -1 -0.875 -0.5 0.125 1 2.125 3.5 5.125\n") != std::string::npos);
  REQUIRE(t.find("] HWFARM OUTPUT square.y f32 8 -0.790000021 -1.08500004 -0.290000021 -0.0849999934 1.21000004 "
                 "1.91499996 3.71000004 4.91499996\n") != std::string::npos);
  for (const char* same : {"] HWFARM OUTPUT ramp.y i32 4 0 1 2 3\n", "] HWFARM END status=0\n"}) {
    REQUIRE(t.find(same) != std::string::npos);
    REQUIRE(r.find(same) != std::string::npos);
  }
}

TEST_CASE("firmware cannot reach the host through semihosting") {
  // Given a host directory with a secret (the fixed paths the semihost
  // firmware probes),
  const std::string probe = "/tmp/hwfarm-semihost-probe";
  std::filesystem::remove_all(probe);
  std::filesystem::create_directories(probe);
  { std::ofstream(probe + "/secret") << "hwfarm-secret-4711\n"; }
  TempDir dir;
  boost::asio::io_context io;
  QemuBoard board("sim", machine(), dir.file("qemu"));
  REQUIRE(board.flash(firmware("semihost")).ok());
  // when the firmware tries to open, read and write host files and to run
  // host commands,
  std::string text = runToEnd(board, io, dir.file("console.txt"));
  // every call is refused, nothing of the host reaches the console,
  REQUIRE(text.find("] SEMIHOST open /tmp/hwfarm-semihost-probe/secret -> -1\n") != std::string::npos);
  REQUIRE(text.find("] SEMIHOST system touch /tmp/hwfarm-semihost-probe/touched -> -1\n") != std::string::npos);
  REQUIRE(text.find("] SEMIHOST system id > /tmp/hwfarm-semihost-probe/id -> -1\n") != std::string::npos);
  REQUIRE(text.find("hwfarm-secret") == std::string::npos);
  REQUIRE(text.find("] HWFARM END status=0\n") != std::string::npos);
  // and nothing on the host changed.
  std::vector<std::string> files;
  for (const auto& e : std::filesystem::directory_iterator(probe)) files.push_back(e.path().filename().string());
  REQUIRE(files == std::vector<std::string>{"secret"});
  REQUIRE(readFile(probe + "/secret") == "hwfarm-secret-4711\n");
  std::filesystem::remove_all(probe);
  // The board runs the next firmware as usual.
  REQUIRE(board.flash(firmware("pass")).ok());
  REQUIRE(runToEnd(board, io, dir.file("console2.txt")).find("] HWFARM END status=0\n") != std::string::npos);
}

TEST_CASE("QEMU sees only its image and its socket directory, and no descriptor of its parent") {
  TempDir dir;
  boost::asio::io_context io;
  std::string outside = dir.write("hwfarm.db", "a database next to the board's work dir\n");
  int inherited = ::open(outside.c_str(), O_RDONLY); // open in the parent, without close-on-exec
  REQUIRE(inherited > 2);
  // Given a qemu.binary that looks around before it becomes QEMU,
  hwfarm::config::QemuConfig c = machine();
  c.binary = dir.script("qemu-look",
                    "for f in /etc/passwd /etc/hostname " + outside + " " + dir.file("qemu/sim.qemu.log") + " " +
                        dir.file("qemu/sim.elf") + " " + dir.file("qemu/sock") +
                        "; do if [ -e \"$f\" ]; then echo \"visible $f\"; else echo \"hidden $f\"; fi; done\n"
                        "touch " + dir.file("qemu/sock/writable") + " && echo 'socket dir writable'\n"
                        "touch " + dir.file("qemu/sim.elf") + " 2>/dev/null || echo 'image read-only'\n"
                        "grep -E '^(CapEff|NoNewPrivs)' /proc/self/status\n"
                        "echo fds $(ls /proc/self/fd)\n"
                        "exec qemu-system-arm \"$@\"\n");
  QemuBoard board("sim", c, dir.file("qemu"));
  REQUIRE(board.flash(firmware("pass")).ok());
  std::string text = runToEnd(board, io, dir.file("console.txt"));
  ::close(inherited);
  REQUIRE(text.find("] HWFARM END status=0\n") != std::string::npos);
  std::string seen = readFile(board.logPath());
  INFO(seen);
  // it sees no host file but its image and socket directory,
  REQUIRE(seen.find("hidden /etc/passwd\n") != std::string::npos);
  REQUIRE(seen.find("hidden /etc/hostname\n") != std::string::npos);
  REQUIRE(seen.find("hidden " + outside + "\n") != std::string::npos);
  REQUIRE(seen.find("hidden " + dir.file("qemu/sim.qemu.log") + "\n") != std::string::npos);
  REQUIRE(seen.find("visible " + dir.file("qemu/sim.elf") + "\n") != std::string::npos);
  REQUIRE(seen.find("visible " + dir.file("qemu/sock") + "\n") != std::string::npos);
  REQUIRE(seen.find("socket dir writable\n") != std::string::npos);
  REQUIRE(seen.find("image read-only\n") != std::string::npos);
  // runs without capabilities or a way to gain them,
  REQUIRE(seen.find("CapEff:\t0000000000000000\n") != std::string::npos);
  REQUIRE(seen.find("NoNewPrivs:\t1\n") != std::string::npos);
  // and holds only stdin, stdout and stderr (3: ls reading /proc/self/fd).
  REQUIRE(seen.find("fds 0 1 2 3\n") != std::string::npos);
}

TEST_CASE("QEMU does not run when its sandbox cannot be set up") {
  TempDir dir;
  hwfarm::config::QemuConfig c = machine();
  c.binary = dir.script("qemu-marks", "touch " + dir.file("qemu-ran") + "\nexec qemu-system-arm \"$@\"\n");
  QemuBoard board("sim", c, dir.file("qemu"));
  REQUIRE(board.flash(firmware("pass")).ok());
  std::string console;
  const char* saved = std::getenv("PATH");
  std::string path = saved ? saved : "/usr/bin:/bin";
  // Given no bubblewrap at all,
  ::setenv("PATH", dir.file("nothing-here").c_str(), 1);
  Status missing = board.powerOn(&console);
  // and a bubblewrap that cannot create its namespaces (as on a host that
  // forbids user namespaces),
  std::filesystem::create_directories(dir.file("bin"));
  dir.script("bin/bwrap", "echo 'bwrap: Creating new namespace failed: Operation not permitted' >&2\nexit 1\n");
  ::setenv("PATH", (dir.file("bin") + ":" + path).c_str(), 1);
  Status refused = board.powerOn(&console);
  ::setenv("PATH", path.c_str(), 1);
  // power on fails with an infrastructure error, and QEMU never ran.
  REQUIRE_FALSE(missing.ok());
  REQUIRE(missing.message() == "cannot confine QEMU for board sim: bwrap not found in PATH (install Debian's "
                             "bubblewrap package)");
  REQUIRE_FALSE(refused.ok());
  REQUIRE(refused.message() ==
          "cannot confine QEMU for board sim: bwrap: Creating new namespace failed: Operation not permitted");
  // with how the sandbox ended and what it said as evidence,
  REQUIRE(refused.isInfrastructure());
  REQUIRE(refused.evidence().exit_code == 1);
  REQUIRE(refused.evidence().tool_output == "bwrap: Creating new namespace failed: Operation not permitted\n");
  REQUIRE(missing.evidence().empty());
  REQUIRE_FALSE(board.running());
  REQUIRE_FALSE(std::filesystem::exists(dir.file("qemu-ran")));
}

TEST_CASE("where no private /proc can be mounted, QEMU runs confined without one") {
  TempDir dir;
  // Given a bubblewrap that cannot mount a /proc (as in a service whose /proc
  // has read-only overmounts: systemd's ProtectKernelTunables=),
  std::filesystem::create_directories(dir.file("bin"));
  dir.script("bin/bwrap",
         "for a in \"$@\"; do [ \"$a\" = --proc ] && { echo \"$*\" >> " + dir.file("with-proc") +
             "; echo 'bwrap: Can'\"'\"'t mount proc on /newroot/proc: Operation not permitted' >&2; exit 1; }; "
             "[ \"$a\" = -- ] && break; done\n"
             "echo \"$*\" >> " + dir.file("without-proc") + "\nexec /usr/bin/bwrap \"$@\"\n");
  const char* saved = std::getenv("PATH");
  std::string path = saved ? saved : "/usr/bin:/bin";
  ::setenv("PATH", (dir.file("bin") + ":" + path).c_str(), 1);
  hwfarm::config::QemuConfig c = machine();
  c.binary = dir.script("qemu-look",
                    "if [ -e /proc/self ]; then echo 'proc visible'; else echo 'proc hidden'; fi\n"
                    "if [ -e /etc/passwd ]; then echo 'passwd visible'; else echo 'passwd hidden'; fi\n"
                    "exec qemu-system-arm \"$@\"\n");
  QemuBoard board("sim", c, dir.file("qemu"));
  REQUIRE(board.flash(firmware("pass")).ok());
  boost::asio::io_context io;
  std::string text = runToEnd(board, io, dir.file("console.txt"));
  ::setenv("PATH", path.c_str(), 1);
  // the first try asked for one, the second ran the firmware to its end
  // without /proc and still without the host's files.
  REQUIRE(std::filesystem::exists(dir.file("with-proc")));
  REQUIRE(readFile(dir.file("without-proc")).find("--unshare-all") != std::string::npos);
  REQUIRE(text.find("] HWFARM END status=0\n") != std::string::npos);
  std::string seen = readFile(board.logPath());
  INFO(seen);
  REQUIRE(seen.find("proc hidden\n") != std::string::npos);
  REQUIRE(seen.find("passwd hidden\n") != std::string::npos);
}

// The test firmware's variants (tests/firmware/main.c), each run on a real
// QEMU as a target and as the reference, their consoles read by the serial
// driver and fed to the result parser and the comparator.
namespace {

namespace run = hwfarm::run;

struct VariantRun {
  Capture capture;
  run::ParseResult result;
};

VariantRun runVariant(const TempDir& dir, const std::string& variant, SimRole role,
                      std::chrono::milliseconds limit = 20s, const std::string& until = "^HWFARM END") {
  std::string name = variant + (role == SimRole::target ? "-t" : "-r");
  QemuBoard board(name, machine(), dir.file("qemu"), role);
  REQUIRE(board.flash(firmware(variant)).ok());
  boost::asio::io_context io;
  VariantRun r{capture(board, io, dir.file(name + ".txt"), limit, until), {}};
  r.capture.parser->finish();
  r.result = r.capture.parser->result();
  return r;
}

const run::Output& outputOf(const run::ParseResult& r, const std::string& case_name, const std::string& name) {
  const run::Output* o = r.findOutput(case_name, name);
  INFO(case_name << "." << name);
  REQUIRE(o);
  REQUIRE(o->complete());
  return *o;
}

run::Comparison compareOutput(const run::ParseResult& target, const run::ParseResult& reference,
                              const std::string& case_name, const std::string& name,
                              const run::Thresholds& thresholds = {}) {
  const run::Output& t = outputOf(target, case_name, name);
  const run::Output& r = outputOf(reference, case_name, name);
  return run::compare(run::Values(t.dtype, t.values), run::Values(r.dtype, r.values), thresholds);
}

// The values as f32 bit patterns: equal only when every bit is.
std::vector<uint32_t> bitsOf(const std::vector<double>& values) {
  std::vector<uint32_t> bits;
  for (double v : values) bits.push_back(std::bit_cast<uint32_t>(static_cast<float>(v)));
  return bits;
}
std::vector<uint32_t> bitsOf(const std::vector<float>& values) {
  std::vector<uint32_t> bits;
  for (float v : values) bits.push_back(std::bit_cast<uint32_t>(v));
  return bits;
}

const std::vector<float> kSquare = {-1, -0.875f, -0.5f, 0.125f, 1, 2.125f, 3.5f, 5.125f};
// What precision.y holds: values six fixed decimals would lose.
const std::vector<float> kPrecision = {1.0f / 3.0f,    -2.0f / 3.0f,    0.1f,           1e-7f,
                                       6.02214076e23f, 3.40282347e+38f, 1.40129846e-45f, -0.0f};

void requireSameOutput(const run::ParseResult& a, const run::ParseResult& b, const std::string& case_name,
                       const std::string& name) {
  run::Comparison c = compareOutput(a, b, case_name, name);
  INFO(case_name << "." << name << ": PCC " << std::setprecision(17) << c.actual_pcc << " " << c.reason);
  REQUIRE(c.actual_pcc == Approx(1.0).epsilon(1e-12));
  REQUIRE(c.allclose);
  REQUIRE(c.max == 0.0);
  REQUIRE(c.verdict == run::Verdict::pass);
}

} // namespace

TEST_CASE("the pass firmware's values round-trip exactly and agree with the reference") {
  TempDir dir;
  VariantRun t = runVariant(dir, "pass", SimRole::target), r = runVariant(dir, "pass", SimRole::reference);
  for (const VariantRun* v : {&t, &r}) {
    const run::ParseResult& p = v->result;
    INFO(v->capture.console);
    REQUIRE(p.suite == "hwfarm-selftest");
    REQUIRE(p.end_status == 0);
    REQUIRE(p.problems.empty());
    REQUIRE(p.cases.size() == 3);
    for (const auto& c : p.cases) REQUIRE(c.result == run::CaseResult::pass);
    REQUIRE(p.outputs.size() == 3);
    // Every f32 reads back bit for bit: 1/3, 1e-7, the largest float, the
    // smallest denormal, minus zero.
    REQUIRE(bitsOf(outputOf(p, "square", "y").values) == bitsOf(kSquare));
    REQUIRE(bitsOf(outputOf(p, "precision", "y").values) == bitsOf(kPrecision));
    REQUIRE(outputOf(p, "ramp", "y").values == std::vector<double>{0, 1, 2, 3});
    REQUIRE(outputOf(p, "ramp", "y").dtype == hwfarm::run::Dtype::i32);
  }
  REQUIRE(t.capture.console.find("0.333333343 -0.666666687 0.100000001 1.00000001e-07 ") != std::string::npos);
  for (const char* key : {"square", "ramp", "precision"}) requireSameOutput(t.result, r.result, key, "y");
}

TEST_CASE("slight and bad differ from the reference only as a target: PCC about 0.995 and 0.5") {
  TempDir dir;
  struct Expected {
    const char* variant;
    double pcc_low, pcc_high;
    run::Verdict verdict; // at the default expected_pcc 0.99
  };
  for (Expected e : {Expected{"slight", 0.994, 0.996, run::Verdict::pass}, Expected{"bad", 0.49, 0.51, run::Verdict::fail}}) {
    INFO(e.variant);
    VariantRun t = runVariant(dir, e.variant, SimRole::target), r = runVariant(dir, e.variant, SimRole::reference);
    REQUIRE(t.result.end_status == 0);
    REQUIRE(t.result.problems.empty());
    // The reference prints the pass firmware's values, the target its own,
    REQUIRE(bitsOf(outputOf(r.result, "square", "y").values) == bitsOf(kSquare));
    REQUIRE(bitsOf(outputOf(t.result, "square", "y").values) != bitsOf(kSquare));
    run::Comparison c = compareOutput(t.result, r.result, "square", "y");
    INFO(c.actual_pcc << " " << c.reason);
    REQUIRE(c.actual_pcc > e.pcc_low);
    REQUIRE(c.actual_pcc < e.pcc_high);
    REQUIRE(c.verdict == e.verdict);
    REQUIRE_FALSE(c.allclose);
    REQUIRE(c.not_close == 8);
    // an exact comparison fails either,
    run::Thresholds exact;
    exact.require_allclose = true;
    REQUIRE(compareOutput(t.result, r.result, "square", "y", exact).verdict == run::Verdict::fail);
    // and the other outputs agree.
    requireSameOutput(t.result, r.result, "ramp", "y");
    requireSameOutput(t.result, r.result, "precision", "y");
  }
}

TEST_CASE("the fail firmware fails one case, and garbage around a run changes nothing") {
  TempDir dir;
  VariantRun pass = runVariant(dir, "pass", SimRole::target);
  VariantRun fail = runVariant(dir, "fail", SimRole::target);
  REQUIRE(fail.result.end_status == 1);
  REQUIRE(fail.result.problems.empty());
  const run::TestCase* ramp = fail.result.findCase("ramp");
  REQUIRE(ramp);
  REQUIRE(ramp->result == run::CaseResult::fail);
  REQUIRE(ramp->message == "expected 3 got 4");
  REQUIRE(fail.result.findCase("square")->result == run::CaseResult::pass);
  REQUIRE(fail.result.findCase("precision")->result == run::CaseResult::pass);
  // The garbage firmware prints a line of bytes 0x80-0xF7 and one of control
  // bytes first: the parser skips both and reads the same run.
  VariantRun garbage = runVariant(dir, "garbage", SimRole::target);
  REQUIRE(garbage.capture.console.find("\x01\x02 not a protocol line\n") != std::string::npos);
  REQUIRE(garbage.capture.console.find('\x80') != std::string::npos);
  REQUIRE(garbage.result.problems.empty());
  REQUIRE(garbage.result.end_status == 0);
  REQUIRE(garbage.result.records == pass.result.records);
  REQUIRE(garbage.result.lines == pass.result.lines + 2);
  for (const char* key : {"square", "ramp", "precision"}) requireSameOutput(garbage.result, pass.result, key, "y");
}

TEST_CASE("the hang firmware begins and never ends") {
  TempDir dir;
  VariantRun hang = runVariant(dir, "hang", SimRole::target, 1500ms);
  REQUIRE_FALSE(hang.capture.ended);
  REQUIRE(hang.result.suite == "hwfarm-selftest");
  REQUIRE_FALSE(hang.result.ended);
  REQUIRE(hang.result.cases.size() == 1);
  REQUIRE(bitsOf(outputOf(hang.result, "square", "y").values) == bitsOf(kSquare));
  REQUIRE(hang.result.problems.empty());
}

TEST_CASE("crcok's records all carry a correct CRC-32, crc's have exactly one corrupt record") {
  TempDir dir;
  VariantRun ok = runVariant(dir, "crcok", SimRole::target), bad = runVariant(dir, "crc", SimRole::target);
  // Given every record with its suffix (BEGIN, 3 TEST, 3 OUTPUT, END),
  REQUIRE(ok.capture.console.find("HWFARM TEST square PASS *e267e595\n") != std::string::npos);
  REQUIRE(ok.result.checked_records == 8);
  REQUIRE(ok.result.corrupt_records == 0);
  REQUIRE(ok.result.problems.empty());
  REQUIRE_FALSE(ok.result.hasInfrastructureProblem());
  REQUIRE(ok.result.end_status == 0);
  REQUIRE(outputOf(ok.result, "ramp", "y").values == std::vector<double>{0, 1, 2, 3});
  // one bit flipped after the CRC was taken (ramp.y's last value, 3 -> 7)
  REQUIRE(bad.capture.console.find("HWFARM OUTPUT ramp.y i32 4 0 1 2 7 *") != std::string::npos);
  REQUIRE(bad.result.checked_records == 8);
  REQUIRE(bad.result.corrupt_records == 1);
  // is serial corruption, an infrastructure problem of its case, on its line,
  REQUIRE(bad.result.hasInfrastructureProblem());
  REQUIRE(bad.result.problems.size() == 1);
  const run::Problem& p = bad.result.problems[0];
  REQUIRE(p.failure == hwfarm::FailureClass::infrastructure);
  REQUIRE(p.case_name == "ramp");
  REQUIRE(p.line == 7);
  REQUIRE_THAT(p.message, Catch::Contains("CRC mismatch"));
  // and the record is not used: ramp.y is missing, the rest is as crcok's.
  REQUIRE(bad.result.findOutput("ramp", "y") == nullptr);
  REQUIRE(bad.result.end_status == 0);
  requireSameOutput(bad.result, ok.result, "square", "y");
  requireSameOutput(bad.result, ok.result, "precision", "y");
}

TEST_CASE("the large firmware's output arrives in 10 pieces and reassembles to 1000 exact values") {
  TempDir dir;
  VariantRun t = runVariant(dir, "large", SimRole::target), r = runVariant(dir, "large", SimRole::reference);
  std::vector<float> expected;
  for (int i = 0; i < 1000; ++i) expected.push_back(static_cast<float>(i) / 7.0f);
  for (const VariantRun* v : {&t, &r}) {
    REQUIRE(v->result.problems.empty());
    REQUIRE(v->result.cut_lines == 0); // each piece fits max_line_bytes
    const run::Output& large = outputOf(v->result, "large", "y");
    REQUIRE(large.count == 1000);
    REQUIRE(large.dtype == run::Dtype::f32); // f32x on the wire
    REQUIRE(bitsOf(large.values) == bitsOf(expected));
    // BEGIN, 4 TEST, 3 outputs of one record, 10 pieces, END
    REQUIRE(v->result.records == 19);
  }
  size_t pieces = 0;
  for (size_t at = t.capture.console.find("HWFARM OUTPUT large.y f32x 1000 @"); at != std::string::npos;
       at = t.capture.console.find("HWFARM OUTPUT large.y f32x 1000 @", at + 1))
    ++pieces;
  REQUIRE(pieces == 10);
  REQUIRE(t.capture.console.find("HWFARM OUTPUT large.y f32x 1000 @900 ") != std::string::npos);
  requireSameOutput(t.result, r.result, "large", "y");
}

// QEMU's own end, told apart from its sandbox's: a QEMU that aborts,
// crashes or is killed from outside mid-run is a simulator failure with the
// signal as evidence (the infrastructure's, not the firmware's).

// Protocol version 2 and what a console can do to a run, on real QEMU: each
// variant's console read by the serial driver's line reader and parsed.
namespace {

std::vector<run::ProblemKind> kindsOf(const run::ParseResult& r) {
  std::vector<run::ProblemKind> out;
  for (const auto& p : r.problems) out.push_back(p.kind);
  return out;
}

} // namespace

TEST_CASE("version 2: every record checks and the count is verified, and a miscount and a record lost on the wire are noticed") {
  TempDir dir;
  VariantRun v2 = runVariant(dir, "v2", SimRole::target), ref = runVariant(dir, "v2", SimRole::reference);
  for (const VariantRun* v : {&v2, &ref}) {
    INFO(v->capture.console);
    REQUIRE(v->result.problems.empty());
    REQUIRE(v->result.version == 2);
    REQUIRE(v->result.checked_records == 8);
    REQUIRE(v->result.countVerified());
    REQUIRE(v->result.cases.size() == 3);
  }
  VariantRun pass = runVariant(dir, "pass", SimRole::target);
  for (const char* key : {"square", "ramp", "precision"}) requireSameOutput(v2.result, pass.result, key, "y");
  // An END that counts 8 records after 7,
  VariantRun miscount = runVariant(dir, "v2count", SimRole::target);
  REQUIRE(kindsOf(miscount.result) == std::vector<run::ProblemKind>{run::ProblemKind::count_mismatch});
  REQUIRE(miscount.result.countMismatch());
  // and a FAIL whose tag a flipped bit damaged (HWFARO): not read, and not lost.
  VariantRun lost = runVariant(dir, "v2lost", SimRole::target);
  INFO(lost.capture.console);
  REQUIRE(lost.capture.console.find("\nHWFARO TEST ramp FAIL expected 3 got 4 *") != std::string::npos);
  REQUIRE_FALSE(lost.result.findCase("ramp"));
  REQUIRE(kindsOf(lost.result) ==
          std::vector<run::ProblemKind>{run::ProblemKind::damaged_line, run::ProblemKind::count_mismatch});
  REQUIRE(lost.result.problems[0].case_name == "ramp");
  REQUIRE(lost.result.problems[0].line == 6);
  REQUIRE(lost.result.intact_records == 6);
  REQUIRE(lost.result.declared_records == 7u);
  REQUIRE(lost.result.end_status == 1);
}

TEST_CASE("a FAIL message ending like a CRC suffix stays a FAIL message, in version 1 and in version 2") {
  TempDir dir;
  for (const char* variant : {"star", "v2star"}) {
    INFO(variant);
    VariantRun r = runVariant(dir, variant, SimRole::target);
    INFO(r.capture.console);
    REQUIRE(r.result.problems.empty());
    const run::TestCase* ramp = r.result.findCase("ramp");
    REQUIRE(ramp);
    REQUIRE(ramp->result == run::CaseResult::fail);
    REQUIRE(ramp->message == "bad word at *20003f00");
    REQUIRE(r.result.end_status == 1);
  }
}

TEST_CASE("records after END are counted as such, never read as cases") {
  TempDir dir;
  // Read until the record the firmware prints after its END.
  VariantRun r = runVariant(dir, "afterend", SimRole::target, 20s, "^HWFARM TEST late ");
  INFO(r.capture.console);
  REQUIRE(r.capture.ended);
  REQUIRE(r.result.ended);
  REQUIRE(r.result.countVerified());
  REQUIRE(r.result.records_after_end == 1);
  REQUIRE(r.result.first_after_end_line == 11);
  REQUIRE_FALSE(r.result.findCase("late"));
  REQUIRE(kindsOf(r.result) == std::vector<run::ProblemKind>{run::ProblemKind::after_end});
}

TEST_CASE("a board that dies inside a record's line leaves no record of it") {
  TempDir dir;
  // Given "HWFARM OUTPUT ramp.y i32 4 0 1 2 3" of "... 2 37" and no line end,
  VariantRun r = runVariant(dir, "cut", SimRole::target, 1500ms);
  INFO(r.capture.console);
  REQUIRE_FALSE(r.capture.ended);
  // the serial driver hands the partial line over cut when the board stops,
  REQUIRE(r.capture.console.size() >= 35);
  REQUIRE(r.capture.console.substr(r.capture.console.size() - 35) == "HWFARM OUTPUT ramp.y i32 4 0 1 2 3\n");
  // and the parser reads no ramp.y from it.
  REQUIRE(r.result.last_line_cut);
  REQUIRE(r.result.findOutput("ramp", "y") == nullptr);
  REQUIRE(r.result.findOutput("square", "y") != nullptr);
  REQUIRE(kindsOf(r.result) == std::vector<run::ProblemKind>{run::ProblemKind::cut_line});
  REQUIRE(r.result.problems[0].case_name == "ramp");
}

TEST_CASE("a control byte before END and a record after 64 KiB of junk read the one way every console reads them") {
  TempDir dir;
  VariantRun ctrl = runVariant(dir, "ctrlend", SimRole::target, 20s, "HWFARM END");
  INFO(ctrl.capture.console);
  REQUIRE(ctrl.capture.console.find("\n\x01HWFARM END status=0\n") != std::string::npos);
  REQUIRE(ctrl.result.ended);
  REQUIRE(ctrl.result.end_status == 0);
  REQUIRE(ctrl.result.problems.empty());
  VariantRun junk = runVariant(dir, "longline", SimRole::target);
  // (the serial driver hands the long line over in pieces of 4,096 bytes)
  REQUIRE(std::count(junk.capture.console.begin(), junk.capture.console.end(), 'x') == 65536);
  REQUIRE_FALSE(junk.result.findCase("hidden"));
  REQUIRE(junk.result.cut_lines == 1);
  REQUIRE(kindsOf(junk.result) == std::vector<run::ProblemKind>{run::ProblemKind::damaged_line});
  REQUIRE(junk.result.problems[0].message ==
          "line 4: a record after other text on its line (HWFARM TEST hidden FAIL after 65536 bytes): not read as a "
          "record");
  REQUIRE(junk.result.cases.size() == 3);
}

TEST_CASE("a simulated board whose QEMU dies mid-run reports the signal, not its sandbox's status") {
  auto [sig, said] = GENERATE(table<int, std::string>({{SIGKILL, "QEMU was killed by signal 9 (Killed)"},
                                                       {SIGABRT, "QEMU was killed by signal 6 (Aborted)"},
                                                       {SIGSEGV, "QEMU was killed by signal 11 (Segmentation fault)"}}));
  TempDir dir;
  QemuBoard board("sim", machine(), dir.file("qemu"));
  // Given firmware running on a simulated board,
  int fd = bootHang(board);
  // when QEMU dies by a signal (an abort, a crash, an operator's kill),
  pid_t qemu = qemuPid(dir.path());
  REQUIRE(qemu > 0);
  REQUIRE(::kill(qemu, sig) == 0);
  // its console closes
  REQUIRE(readConsole(fd, ""));
  ::close(fd);
  // and the board says how QEMU ended: the signal, as evidence too.
  std::optional<QemuEnd> end = board.waitEnd(10s);
  REQUIRE(end);
  CHECK(end->describe() == said);
  CHECK(end->signal == sig);
  CHECK_FALSE(end->sandbox);
  CHECK(end->evidence().signal == sig);
  CHECK_FALSE(end->evidence().exit_code);
  CHECK(board.exitStatus() == 128 + sig);
  CHECK_FALSE(board.running());
}

TEST_CASE("a sandbox killed from outside is told apart from QEMU's own end, and takes QEMU with it") {
  TempDir dir;
  QemuBoard board("sim", machine(), dir.file("qemu"));
  int fd = bootHang(board);
  // Given firmware running, when its sandbox (bubblewrap) is killed,
  REQUIRE(::kill(board.pid(), SIGKILL) == 0);
  std::optional<QemuEnd> end = board.waitEnd(10s);
  // the board reports the sandbox's end,
  REQUIRE(end);
  CHECK(end->describe() == "QEMU's sandbox was killed by signal 9 (Killed)");
  CHECK(end->sandbox);
  // and QEMU is gone too.
  CHECK(readConsole(fd, ""));
  ::close(fd);
  CHECK(qemuGone(dir.path()));
}

TEST_CASE("the reference simulator reports how QEMU ended when it dies mid-run") {
  auto [wrapped, sig, said] =
      GENERATE(table<bool, int, std::string>({{false, SIGKILL, "the simulator was killed by signal 9 (Killed)"},
                                              {false, SIGABRT, "the simulator was killed by signal 6 (Aborted)"},
                                              {true, SIGKILL, "the simulator exited with status 3"}}));
  TempDir dir;
  hwfarm::config::QemuConfig c = machine();
  // (wrapped: QEMU runs under a shell that exits 3 once QEMU is gone)
  if (wrapped) c.binary = dir.script("qemu-exits-3", "qemu-system-arm \"$@\"\nexit 3\n");
  std::atomic<bool> cancel{false};
  SimulatorOptions options;
  options.deadline = 60s;
  options.cancel = &cancel;
  std::optional<hwfarm::Result<SimulatorRun>> ran;
  std::thread simulator([&] { ran = runSimulator("ref", c, firmware("hang"), dir.file("sim"), options); });
  struct Join {
    std::thread& t;
    std::atomic<bool>& cancel;
    ~Join() {
      cancel = true;
      t.join();
    }
  } join{simulator, cancel};
  // Given firmware running on the reference simulator (its console read),
  pid_t qemu = 0;
  for (int i = 0; i < 2000 && !(qemu && sandboxSocketConnected(dir.path(), "/sim/sock/ref.uart")); ++i) {
    qemu = qemuPid(dir.path());
    std::this_thread::sleep_for(10ms);
  }
  REQUIRE(qemu > 0);
  REQUIRE(sandboxSocketConnected(dir.path(), "/sim/sock/ref.uart"));
  // when QEMU dies,
  REQUIRE(::kill(qemu, sig) == 0);
  simulator.join();
  simulator = std::thread([] {}); // for Join
  // the run says how: its exit status, or the signal.
  REQUIRE(ran);
  REQUIRE(ran->ok());
  const SimulatorRun& r = **ran;
  CHECK(r.qemu_end == said);
  CHECK(r.qemu_signal == (wrapped ? 0 : sig));
  CHECK(r.qemu_exit == (wrapped ? 3 : 128 + sig));
  CHECK_FALSE(r.ended);
  CHECK_FALSE(r.timed_out);
}

TEST_CASE("an image that locks the simulated core up is told apart from a simulator that crashed") {
  TempDir dir;
  // Given an image that is no firmware (its vector table is text: the core
  // faults at reset and locks up, and QEMU aborts),
  std::string junk = dir.write("junk.bin", std::string(64, 'x'));
  SimulatorOptions options;
  options.deadline = 20s;
  auto ran = runSimulator("ref", machine(), junk, dir.file("sim"), options);
  REQUIRE(ran);
  // the run says QEMU ended by itself and what the guest did,
  CHECK(ran->qemu_signal == SIGABRT);
  CHECK(ran->guest_lockup.rfind("Lockup: ", 0) == 0);
  // which a run of real firmware never says.
  auto good = runSimulator("ref", machine(), firmware("pass"), dir.file("sim2"), options);
  REQUIRE(good);
  CHECK(good->guest_lockup.empty());
  CHECK(hwfarm::drivers::guestLockup(dir.file("no-such.log")).empty());
}

TEST_CASE("a firmware that resets after END ends its simulator's run at once, and a reset before END is its own failure") {
  TempDir dir;
  SimulatorOptions options;
  options.deadline = 120s;
  // Given a drain window far longer than any run (a record after END is
  // looked for that long),
  options.drain = 60s;
  // the pass firmware, which resets the core after its END, ends its run
  // there: QEMU stopped, nothing can follow, the window is not waited out;
  auto pass = runSimulator("ref", machine(), firmware("pass"), dir.file("pass"), options);
  REQUIRE(pass);
  CHECK(pass->ended);
  CHECK_FALSE(pass->timed_out);
  CHECK_FALSE(pass->qemu_exit); // (the run's end, not a crash)
  CHECK_FALSE(pass->guest_reset);
  CHECK(pass->console.find("HWFARM END status=0\n") != std::string::npos);
  CHECK(pass->seconds < 60);
  // one that idles after END is read through the window, and its record
  // after END is there;
  options.drain = 500ms;
  auto afterend = runSimulator("ref", machine(), firmware("afterend"), dir.file("afterend"), options);
  REQUIRE(afterend);
  CHECK(afterend->ended);
  CHECK(afterend->console.find("HWFARM TEST late FAIL printed after END") != std::string::npos);
  CHECK(afterend->seconds >= 0.5);
  // a reset before END is the firmware's doing, said as such;
  auto mid = runSimulator("ref", machine(), firmware("resetmid"), dir.file("mid"), options);
  REQUIRE(mid);
  CHECK_FALSE(mid->ended);
  CHECK_FALSE(mid->timed_out);
  CHECK(mid->guest_reset);
  CHECK(mid->qemu_exit == 0);
  CHECK(mid->qemu_signal == 0);
  CHECK(mid->guest_lockup.empty());
  CHECK(mid->qemu_end == "the simulator was reset by its firmware");
  CHECK(mid->console.find("HWFARM TEST square PASS") != std::string::npos);
  CHECK(mid->console.find("HWFARM TEST ramp") == std::string::npos);
  // while QEMU stopped from the host by SIGTERM, which exits with status 0
  // too, is no reset: QEMU says so in its log.
  std::atomic<bool> cancel{false};
  options.cancel = &cancel;
  options.deadline = 60s;
  std::optional<hwfarm::Result<SimulatorRun>> ran;
  std::thread simulator([&] { ran = runSimulator("ref", machine(), firmware("hang"), dir.file("term"), options); });
  // (once QEMU handles SIGTERM: before, it dies of it, a signal too)
  auto catchesTerm = [](pid_t pid) {
    std::istringstream status(readFile("/proc/" + std::to_string(pid) + "/status"));
    for (std::string line; std::getline(status, line);)
      if (line.rfind("SigCgt:", 0) == 0) return (std::stoull(line.substr(7), nullptr, 16) >> (SIGTERM - 1)) & 1;
    return 0ull;
  };
  pid_t qemu = 0;
  for (int i = 0; i < 2000 && !(qemu && sandboxSocketConnected(dir.path(), "/term/sock/ref.uart") && catchesTerm(qemu));
       ++i) {
    qemu = qemuPid(dir.path());
    std::this_thread::sleep_for(10ms);
  }
  if (qemu > 0) ::kill(qemu, SIGTERM);
  else cancel = true;
  simulator.join();
  REQUIRE(qemu > 0);
  REQUIRE(ran);
  REQUIRE(ran->ok());
  CHECK_FALSE((*ran)->guest_reset);
  CHECK((*ran)->qemu_exit == 0);
  CHECK((*ran)->qemu_end == "the simulator exited with status 0");
  CHECK(readFile(dir.file("term/ref.qemu.log")).find("terminating on signal 15") != std::string::npos);
}

TEST_CASE("a simulator killed in the drain window after END is no clean end: the run says so") {
  TempDir dir;
  std::atomic<bool> cancel{false};
  SimulatorOptions options;
  options.deadline = 120s;
  options.drain = 60s; // (far longer than the test: only QEMU's end ends the run)
  options.cancel = &cancel;
  // Given a firmware that idles after its END, read in its drain window,
  std::optional<hwfarm::Result<SimulatorRun>> ran;
  std::thread simulator([&] { ran = runSimulator("ref", machine(), firmware("idle"), dir.file("sim"), options); });
  pid_t qemu = 0;
  for (int i = 0; i < 2000 && !(qemu && sandboxSocketConnected(dir.path(), "/sim/sock/ref.uart")); ++i) {
    qemu = qemuPid(dir.path());
    std::this_thread::sleep_for(10ms);
  }
  // (its END printed: QEMU idles in the guest's wfi, its CPU time no longer grows)
  auto cpuTicks = [](pid_t pid) {
    std::string stat = readFile("/proc/" + std::to_string(pid) + "/stat");
    std::istringstream rest(stat.substr(stat.rfind(')') + 1)); // fields 3 on: state ... utime (14), stime (15)
    std::string field;
    for (int i = 3; i < 14 && rest >> field; ++i) {
    }
    unsigned long long user = 0, system = 0;
    rest >> user >> system;
    return user + system;
  };
  for (int i = 0; qemu > 0 && i < 100; ++i) {
    auto before = cpuTicks(qemu);
    std::this_thread::sleep_for(200ms);
    if (cpuTicks(qemu) == before) break;
  }
  // when QEMU is killed from outside in the window,
  if (qemu > 0) ::kill(qemu, SIGKILL);
  else cancel = true;
  simulator.join();
  REQUIRE(qemu > 0);
  REQUIRE(ran);
  REQUIRE(ran->ok());
  const SimulatorRun& r = **ran;
  // the run ended at END, and says the simulator was killed after it.
  CHECK(r.ended);
  CHECK(r.console.find("HWFARM END status=0\n") != std::string::npos);
  CHECK(r.qemu_signal == SIGKILL);
  CHECK_FALSE(r.guest_reset);
  CHECK(r.qemu_end == "after END, in the drain window: the simulator was killed by signal 9 (Killed)");
}

TEST_CASE("bubblewrap refused its namespaces: both places that deny them are named") {
  const std::string denied =
      "bwrap: No permissions to create new namespace, likely because the kernel does not allow non-privileged user "
      "namespaces. See <https://deb.li/bubblewrap> or <file:///usr/share/doc/bubblewrap/README.Debian.gz>.";
  CHECK(hwfarm::drivers::sandboxRefusal(denied) ==
        denied + " (hwfarmd may not create namespaces: the kernel denies them to unprivileged users, or its "
                 "systemd unit does (RestrictNamespaces=), where QEMU is to be confined by hwfarm-launcher: "
                 "hwfarmd --simulator-launcher /run/hwfarm-launcher.sock, as the packaged unit runs it)");
  // Any other refusal is bubblewrap's own line, unchanged.
  const std::string other = "bwrap: Can't mount proc on /newroot/proc: Operation not permitted";
  CHECK(hwfarm::drivers::sandboxRefusal(other) == other);
}
