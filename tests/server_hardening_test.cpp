// Issue 9, hostile clients against a real hwfarmd over real sockets: more
// connections than descriptors (item 5), console readers that never read
// (item 6), waiting clients that send a byte and leave (item 7), and two
// daemons on one unix socket (item 9).
#include <catch2/catch.hpp>

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <boost/json.hpp>
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <memory>
#include <regex>
#include <thread>

#include "tests/support/daemon_harness.h"

using namespace hwfarm::test;
namespace json = boost::json;
using namespace std::chrono_literals;

namespace {

// A raw connection to the daemon, for clients no library would be.
class Raw {
 public:
  // `receive_buffer` > 0 shrinks SO_RCVBUF so a client that does not read
  // stops the daemon's writes soon.
  explicit Raw(const std::string& url, int receive_buffer = 0)
      : fd_(connectRaw(url, receive_buffer)), connected_(fd_ >= 0) {}
  ~Raw() { ::close(fd_); }
  Raw(const Raw&) = delete;
  Raw& operator=(const Raw&) = delete;

  bool connected() const { return connected_; }
  void send(const std::string& data) {
    REQUIRE(::send(fd_, data.data(), data.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(data.size()));
  }
  // Reads until `needle` arrives, the peer closes, or 10 s of silence.
  std::string readUntil(const std::string& needle) {
    char buffer[65536];
    ssize_t n;
    while (got_.find(needle) == std::string::npos && (n = ::recv(fd_, buffer, sizeof buffer, 0)) > 0)
      got_.append(buffer, static_cast<size_t>(n));
    return got_;
  }
  // True once the peer has closed its end (polls up to `timeout`).
  bool closedByPeer(std::chrono::milliseconds timeout) {
    auto deadline = std::chrono::steady_clock::now() + timeout;
    char buffer[65536];
    while (std::chrono::steady_clock::now() < deadline) {
      pollfd p{fd_, POLLIN, 0};
      if (::poll(&p, 1, 50) <= 0) continue;
      ssize_t n = ::recv(fd_, buffer, sizeof buffer, MSG_DONTWAIT);
      if (n == 0 || (n < 0 && errno != EAGAIN)) return true;
    }
    return false;
  }

 private:
  int fd_ = -1;
  bool connected_ = false;
  std::string got_;
};

json::value parse(const std::string& body) { return json::parse(body); }

// The body of a chunked HTTP response, as far as its chunks are complete.
std::string dechunk(const std::string& raw) {
  size_t at = raw.find("\r\n\r\n");
  if (at == std::string::npos) return "";
  at += 4;
  std::string body;
  while (true) {
    size_t eol = raw.find("\r\n", at);
    if (eol == std::string::npos) break;
    size_t size = std::stoul(raw.substr(at, eol - at), nullptr, 16);
    if (size == 0 || eol + 2 + size + 2 > raw.size()) break;
    body += raw.substr(eol + 2, size);
    at = eol + 2 + size + 2;
  }
  return body;
}

// A sample of /metrics, e.g. metric(d, "hwfarm_streams_open"); -1 when absent.
double metric(const RunningDaemon& d, const std::string& name) {
  std::string text = d.get("/metrics").body;
  std::smatch m;
  if (!std::regex_search(text, m, std::regex("\n" + name + "\\{[^}]*\\} ([0-9.e+]+)"))) return -1;
  return std::stod(m[1]);
}

// Polls `condition` every 20 ms until it holds or `timeout` passes.
template <class F>
bool eventually(F condition, std::chrono::milliseconds timeout = 5s) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!condition()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(20ms);
  }
  return true;
}

int64_t rssKiB(pid_t pid) {
  std::string status = readFile("/proc/" + std::to_string(pid) + "/status");
  std::smatch m;
  return std::regex_search(status, m, std::regex("VmRSS:\\s+([0-9]+) kB")) ? std::stoll(m[1]) : -1;
}

size_t openDescriptors(pid_t pid) {
  size_t n = 0;
  for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator("/proc/" + std::to_string(pid) + "/fd"))
    ++n;
  return n;
}

// The fake board (tests/fakes/fake_board.cpp) behind a pty as the only board.
std::string fakeFleet(const TempDir& dir, const std::string& limits = "") {
  std::string sock = dir.file("fake.sock"), link = dir.file("ttyFAKE0");
  return qemuFleet(dir.file("state"), 0, "image_roots = [\"" + dir.path() + "\"]\n[leases]\nrecovery_s = 0\n" + (limits.empty() ? "" : "[limits]\n" + limits)) +
         "  [[worker.board]]\n  name = \"fake-1\"\n  type = \"fake\"\n"
         "  usb = { vendor = \"1209\", product = \"0001\", serial = \"FAKE0001\" }\n"
         "  serial = { port = \"" + link + "\" }\n"
         "  flash = { driver = \"command\", argv = [\"" FAKE_BOARD_PATH "\", \"flash\", \"" + sock +
         "\", \"{image}\"], timeout_s = 30 }\n"
         "  power = { driver = \"command\", on = [\"" FAKE_BOARD_PATH "\", \"power\", \"" + sock +
         "\", \"on\"], off = [\"" FAKE_BOARD_PATH "\", \"power\", \"" + sock + "\", \"off\"] }\n";
}

// `lines` numbered lines of about 100 bytes, the last one "line <lines-1> end".
std::string numberedLines(int lines) {
  std::string image;
  std::string pad(80, 'x');
  for (int i = 0; i < lines; ++i)
    image += "line " + std::to_string(i) + " " + pad + (i + 1 == lines ? " end" : "") + "\n";
  return image;
}

// A plugged-in fake board, leased, that has printed `image` (lines, each
// ending in a newline; `last` is the last one). Returns the lease.
struct ChattyBoard {
  ChattyBoard(const TempDir& dir, RunningDaemon& d, int lines) : ChattyBoard(dir, d, numberedLines(lines)) {}
  ChattyBoard(const TempDir& dir, RunningDaemon& d, const std::string& image)
      : board({FAKE_BOARD_PATH, "serve", "--link", dir.file("ttyFAKE0"), "--control", dir.file("fake.sock")},
              dir.file("board.out"), dir.file("board.err")) {
    // It links its tty before it listens for the flasher: wait for both.
    REQUIRE(waitForText(dir.file("board.out"), "fake board console", 10s));
    REQUIRE(eventually([&] { return d.get("/v1/boards").body.find("\"available\"") != std::string::npos; }));
    auto granted = d.request("POST", "/v1/leases", R"({"selector":{"type":"fake"},"context":"manual","ttl_s":600})");
    REQUIRE(granted.status == 201);
    id = std::string(parse(granted.body).at("id").as_string());
    std::string path = dir.write("image.bin", image);
    base = "/v1/leases/" + id + "/boards/fake-1/";
    REQUIRE(d.request("POST", base + "flash", "{\"image\":\"" + path + "\"}").status == 200);
    REQUIRE(d.request("POST", base + "power", R"({"action":"on"})").status == 200);
    last = image.substr(image.rfind('\n', image.size() - 2) + 1);
    log = dir.file("state/consoles/" + id + "/fake-1.log");
    REQUIRE(waitForText(log, last, 30s));
  }
  std::string consoleRequest() const { return "GET " + base + "console HTTP/1.1\r\nHost: x\r\n\r\n"; }

  Process board;
  std::string id, base, last, log;
};

} // namespace

// --- item 5: more connections than descriptors ------------------------------

TEST_CASE("accept failing with EMFILE backs off and logs once per interval and the daemon recovers") {
  TempDir dir;
  RunningDaemon d(dir, qemuFleet(dir.file("state"), 0));
  pid_t pid = d.process().pid();
  // Given a descriptor limit a few above what the daemon has open,
  rlimit before{};
  REQUIRE(::prlimit(pid, RLIMIT_NOFILE, nullptr, &before) == 0);
  rlimit low{openDescriptors(pid) + 6, before.rlim_max};
  REQUIRE(::prlimit(pid, RLIMIT_NOFILE, &low, nullptr) == 0);
  // when more idle clients connect than it has descriptors left,
  std::vector<std::unique_ptr<Raw>> clients;
  for (int i = 0; i < 40; ++i) clients.push_back(std::make_unique<Raw>(d.url()));
  REQUIRE(eventually([&] { return d.log().find("accept failed: Too many open files") != std::string::npos; }));
  std::this_thread::sleep_for(1500ms); // the failure goes on: let a spinning accept loop show
  // then the failure is reported once for the episode, not per attempt,
  std::string log = d.log();
  CHECK(occurrences(log, "accept failed") <= 2);
  REQUIRE(log.find("accept failed: Too many open files; retrying every 100 ms (reported at most every 10 s)") !=
          std::string::npos);
  // and once the clients leave, it answers again.
  clients.clear();
  REQUIRE(::prlimit(pid, RLIMIT_NOFILE, &before, nullptr) == 0);
  REQUIRE(eventually([&] {
    try {
      return d.get("/v1/healthz").status == 200;
    } catch (const hwfarm::cli::Unreachable&) {
      return false;
    }
  }));
  REQUIRE(metric(d, "hwfarm_http_accept_errors_total") >= 1);
}

TEST_CASE("max_connections above RLIMIT_NOFILE is clamped at start-up with a warning and served as 503") {
  TempDir dir;
  // Given a hard descriptor limit of 200 (hwfarmd cannot raise it) and the
  // default max_connections = 1024,
  RunningDaemon d(dir, qemuFleet(dir.file("state"), 0), {}, {"/usr/bin/prlimit", "--nofile=200:200", "--"});
  // hwfarmd warns and serves what fits beside the 64 descriptors it keeps,
  REQUIRE(d.log().find("limits.max_connections = 1024 does not fit the descriptor limit: RLIMIT_NOFILE is 200 and "
                       "hwfarmd keeps 64 for its own files; serving at most 136 connections (raise LimitNOFILE= or "
                       "ulimit -n)") != std::string::npos);
  REQUIRE(metric(d, "hwfarm_http_max_connections") == 136);
  // so connection 137 is answered 503 instead of failing accept().
  std::vector<std::unique_ptr<Raw>> idle;
  for (int i = 0; i < 135; ++i) idle.push_back(std::make_unique<Raw>(d.url()));
  // (the /metrics request is connection 136)
  REQUIRE(eventually([&] { return metric(d, "hwfarm_http_connections") == 136; }));
  // Connection 136 again, once the daemon has seen the /metrics one close
  // (until then a new one is refused and closed, and is opened again),
  REQUIRE(eventually([&] {
    auto c = std::make_unique<Raw>(d.url());
    if (c->closedByPeer(200ms)) return false;
    idle.push_back(std::move(c));
    return true;
  }));
  Raw one_more(d.url());
  std::string answer = one_more.readUntil("retry later");
  REQUIRE(answer.rfind("HTTP/1.1 503 Service Unavailable\r\n", 0) == 0);
  REQUIRE(answer.find("connection limit (limits.max_connections) reached; retry later") != std::string::npos);
  REQUIRE(d.log().find("accept failed") == std::string::npos);
}

TEST_CASE("a descriptor limit below what hwfarmd keeps for itself stops the start") {
  TempDir dir;
  std::string config = dir.write("fleet.toml", qemuFleet(dir.file("state"), 0));
  Process p({"/usr/bin/prlimit", "--nofile=40:40", "--", HWFARMD_PATH, "--config", config}, dir.file("out"),
            dir.file("err"), {{"JOURNAL_STREAM", ""}, {"NOTIFY_SOCKET", ""}});
  auto status = p.wait(15s);
  REQUIRE(status);
  REQUIRE(status->code == 1);
  REQUIRE(readFile(dir.file("err")).find("the descriptor limit (RLIMIT_NOFILE) is 40 and hwfarmd keeps 64 for its "
                                         "own files: no connection fits; raise LimitNOFILE= or ulimit -n") !=
          std::string::npos);
}

// --- item 6: console streams ------------------------------------------------

TEST_CASE("console readers that never read hold bounded memory and are closed at the write deadline") {
  TempDir dir;
  RunningDaemon d(dir, fakeFleet(dir, "idle_timeout_s = 1\n"));
  // Given a console that printed 60,000 lines (about 6 MiB, above the 4 MiB
  // stream cap),
  ChattyBoard b(dir, d, 60000);
  REQUIRE(std::filesystem::file_size(b.log) > 5u * 1024 * 1024);
  int64_t rss_before = rssKiB(d.process().pid());
  // when 6 readers ask for it and never read,
  std::vector<std::unique_ptr<Raw>> readers;
  for (int i = 0; i < 6; ++i) {
    readers.push_back(std::make_unique<Raw>(d.url(), 4096));
    readers.back()->send(b.consoleRequest());
  }
  CHECK(eventually([&] { return metric(d, "hwfarm_streams_open") == 6; }));
  std::this_thread::sleep_for(300ms); // the backlog is being read meanwhile
  // the daemon holds at most a 64 KiB piece of the backlog per reader,
  double queued = metric(d, "hwfarm_stream_queued_bytes");
  CHECK(queued >= 0);
  CHECK(queued <= 6 * (64 * 1024 + 1024));
#ifndef __SANITIZE_ADDRESS__ // ASan keeps freed memory in quarantine: RSS says nothing there
  CHECK(rssKiB(d.process().pid()) - rss_before < 16 * 1024);
#else
  (void)rss_before;
#endif
  // and closes each one once it has taken nothing for idle_timeout_s
  // (reading from them before that would let their streams go on).
  REQUIRE(eventually([&] { return metric(d, "hwfarm_streams_open") == 0; }, 10s));
  REQUIRE(metric(d, "hwfarm_stream_queued_bytes") == 0);
  for (auto& r : readers) REQUIRE(r->closedByPeer(5s));
}

TEST_CASE("a console backlog larger than the stream cap streams fully to a reader, then live lines") {
  TempDir dir;
  RunningDaemon d(dir, fakeFleet(dir));
  ChattyBoard b(dir, d, 60000);
  Raw reader(d.url());
  reader.send(b.consoleRequest());
  std::string got = dechunk(reader.readUntil(b.last));
  REQUIRE(got.find(b.last) != std::string::npos);
  // Every line arrived, once and in order.
  int expected = 0;
  for (size_t at = got.find("] line "); at != std::string::npos; at = got.find("] line ", at + 1), ++expected)
    if (std::stoi(got.substr(at + 7, 8)) != expected) FAIL("line " << got.substr(at, 20) << " where " << expected << " belongs");
  REQUIRE(expected == 60000);
  // Live lines follow the backlog.
  std::string image = dir.write("live.bin", "live 0\nlive 1\nlive 2 end\n");
  REQUIRE(d.request("POST", b.base + "flash", "{\"image\":\"" + image + "\"}").status == 200);
  REQUIRE(d.request("POST", b.base + "power", R"({"action":"cycle"})").status == 200);
  std::string live = dechunk(reader.readUntil("live 2 end\n"));
  REQUIRE(live.find("] live 0\n") < live.find("] live 2 end\n"));
  REQUIRE(live.find("] live 2 end\n") != std::string::npos);
}

TEST_CASE("console streams per lease are capped with a 429") {
  TempDir dir;
  RunningDaemon d(dir, fakeFleet(dir, "max_console_streams = 2\n"));
  ChattyBoard b(dir, d, 3);
  auto first = std::make_unique<Raw>(d.url());
  first->send(b.consoleRequest());
  Raw second(d.url());
  second.send(b.consoleRequest());
  REQUIRE(first->readUntil(b.last).find(b.last) != std::string::npos);
  REQUIRE(second.readUntil(b.last).find(b.last) != std::string::npos);
  // A third reader of the same lease is refused,
  auto third = d.get(b.base + "console");
  REQUIRE(third.status == 429);
  REQUIRE(parse(third.body) == parse("{\"error\":\"too_many_streams\",\"detail\":\"lease " + b.id +
                                     " already has 2 console streams open (limits.max_console_streams); close one "
                                     "first\"}"));
  // and admitted once another one has left.
  first.reset();
  REQUIRE(eventually([&] { return metric(d, "hwfarm_streams_open") == 1; }));
  Raw fourth(d.url());
  fourth.send(b.consoleRequest());
  REQUIRE(fourth.readUntil(b.last).rfind("HTTP/1.1 200 OK\r\n", 0) == 0);
}

TEST_CASE("hwfarmctl console to a file keeps the lines it received when stopped by SIGTERM or SIGINT") {
  TempDir dir;
  RunningDaemon d(dir, fakeFleet(dir));
  ChattyBoard b(dir, d, 3);
  int signal = GENERATE(SIGTERM, SIGINT);
  // Like `timeout 3 hwfarmctl console L B > f`: stdout is a file.
  Process ctl({HWFARMCTL_PATH, "--url", d.url(), "console", b.id, "fake-1"}, dir.file("console.txt"),
              dir.file("console.err"));
  auto text = waitForText(dir.file("console.txt"), b.last, 5s);
  REQUIRE(text);
  ctl.signal(signal);
  auto status = ctl.wait(5s);
  REQUIRE(status);
  REQUIRE(status->exited);
  REQUIRE(status->code == 128 + signal);
  std::string kept = readFile(dir.file("console.txt"));
  REQUIRE(kept.find("] line 0 ") != std::string::npos);
  REQUIRE(kept.find(b.last) != std::string::npos);
  REQUIRE(readFile(dir.file("console.err")).empty());
}

// --- issue 20: a firmware's terminal escapes ----------------------------------

namespace {

// A firmware's console that would retitle the operator's terminal window,
// clear its screen, ring, erase a character, rewrite a line and colour it
// through both forms of CSI; then plain UTF-8 and a tab.
const std::vector<std::string> kHostileLines{
    "title \x1b]0;pwned\x07 set", "clear \x1b[2J\x1b[H done", "c0 \x01\x08\x7f FAIL\rPASS",
    "c1 \xc2\x9b" "31m and \x9b" "31m red", "plain caf\xc3\xa9\ttab end"};

std::string hostileImage() {
  std::string image;
  for (const auto& line : kHostileLines) image += line + "\n";
  return image;
}

// `text`'s console lines without their "[    0.123] " stamps.
std::vector<std::string> unstamped(const std::string& text) {
  std::vector<std::string> lines;
  for (size_t at = 0; at < text.size();) {
    size_t end = std::min(text.find('\n', at), text.size());
    std::string line = text.substr(at, end - at);
    if (line.rfind("[", 0) == 0 && line.find("] ") != std::string::npos) line = line.substr(line.find("] ") + 2);
    lines.push_back(line);
    at = end + 1;
  }
  return lines;
}

bool contains(const std::vector<std::string>& lines, const std::vector<std::string>& part) {
  return std::search(lines.begin(), lines.end(), part.begin(), part.end()) != lines.end();
}

} // namespace

TEST_CASE("hwfarmctl console shows a firmware's control bytes escaped on a terminal") {
  TempDir dir;
  RunningDaemon d(dir, fakeFleet(dir));
  // Given a board whose firmware printed terminal escapes and C0 and C1 controls,
  ChattyBoard b(dir, d, hostileImage());
  // when an operator follows its console on a terminal,
  Terminal terminal;
  Process ctl({HWFARMCTL_PATH, "--url", d.url(), "console", b.id, "fake-1"}, terminal.name(), dir.file("err"));
  bool shown = terminal.waitFor("tab end\n", 10s);
  ctl.signal(SIGINT);
  auto status = ctl.wait(5s);
  std::string screen = terminal.screen();
  INFO(screen);
  REQUIRE(shown);
  REQUIRE(status);
  CHECK(status->code == 130);
  // each control byte is shown as \xNN, the CR of "FAIL\rPASS" too; tab and UTF-8 stay.
  CHECK(contains(unstamped(screen), {"title \\x1b]0;pwned\\x07 set", "clear \\x1b[2J\\x1b[H done",
                                     "c0 \\x01\\x08\\x7f FAIL\\x0dPASS", "c1 \\xc2\\x9b31m and \\x9b31m red",
                                     "plain caf\xc3\xa9\ttab end"}));
  // Nothing on the screen but text, tabs and line ends.
  CHECK(std::none_of(screen.begin(), screen.end(), [](char c) {
    auto u = static_cast<unsigned char>(c);
    return (u < 0x20 && c != '\n' && c != '\t') || u == 0x7f || u == 0x9b;
  }));
  CHECK(readFile(dir.file("err")).empty());
}

TEST_CASE("hwfarmctl console writes a firmware's bytes as they are into a pipe, and with --raw to a terminal") {
  TempDir dir;
  RunningDaemon d(dir, fakeFleet(dir));
  ChattyBoard b(dir, d, hostileImage());
  std::vector<std::string> expected = kHostileLines;
  SECTION("into a pipe (hwfarmctl console L B | tee log)") {
    int pipe_fds[2];
    REQUIRE(::pipe2(pipe_fds, O_CLOEXEC) == 0);
    Process ctl({HWFARMCTL_PATH, "--url", d.url(), "console", b.id, "fake-1"}, "/proc/self/fd/" +
                std::to_string(pipe_fds[1]), dir.file("err"));
    ::close(pipe_fds[1]);
    std::string piped;
    pollfd readable{pipe_fds[0], POLLIN, 0};
    for (int i = 0; i < 1000 && piped.find("tab end\n") == std::string::npos; ++i) {
      if (::poll(&readable, 1, 10) != 1) continue;
      char buffer[4096];
      ssize_t n = ::read(pipe_fds[0], buffer, sizeof buffer);
      if (n <= 0) break;
      piped.append(buffer, static_cast<size_t>(n));
    }
    ctl.signal(SIGTERM);
    REQUIRE(ctl.wait(5s));
    ::close(pipe_fds[0]);
    INFO(piped);
    // The firmware's bytes, every one as it printed it.
    CHECK(contains(unstamped(piped), expected));
  }
  SECTION("to a terminal with --raw") {
    Terminal terminal;
    Process ctl({HWFARMCTL_PATH, "--url", d.url(), "console", "--raw", b.id, "fake-1"}, terminal.name(),
                dir.file("err"));
    bool shown = terminal.waitFor("tab end\n", 10s);
    ctl.signal(SIGINT);
    REQUIRE(ctl.wait(5s));
    INFO(terminal.screen());
    REQUIRE(shown);
    CHECK(contains(unstamped(terminal.screen()), expected));
  }
}

// --- item 7: a waiting client that sends a byte and leaves ------------------

TEST_CASE("a waiting lease request whose client sends one more byte and closes leaves the queue") {
  TempDir dir;
  RunningDaemon d(dir, qemuFleet(dir.file("state"), 1));
  const std::string acquire = R"({"selector":{"type":"mps2-an385"},"context":"manual","ttl_s":600)";
  auto held = d.request("POST", "/v1/leases", acquire + "}");
  REQUIRE(held.status == 201);
  std::string held_id(parse(held.body).at("id").as_string());
  auto queue = [&] { return parse(d.get("/v1/queue").body).at("queue").as_array().size(); };
  // Given a request waiting for the board,
  {
    Raw waiter(d.url());
    std::string body = acquire + ",\"wait_s\":60}";
    waiter.send("POST /v1/leases HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: " +
                std::to_string(body.size()) + "\r\n\r\n" + body);
    REQUIRE(eventually([&] { return queue() == 1; }));
    // when its client sends one more byte and then hangs up,
    waiter.send("G");
    std::this_thread::sleep_for(100ms);
  }
  // the request leaves the queue,
  REQUIRE(eventually([&] { return queue() == 0; }));
  // and once the board is released the next request gets it (no ghost holds it).
  REQUIRE(d.request("DELETE", "/v1/leases/" + held_id, "").status == 200);
  auto next = d.request("POST", "/v1/leases", acquire + ",\"wait_s\":10}");
  REQUIRE(next.status == 201);
}

TEST_CASE("a waiting request with a pipelined request behind it gets both answers") {
  TempDir dir;
  RunningDaemon d(dir, qemuFleet(dir.file("state"), 1));
  const std::string acquire = R"({"selector":{"type":"mps2-an385"},"context":"manual","ttl_s":600)";
  auto held = d.request("POST", "/v1/leases", acquire + "}");
  REQUIRE(held.status == 201);
  std::string held_id(parse(held.body).at("id").as_string());
  Raw waiter(d.url());
  std::string body = acquire + ",\"wait_s\":60}";
  waiter.send("POST /v1/leases HTTP/1.1\r\nHost: x\r\nContent-Length: " + std::to_string(body.size()) + "\r\n\r\n" +
              body);
  REQUIRE(eventually([&] { return parse(d.get("/v1/queue").body).at("queue").as_array().size() == 1; }));
  // A request pipelined while the first waits is read, kept, and answered after it.
  waiter.send("GET /v1/healthz HTTP/1.1\r\nHost: x\r\n\r\n");
  std::this_thread::sleep_for(100ms);
  REQUIRE(parse(d.get("/v1/queue").body).at("queue").as_array().size() == 1);
  REQUIRE(d.request("DELETE", "/v1/leases/" + held_id, "").status == 200);
  std::string answers = waiter.readUntil("\"agent\"");
  REQUIRE(answers.rfind("HTTP/1.1 201 Created\r\n", 0) == 0);
  REQUIRE(answers.find("HTTP/1.1 200 OK\r\n") != std::string::npos);
}

// --- item 9: two daemons on one unix socket ---------------------------------

namespace {

std::string unixFleet(const std::string& state_dir, const std::string& socket) {
  std::string text = qemuFleet(state_dir, 0);
  return std::regex_replace(text, std::regex("listen = \"127.0.0.1:0\""), "listen = \"unix:" + socket + "\"");
}

} // namespace

TEST_CASE("a second hwfarmd on a live unix socket refuses to start and the first keeps serving") {
  TempDir dir;
  std::string socket = dir.file("hwfarmd.sock");
  RunningDaemon first(dir, unixFleet(dir.file("state-a"), socket));
  REQUIRE(first.url() == "unix:" + socket);
  // Another daemon (its own state directory) configured with the same socket
  std::string config = dir.write("second.toml", unixFleet(dir.file("state-b"), socket));
  Process second({HWFARMD_PATH, "--config", config}, dir.file("second.out"), dir.file("second.err"),
                 {{"JOURNAL_STREAM", ""}, {"NOTIFY_SOCKET", ""}});
  auto status = second.wait(15s);
  // exits 1 naming the socket,
  REQUIRE(status);
  REQUIRE(status->code == 1);
  REQUIRE(readFile(dir.file("second.err"))
              .find("cannot listen on unix:" + socket +
                    ": another process is listening on it (another hwfarmd?); not taking it over") != std::string::npos);
  // and the first still answers on it.
  REQUIRE(first.get("/v1/healthz").status == 200);
  REQUIRE(first.process().running());
}

TEST_CASE("a stale unix socket file with no listener is replaced") {
  TempDir dir;
  std::string socket = dir.file("hwfarmd.sock");
  // A socket file left by a daemon that was killed: bound, then closed.
  int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, socket.c_str(), sizeof addr.sun_path - 1);
  REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
  ::close(fd);
  REQUIRE(std::filesystem::is_socket(socket));
  RunningDaemon d(dir, unixFleet(dir.file("state"), socket));
  REQUIRE(d.get("/v1/healthz").status == 200);
}
