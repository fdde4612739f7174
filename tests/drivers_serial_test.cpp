// Serial consoles on ptys (a pty stands in for a USB tty): raw reads on an
// event loop, nothing lost under a fast stream, expect with deadlines,
// exclusivity, and a port that vanishes mid-read.
#include <catch2/catch.hpp>

#include <climits>
#include <fcntl.h>
#include <grp.h>
#include <cstdlib>
#include <poll.h>
#include <pty.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <boost/asio/io_context.hpp>
#include <atomic>
#include <fstream>
#include <regex>
#include <thread>

#include "drivers/console_log.h"
#include "drivers/qemu_board.h"
#include "drivers/serial_port.h"
#include "tests/support/process.h"

using namespace hwfarm::drivers;
using hwfarm::test::readFile;
using hwfarm::test::TempDir;
using namespace std::chrono_literals;

namespace {

// The board side of a pty: what firmware would write to its UART.
struct FakeUart {
  int master = -1, slave = -1;
  std::string path;
  FakeUart() {
    char name[256];
    REQUIRE(openpty(&master, &slave, name, nullptr, nullptr) == 0);
    path = name;
    ::close(slave); // hwfarm opens the slave side by its path
  }
  ~FakeUart() {
    if (master >= 0) ::close(master);
  }
  void send(const std::string& data) const {
    size_t done = 0;
    while (done < data.size()) {
      ssize_t n = ::write(master, data.data() + done, data.size() - done);
      if (n > 0) done += static_cast<size_t>(n);
      else std::this_thread::sleep_for(1ms);
    }
  }
  void vanish() {
    ::close(master);
    master = -1;
  }
};

// Opens `path` from a child process without CAP_SYS_ADMIN (the kernel lets
// that capability past TIOCEXCL; tests may run as root): as uid/gid 65534
// when root, as the test's own user otherwise. Returns 0 if the open
// worked, else its errno.
int openUnprivileged(const std::string& path) {
  pid_t child = ::fork();
  if (child == 0) {
    if (::geteuid() == 0 && (::setgroups(0, nullptr) != 0 || ::setgid(65534) != 0 || ::setuid(65534) != 0)) _exit(126);
    int fd = ::open(path.c_str(), O_RDWR | O_NOCTTY | O_NONBLOCK | O_CLOEXEC);
    _exit(fd >= 0 ? 0 : errno);
  }
  int status = 0;
  if (child < 0 || ::waitpid(child, &status, 0) != child || !WIFEXITED(status)) return -1;
  return WEXITSTATUS(status);
}

SerialOptions options(const TempDir& dir) {
  SerialOptions o;
  o.lock_dir = dir.path();
  return o;
}

// Opens `path`; the test fails (with the reason) if it cannot.
std::unique_ptr<SerialPort> openPort(boost::asio::io_context& io, const std::string& path, const SerialOptions& o) {
  auto port = SerialPort::open(io, path, o);
  INFO(port.status().toString());
  REQUIRE(port.ok());
  return std::move(port).value();
}

} // namespace

TEST_CASE("no byte is lost from a fast stream and lines are logged with timestamps") {
  TempDir dir;
  FakeUart uart;
  boost::asio::io_context io;
  ConsoleLog log(dir.file("console.log"), 1 << 30);
  auto port = openPort(io, uart.path, options(dir));
  size_t lines = 0, chars = 0;
  port->start([&](const hwfarm::ConsoleLine& line) { ++lines, chars += line.text.size(); }, nullptr, &log);
  // 3 Mbaud for one second is ~300 KB: write that much as fast as the pty takes it.
  const size_t kLines = 5000;
  std::string line(59, 'x');
  // The writer gives up when told: a reader that stops must not leave it
  // blocked on a full pty.
  REQUIRE(::fcntl(uart.master, F_SETFL, O_NONBLOCK) == 0);
  std::atomic<bool> stop{false};
  std::thread writer([&] {
    std::string data = line + "\n";
    for (size_t i = 0; i < kLines && !stop; ++i)
      for (size_t done = 0; done < data.size() && !stop;) {
        ssize_t n = ::write(uart.master, data.data() + done, data.size() - done);
        if (n > 0) done += static_cast<size_t>(n);
        else std::this_thread::sleep_for(1ms);
      }
  });
  auto deadline = std::chrono::steady_clock::now() + 30s;
  while (lines < kLines && std::chrono::steady_clock::now() < deadline) io.run_one_for(100ms);
  stop = true;
  writer.join();
  REQUIRE(lines == kLines);
  REQUIRE(chars == kLines * line.size());
  REQUIRE(port->bytesRead() == kLines * (line.size() + 1));
  std::string text = readFile(dir.file("console.log"));
  REQUIRE(std::regex_search(text, std::regex("^\\[ +[0-9]+\\.[0-9]{3}\\] x{59}\n")));
  REQUIRE(text.find("] " + line + "\n") != std::string::npos);
}

TEST_CASE("expect waits for a matching line or gives up at its deadline") {
  TempDir dir;
  FakeUart uart;
  boost::asio::io_context io;
  auto port = openPort(io, uart.path, options(dir));
  port->start(nullptr, nullptr, nullptr);
  std::optional<std::optional<std::string>> found, missing;
  port->expect(std::regex("^HWFARM END"), 5s, [&](auto line) { found = line; });
  port->expect(std::regex("never printed"), 200ms, [&](auto line) { missing = line; });
  uart.send("booting\nHWFARM BEGIN suite=x\nHWFARM END\n");
  auto start = std::chrono::steady_clock::now();
  while ((!found || !missing) && std::chrono::steady_clock::now() - start < 5s) io.run_one_for(100ms);
  REQUIRE(found);
  REQUIRE(*found == std::optional<std::string>("HWFARM END"));
  REQUIRE(missing);
  REQUIRE_FALSE(missing->has_value());
}

TEST_CASE("a console is exclusive while open and its lock goes with it") {
  TempDir dir;
  FakeUart uart;
  // Anyone may open the tty but for its exclusivity.
  REQUIRE(::chmod(uart.path.c_str(), 0666) == 0);
  REQUIRE(openUnprivileged(uart.path) == 0);
  boost::asio::io_context io;
  auto first = openPort(io, uart.path, options(dir));
  // While hwfarm holds it, another process's open of the tty is refused
  // (TIOCEXCL), lock file or not,
  CHECK(openUnprivileged(uart.path) == EBUSY);
  // and another SerialPort is refused by the UUCP lock.
  std::string lock = dir.file("LCK.." + uart.path.substr(5).replace(uart.path.substr(5).find('/'), 1, "_"));
  REQUIRE(std::stoi(readFile(lock)) == ::getpid());
  auto second = SerialPort::open(io, uart.path, options(dir));
  REQUIRE_FALSE(second);
  REQUIRE(second.status().message() ==
          uart.path + " is locked by pid " + std::to_string(::getpid()) + " (" + lock + ")");
  REQUIRE(second.status().is(hwfarm::Code::busy));
  REQUIRE(second.status().isInfrastructure());
  first.reset();
  REQUIRE(::access(lock.c_str(), F_OK) != 0);
  // (TIOCEXCL ends with a USB tty's last close; a pty slave keeps the flag
  // while its master is open, so it is not checked again here.)
  // A lock left by a process that is gone is stale and taken over.
  std::ofstream(lock) << "    999999\n";
  REQUIRE(SerialPort::open(io, uart.path, options(dir)));
}

TEST_CASE("a port that vanishes mid-read is reported once and not spun on") {
  TempDir dir;
  FakeUart uart;
  boost::asio::io_context io;
  ConsoleLog log(dir.file("console.log"), 1 << 20);
  auto port = openPort(io, uart.path, options(dir));
  int closed = 0;
  std::string reason;
  std::optional<std::optional<std::string>> waiting;
  port->start(nullptr, [&](const std::string& why) { ++closed, reason = why; }, &log);
  port->expect(std::regex("HWFARM END"), 10s, [&](auto line) { waiting = line; });
  uart.send("HWFARM BEGIN suite=x\npartial li");
  for (int i = 0; i < 20; ++i) io.run_one_for(10ms);
  uart.vanish(); // the USB device left
  auto start = std::chrono::steady_clock::now();
  while (!closed && std::chrono::steady_clock::now() - start < 5s) io.run_one_for(100ms);
  REQUIRE(closed == 1);
  // A pty reports its master going away as EOF, a USB tty as EIO.
  REQUIRE_THAT(reason, Catch::Matches("end of file|Input/output error"));
  REQUIRE(port->closed());
  // The lock goes with the port at once, so the board can be opened again.
  std::string device = uart.path.substr(5); // "pts/N", already the real device
  device[device.find('/')] = '_';
  REQUIRE(::access(dir.file("LCK.." + device).c_str(), F_OK) != 0);
  REQUIRE(waiting);
  REQUIRE_FALSE(waiting->has_value()); // the pending expect ended with the port
  // Once the cancelled timer's completion has run, nothing is left: the
  // loop does not spin on a dead descriptor.
  io.restart();
  io.poll();
  REQUIRE(io.poll() == 0);
  REQUIRE(io.stopped());
  std::string text = readFile(dir.file("console.log"));
  REQUIRE(text.find("] partial li\n") != std::string::npos);
  REQUIRE(text.find("] -- console closed: " + reason + " --\n") != std::string::npos);
}

TEST_CASE("a long line comes out in pieces of the protocol's limit, and a line the port ends inside of comes out cut") {
  TempDir dir;
  FakeUart uart;
  boost::asio::io_context io;
  ConsoleLog log(dir.file("console.log"), 1 << 20);
  auto port = openPort(io, uart.path, options(dir));
  struct Piece {
    std::string text;
    bool continued;
    hwfarm::LineEnd end;
    bool is_end;
  };
  std::vector<Piece> pieces;
  bool closed = false;
  port->start([&](const hwfarm::ConsoleLine& l) {
    pieces.push_back({std::string(l.text), l.continued, l.end, hwfarm::isEndRecord(l)});
  }, [&](const std::string&) { closed = true; }, &log);
  // Given 5,000 bytes on one line, then an END record without its line end,
  std::thread writer([&] { uart.send(std::string(5000, 'x') + "\nHWFARM END status=0"); });
  const uint64_t sent = 5000 + 1 + 19;
  auto deadline = std::chrono::steady_clock::now() + 10s;
  while (port->bytesRead() < sent && std::chrono::steady_clock::now() < deadline) io.run_one_for(50ms);
  writer.join();
  REQUIRE(port->bytesRead() == sent);
  // when the board goes away before the line ends,
  uart.vanish();
  deadline = std::chrono::steady_clock::now() + 5s;
  while (!closed && std::chrono::steady_clock::now() < deadline) io.run_one_for(50ms);
  // the long line came in two pieces, and the cut line is no END.
  REQUIRE(pieces.size() == 3);
  CHECK(pieces[0].text == std::string(4096, 'x'));
  CHECK((!pieces[0].continued && pieces[0].end == hwfarm::LineEnd::too_long));
  CHECK(pieces[1].text == std::string(904, 'x'));
  CHECK((pieces[1].continued && pieces[1].end == hwfarm::LineEnd::newline));
  CHECK(pieces[2].text == "HWFARM END status=0");
  CHECK(pieces[2].end == hwfarm::LineEnd::console_end);
  CHECK_FALSE(pieces[2].is_end);
  // The log keeps every byte, a piece a line.
  std::string text = readFile(dir.file("console.log"));
  CHECK(text.find("] " + std::string(4096, 'x') + "\n") != std::string::npos);
  CHECK(text.find("] " + std::string(904, 'x') + "\n") != std::string::npos);
  CHECK(text.find("] HWFARM END status=0\n") != std::string::npos);
}

TEST_CASE("opening a console that is not there names the path") {
  TempDir dir;
  boost::asio::io_context io;
  auto missing = SerialPort::open(io, "/dev/ttyACM-hwfarm-none", options(dir));
  REQUIRE_FALSE(missing);
  REQUIRE(missing.status().message() == "cannot open /dev/ttyACM-hwfarm-none: No such file or directory");
  REQUIRE(missing.status().is(hwfarm::Code::not_found));
  REQUIRE(::access(dir.file("LCK..ttyACM-hwfarm-none").c_str(), F_OK) != 0);
  SerialOptions odd = options(dir);
  odd.baud = 123456;
  auto refused = SerialPort::open(io, "/dev/null", odd);
  REQUIRE_FALSE(refused);
  REQUIRE(refused.status().message() == "baud rate 123456 is not supported");
}

TEST_CASE("the fake board's line drop and stall end in an expect deadline, not a hang") {
  for (const char* mode : {"drop", "stall"}) {
    INFO(mode);
    TempDir dir;
    std::string link = dir.file("ttyFAKE0"), sock = dir.file("fake.sock");
    hwfarm::test::Process board({FAKE_BOARD_PATH, "serve", "--link", link, "--control", sock}, dir.file("out"),
                                dir.file("err"));
    REQUIRE(hwfarm::test::waitForText(dir.file("out"), "control", 5s));
    std::string image = dir.write("image.txt", "HWFARM BEGIN suite=x\nHWFARM TEST a PASS\nHWFARM TEST b PASS\n"
                                               "HWFARM END\n");
    REQUIRE(hwfarm::test::runCommand({FAKE_BOARD_PATH, "flash", sock, image}).status.code == 0);
    REQUIRE(hwfarm::test::runCommand({FAKE_BOARD_PATH, "mode", sock, mode}).status.code == 0);
    boost::asio::io_context io;
    auto port = openPort(io, link, options(dir));
    std::vector<std::string> lines;
    port->start([&](const hwfarm::ConsoleLine& l) { lines.emplace_back(l.text); }, nullptr, nullptr);
    std::optional<std::optional<std::string>> end;
    port->expect(std::regex("^HWFARM END"), 800ms, [&](auto line) { end = line; });
    REQUIRE(hwfarm::test::runCommand({FAKE_BOARD_PATH, "power", sock, "on"}).status.code == 0);
    auto start = std::chrono::steady_clock::now();
    while (!end && std::chrono::steady_clock::now() - start < 5s) io.run_one_for(50ms);
    REQUIRE(end);
    REQUIRE_FALSE(end->has_value()); // the deadline, not the END line
    REQUIRE(lines.size() == (std::string(mode) == "drop" ? 2u : 1u));
    REQUIRE(lines.at(0) == "HWFARM BEGIN suite=x");
    REQUIRE_FALSE(port->closed()); // the line is still up: only the data stopped
  }
}

TEST_CASE("a unix socket counts as listening only once listen() was called") {
  hwfarm::test::TempDir dir;
  std::string path = dir.file("uart.sock");
  int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
  REQUIRE(fd >= 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::snprintf(addr.sun_path, sizeof addr.sun_path, "%s", path.c_str());
  REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
  // Bound: the file exists, but a connect would be refused (QEMU's window).
  CHECK_FALSE(hwfarm::drivers::unixSocketListening(path));
  REQUIRE(::listen(fd, 1) == 0);
  CHECK(hwfarm::drivers::unixSocketListening(path));
  CHECK_FALSE(hwfarm::drivers::unixSocketListening(path + ".other"));
  ::close(fd);
}

namespace {

// Waits until the pty holds unread input for its slave side: watched
// through a second descriptor of the slave, opened before hwfarm's.
bool inputWaiting(int watch) {
  pollfd p{watch, POLLIN, 0};
  return ::poll(&p, 1, 5000) == 1;
}

} // namespace

// Issue 9, item 14: a line read before close() but handed out after it
// reached on_line, whose owner (BoardService) had erased its console.
TEST_CASE("no line reaches on_line after close, even one already read") {
  TempDir dir;
  FakeUart uart;
  int watch = ::open(uart.path.c_str(), O_RDWR | O_NOCTTY | O_NONBLOCK | O_CLOEXEC);
  REQUIRE(watch >= 0);
  boost::asio::io_context io;
  auto port = openPort(io, uart.path, options(dir));
  // Given a line already waiting when reading starts (the read completes
  // at once and its handler is queued),
  uart.send("late line\npartial");
  REQUIRE(inputWaiting(watch));
  std::vector<std::string> lines;
  port->start([&](const hwfarm::ConsoleLine& line) { lines.emplace_back(line.text); }, nullptr, nullptr);
  // when the port is closed before the loop runs that handler,
  port->close();
  io.run_for(200ms);
  // the line goes nowhere.
  REQUIRE(lines.empty());
  ::close(watch);
}

// Issue 9, item 14: a deadline whose completion was already queued when its
// line arrived erased the expectation a second time (a freed list node).
TEST_CASE("an expect deadline already due when its line arrives answers once") {
  TempDir dir;
  FakeUart uart;
  int watch = ::open(uart.path.c_str(), O_RDWR | O_NOCTTY | O_NONBLOCK | O_CLOEXEC);
  REQUIRE(watch >= 0);
  boost::asio::io_context io;
  auto port = openPort(io, uart.path, options(dir));
  bool close_on_line = false;
  port->start([&](const hwfarm::ConsoleLine&) {
    if (close_on_line) port->close();
  }, nullptr, nullptr);
  io.poll(); // the read is waiting in the reactor
  int answers = 0;
  std::optional<std::string> answer;
  port->expect(std::regex("^HWFARM END"), 1ms, [&](std::optional<std::string> line) {
    ++answers;
    answer = line;
  });
  int others = 0;
  port->expect(std::regex("^never"), 1ms, [&](std::optional<std::string>) { ++others; });
  // Given the deadline passed and the matching line arrived before the loop
  // looked at either (both complete in the same reactor pass),
  std::this_thread::sleep_for(20ms);
  uart.send("HWFARM END status=0\n");
  REQUIRE(inputWaiting(watch));
  io.run_for(200ms);
  // each expectation is answered exactly once.
  REQUIRE(answers == 1);
  REQUIRE(others == 1);
  // The same with the port closed (from a line handler) while both
  // deadlines are due.
  answers = others = 0;
  close_on_line = true;
  port->expect(std::regex("^HWFARM END"), 1ms, [&](std::optional<std::string>) { ++answers; });
  port->expect(std::regex("^x"), 1ms, [&](std::optional<std::string>) { ++others; });
  std::this_thread::sleep_for(20ms);
  uart.send("unrelated\n");
  REQUIRE(inputWaiting(watch));
  io.run_for(200ms);
  REQUIRE(port->closed());
  REQUIRE(answers == 1);
  REQUIRE(others == 1);
  ::close(watch);
}
