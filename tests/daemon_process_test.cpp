// A real hwfarmd process: start-up, SIGHUP reload (good and broken), SIGTERM,
// --check-config, systemd notifications, journald log priorities and the
// HTTP server's handling of bad input.
#include <catch2/catch.hpp>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <boost/json.hpp>
#include <filesystem>
#include <regex>
#include <sstream>
#include <thread>

#include "tests/support/daemon_harness.h"

using namespace hwfarm::test;
namespace json = boost::json;
using namespace std::chrono_literals;

namespace {

json::value parse(const std::string& body) { return json::parse(body); }

int64_t generationOf(const RunningDaemon& d) {
  return parse(d.get("/v1/healthz").body).at("config").at("generation").as_int64();
}

size_t boardCountOf(const RunningDaemon& d) {
  return parse(d.get("/v1/boards").body).at("boards").as_array().size();
}

// A raw TCP connection to the daemon, for requests no client library sends.
class RawConnection {
 public:
  explicit RawConnection(const std::string& url) : fd_(connectRaw(url)) { REQUIRE(fd_ >= 0); }
  ~RawConnection() { close(fd_); }
  void send(const std::string& data) { REQUIRE(::send(fd_, data.data(), data.size(), MSG_NOSIGNAL) == (ssize_t)data.size()); }
  // Reads one response with a Content-Length body.
  std::string readResponse() {
    std::string out;
    char c;
    while (out.find("\r\n\r\n") == std::string::npos && recv(fd_, &c, 1, 0) == 1) out += c;
    std::smatch m;
    size_t length = std::regex_search(out, m, std::regex("Content-Length: ([0-9]+)")) ? std::stoul(m[1]) : 0;
    std::string body(length, '\0');
    size_t got = 0;
    while (got < length) {
      ssize_t n = recv(fd_, body.data() + got, length - got, 0);
      if (n <= 0) break;
      got += static_cast<size_t>(n);
    }
    return out + body.substr(0, got);
  }
  // Reads until the peer closes (or 10 s pass).
  std::string readAll() {
    std::string out;
    char buffer[4096];
    ssize_t n;
    while ((n = recv(fd_, buffer, sizeof buffer, 0)) > 0) out.append(buffer, static_cast<size_t>(n));
    return out;
  }

 private:
  int fd_ = -1;
};

// Receives sd_notify datagrams the way systemd does.
class NotifySocket {
 public:
  explicit NotifySocket(const std::string& path) : path_(path) {
    fd_ = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strncpy(addr.sun_path, path.c_str(), sizeof addr.sun_path - 1);
    REQUIRE(bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
    timeval tv{15, 0};
    setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  }
  ~NotifySocket() { close(fd_); }
  // The next datagram, or "" after 15 s of silence.
  std::string next() {
    char buffer[4096];
    ssize_t n = recv(fd_, buffer, sizeof buffer, 0);
    return n > 0 ? std::string(buffer, static_cast<size_t>(n)) : "";
  }
  // Skips datagrams (e.g. watchdog pings) until one starting with `prefix`.
  std::string nextStartingWith(const std::string& prefix) {
    for (int i = 0; i < 1000; ++i) {
      std::string m = next();
      if (m.empty() || m.rfind(prefix, 0) == 0) return m;
    }
    return "";
  }

 private:
  std::string path_;
  int fd_ = -1;
};

} // namespace

TEST_CASE("hwfarmd serves its config and exits 0 on SIGTERM") {
  TempDir dir;
  RunningDaemon d(dir, qemuFleet(dir.file("state"), 2));
  auto health = parse(d.get("/v1/healthz").body);
  REQUIRE(health.at("agent").as_string() == "test-lab");
  REQUIRE(health.at("registered_tier").as_int64() == 1);
  REQUIRE(health.at("config").at("generation").as_int64() == 1);
  REQUIRE(health.at("config").at("source").as_string() == d.configPath());
  REQUIRE(boardCountOf(d) == 2);
  struct stat st {};
  REQUIRE(stat(dir.file("state/hwfarmd.lock").c_str(), &st) == 0);

  d.process().signal(SIGTERM);
  auto status = d.process().wait(15s);
  REQUIRE(status);
  REQUIRE(status->exited);
  REQUIRE(status->code == 0);
  REQUIRE(d.log().find("hwfarmd stopped") != std::string::npos);
}

TEST_CASE("SIGHUP with a broken config keeps the old one and a good one replaces it") {
  TempDir dir;
  RunningDaemon d(dir, qemuFleet(dir.file("state"), 2));
  auto before = parse(d.get("/v1/healthz").body);
  std::string sha1 = before.at("config").at("sha256").as_string().c_str();
  REQUIRE(before.at("config").at("last_reload").at("at").is_null());
  std::regex rfc3339("20[0-9]{2}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\\.[0-9]{3}Z");
  REQUIRE(std::regex_match(std::string(before.at("started_at").as_string()), rfc3339));
  REQUIRE(before.at("config").at("loaded_at") == before.at("started_at"));

  // Given a config with a bad tier and a typo'd key,
  std::string text = qemuFleet(dir.file("state"), 3) + "[sla]\npin_tierr = 2\n";
  text = std::regex_replace(text, std::regex("tier = 1"), "tier = 7");
  dir.write("fleet.toml", text);
  d.process().signal(SIGHUP);
  // the daemon logs every error with its position and keeps generation 1.
  auto log = waitForText(d.logPath(), "reload failed", 10s);
  REQUIRE(log);
  REQUIRE(log->find(d.configPath() + ":6:8: agent.tier: expected an integer from 1 to 3, got 7") != std::string::npos);
  REQUIRE(log->find("sla.pin_tierr: unknown key (did you mean \"pin_tier\"?)") != std::string::npos);
  REQUIRE(log->find("reload failed with 2 error(s); keeping configuration generation 1") != std::string::npos);
  auto health = parse(d.get("/v1/healthz").body);
  REQUIRE(health.at("config").at("generation").as_int64() == 1);
  REQUIRE(health.at("config").at("sha256").as_string() == sha1);
  REQUIRE(health.at("config").at("last_reload").at("ok").as_bool() == false);
  REQUIRE(health.at("config").at("last_reload").at("errors").as_array().size() == 2);
  REQUIRE(boardCountOf(d) == 2);

  // Given a good config with a third board, the reload takes effect.
  dir.write("fleet.toml", qemuFleet(dir.file("state"), 3));
  d.process().signal(SIGHUP);
  REQUIRE(waitForText(d.logPath(), "configuration generation 2 loaded", 10s));
  REQUIRE(generationOf(d) == 2);
  REQUIRE(boardCountOf(d) == 3);
  health = parse(d.get("/v1/healthz").body);
  REQUIRE(health.at("config").at("last_reload").at("ok").as_bool());
  REQUIRE(health.at("config").at("sha256").as_string() != sha1);
  REQUIRE(std::regex_match(std::string(health.at("config").at("last_reload").at("at").as_string()), rfc3339));
  REQUIRE(health.at("config").at("loaded_at") == health.at("config").at("last_reload").at("at"));

  d.process().signal(SIGTERM);
  auto status = d.process().wait(15s);
  REQUIRE((status && status->exited && status->code == 0));
}

TEST_CASE("a broken config at start-up: every error is logged and hwfarmd exits 1") {
  TempDir dir;
  std::string path = dir.write("fleet.toml", "[agent]\nname = \"x\"\ntier = 0\nlisten = \"nowhere\"\n");
  Process p({HWFARMD_PATH, "--config", path}, dir.file("out"), dir.file("err"), {{"JOURNAL_STREAM", ""}});
  auto status = p.wait(15s);
  REQUIRE(status);
  REQUIRE(status->code == 1);
  std::string err = readFile(dir.file("err"));
  REQUIRE(err.find(path + ":3:8: agent.tier: expected an integer from 1 to 3, got 0") != std::string::npos);
  REQUIRE(err.find(path + ":4:10: agent.listen: expected") != std::string::npos);
  REQUIRE(err.find("worker: at least one [[worker]] table is required") != std::string::npos);
  REQUIRE(err.find("configuration has 3 error(s); not starting") != std::string::npos);
}

TEST_CASE("check-config exits 0 for a valid file and 1 with errors and 2 for bad usage") {
  TempDir dir;
  std::string good = dir.write("good.toml", qemuFleet(dir.file("state"), 2));
  std::string bad = dir.write("bad.toml", "[agent]\nname = \"x\"\ntier = 2\n[[worker]]\nnam = \"w\"\n");

  auto r = runCommand({HWFARMD_PATH, "--check-config", good});
  REQUIRE(r.status.code == 0);
  REQUIRE(r.out == "hwfarmd: " + good + ": configuration ok (1 workers, 2 boards)\n");

  r = runCommand({HWFARMD_PATH, "--check-config", bad});
  REQUIRE(r.status.code == 1);
  REQUIRE(r.err == bad + ":4:1: worker #1: name: required key is missing\n" + bad +
                       ":5:1: worker #1: nam: unknown key (did you mean \"name\"?)\n"
                       "hwfarmd: " + bad + ": 2 error(s)\n");

  r = runCommand({HWFARMD_PATH, "--check-config", dir.file("missing.toml")});
  REQUIRE(r.status.code == 1);
  REQUIRE(r.err.find(dir.file("missing.toml") + ": cannot read file: No such file or directory") == 0);

  r = runCommand({HWFARMD_PATH, "--check-config"});
  REQUIRE(r.status.code == 0);
  REQUIRE(r.out == "hwfarmd: <embedded sim-fleet.toml>: configuration ok (2 workers, 4 boards)\n");

  r = runCommand({HWFARMD_PATH, "--frobnicate"});
  REQUIRE(r.status.code == 2);
  REQUIRE(r.err.find("hwfarmd: unknown argument \"--frobnicate\"") == 0);
}

TEST_CASE("two daemons on one state directory: the second exits 1 naming the first") {
  TempDir dir;
  RunningDaemon first(dir, qemuFleet(dir.file("state"), 1));
  TempDir other;
  std::string path = other.write("fleet.toml", qemuFleet(dir.file("state"), 1));
  Process second({HWFARMD_PATH, "--config", path}, other.file("out"), other.file("err"), {{"JOURNAL_STREAM", ""}});
  auto status = second.wait(15s);
  REQUIRE(status);
  REQUIRE(status->code == 1);
  REQUIRE(readFile(other.file("err")).find("state directory " + dir.file("state") +
                                           " is in use by another hwfarmd (pid " +
                                           std::to_string(first.process().pid()) + ")") != std::string::npos);
  REQUIRE(first.process().running());
}

TEST_CASE("systemd READY and RELOADING and WATCHDOG and STOPPING notifications") {
  TempDir dir;
  NotifySocket notify(dir.file("notify.sock"));
  RunningDaemon d(dir, qemuFleet(dir.file("state"), 1),
                  {{"NOTIFY_SOCKET", dir.file("notify.sock")}, {"WATCHDOG_USEC", "200000"}});
  REQUIRE(notify.nextStartingWith("READY=1").rfind("READY=1\nSTATUS=serving agent test-lab", 0) == 0);
  // With WatchdogSec=0.2s the daemon pings every 100 ms from its event loop.
  REQUIRE(notify.nextStartingWith("WATCHDOG=1") == "WATCHDOG=1");
  REQUIRE(notify.nextStartingWith("WATCHDOG=1") == "WATCHDOG=1");
  d.process().signal(SIGHUP);
  REQUIRE(notify.nextStartingWith("RELOADING=1").rfind("RELOADING=1\nMONOTONIC_USEC=", 0) == 0);
  REQUIRE(notify.nextStartingWith("READY=1").rfind("READY=1\nSTATUS=serving", 0) == 0);
  d.process().signal(SIGTERM);
  REQUIRE(notify.nextStartingWith("STOPPING=1") == "STOPPING=1");
  auto status = d.process().wait(15s);
  REQUIRE((status && status->exited && status->code == 0));
}

TEST_CASE("under journald every log line starts with its syslog priority") {
  TempDir dir;
  // Given stderr is the stream $JOURNAL_STREAM names (device:inode),
  std::string log = dir.write("hwfarmd.log", "");
  struct stat st {};
  REQUIRE(stat(log.c_str(), &st) == 0);
  std::string stream = std::to_string(st.st_dev) + ":" + std::to_string(st.st_ino);
  RunningDaemon d(dir, qemuFleet(dir.file("state"), 1), {{"JOURNAL_STREAM", stream}});
  d.process().signal(SIGTERM);
  REQUIRE(d.process().wait(15s));
  // info lines get <6>, the anonymous-access warning <4>, and no timestamps.
  std::string text = d.log();
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    INFO(line);
    REQUIRE(std::regex_search(line, std::regex("^<[2-7]>[^<\\s]")));
  }
  REQUIRE(text.find("\n<6>listening on http://127.0.0.1:") != std::string::npos);
  REQUIRE(text.find("\n<4>anonymous access is allowed") != std::string::npos);
  REQUIRE(text.find("\n<6>hwfarmd stopped") != std::string::npos);
}

TEST_CASE("bad HTTP input gets a JSON 4xx and the connection closes") {
  TempDir dir;
  RunningDaemon d(dir, qemuFleet(dir.file("state"), 1, "[limits]\nheader_timeout_s = 0.5\n"));

  SECTION("an unknown path is 404, a wrong method 405") {
    auto r = d.get("/v1/nothing");
    REQUIRE(r.status == 404);
    REQUIRE(parse(r.body).at("error").as_string() == "not_found");
    r = d.request("DELETE", "/v1/boards", "");
    REQUIRE(r.status == 405);
    REQUIRE(parse(r.body).at("detail").as_string() == "DELETE is not allowed on /v1/boards");
  }
  SECTION("a body over limits.max_body_bytes is 413") {
    auto r = d.request("POST", "/v1/boards", std::string(70 * 1024, 'x'));
    REQUIRE(r.status == 413);
    REQUIRE(parse(r.body).at("error").as_string() == "payload_too_large");
  }
  SECTION("headers that never finish time out with 408") {
    RawConnection c(d.url());
    c.send("GET /v1/boards HTTP/1.1\r\nHost: x\r\n");
    std::string answer = c.readAll();
    REQUIRE(answer.rfind("HTTP/1.1 408 Request Timeout\r\n", 0) == 0);
    REQUIRE(answer.find("\"error\":\"request_timeout\"") != std::string::npos);
  }
  SECTION("a malformed request line is 400") {
    RawConnection c(d.url());
    c.send("NOT HTTP AT ALL\r\n\r\n");
    std::string answer = c.readAll();
    REQUIRE(answer.rfind("HTTP/1.1 400 Bad Request\r\n", 0) == 0);
    REQUIRE(answer.find("\"error\":\"bad_request\"") != std::string::npos);
  }
  // Whatever came in, the daemon still serves.
  REQUIRE(d.get("/v1/healthz").status == 200);
}

TEST_CASE("SIGTERM with an idle keep-alive connection open still exits promptly") {
  TempDir dir;
  RunningDaemon d(dir, qemuFleet(dir.file("state"), 1));
  RawConnection c(d.url());
  c.send("GET /v1/healthz HTTP/1.1\r\nHost: x\r\n\r\n");
  d.process().signal(SIGTERM);
  auto status = d.process().wait(15s);
  REQUIRE((status && status->exited && status->code == 0));
  REQUIRE(d.log().find("shutdown deadline reached") == std::string::npos);
}

TEST_CASE("hwfarmctl talks to hwfarmd over a unix socket with tables and JSON and exit codes") {
  TempDir dir;
  std::string sock = dir.file("hwfarmd.sock");
  std::string config = qemuFleet(dir.file("state"), 2);
  config = std::regex_replace(config, std::regex("listen = \"127.0.0.1:0\""),
                              "listen = [\"127.0.0.1:0\", \"unix:" + sock + "\"]");
  RunningDaemon d(dir, config);
  REQUIRE(d.log().find("listening on unix:" + sock) != std::string::npos);

  auto r = runCommand({HWFARMCTL_PATH, "--url", "unix:" + sock, "boards"});
  REQUIRE(r.status.code == 0);
  REQUIRE(r.out == "NAME   TYPE        WORKER  STATE      LEASE  LABELS  CONSOLE\n"
                   "sim-0  mps2-an385  w0      available  -      -       qemu\n"
                   "sim-1  mps2-an385  w0      available  -      -       qemu\n");

  r = runCommand({HWFARMCTL_PATH, "--json", "boards"}, {{"HWFARM_URL", d.url()}});
  REQUIRE(r.status.code == 0);
  REQUIRE(parse(r.out).at("boards").as_array().at(1).at("name").as_string() == "sim-1");

  r = runCommand({HWFARMCTL_PATH, "--url", d.url(), "status"});
  REQUIRE(r.status.code == 0);
  REQUIRE(r.out.find("agent:      test-lab") == 0);
  REQUIRE(r.out.find("config:     generation 1 from " + d.configPath()) != std::string::npos);

  r = runCommand({HWFARMCTL_PATH, "--url", "unix:" + dir.file("nobody.sock"), "boards"});
  REQUIRE(r.status.code == 3);
  REQUIRE(r.err.find("hwfarmctl: cannot reach hwfarmd at unix:" + dir.file("nobody.sock")) == 0);

  r = runCommand({HWFARMCTL_PATH, "--url", d.url(), "frobnicate"});
  REQUIRE(r.status.code == 2);
  REQUIRE(r.err.find("hwfarmctl: unknown command \"frobnicate\"") == 0);
}

TEST_CASE("lease logs older than leases.history_days are removed at start-up and newer ones kept") {
  namespace fs = std::filesystem;
  TempDir dir;
  std::string consoles = dir.file("state/consoles");
  fs::create_directories(consoles + "/old-lease");
  fs::create_directories(consoles + "/new-lease");
  dir.write("state/consoles/old-lease/sim-0.log", "old\n");
  dir.write("state/consoles/new-lease/sim-0.log", "new\n");
  // Old: last written 3 days ago, past history_days = 2. New: 1 day ago.
  auto now = fs::file_time_type::clock::now();
  for (const char* p : {"/old-lease/sim-0.log", "/old-lease"}) fs::last_write_time(consoles + p, now - 72h);
  for (const char* p : {"/new-lease/sim-0.log", "/new-lease"}) fs::last_write_time(consoles + p, now - 24h);
  RunningDaemon d(dir, qemuFleet(dir.file("state"), 1, "[leases]\nhistory_days = 2\n"));
  REQUIRE(waitForText(d.logPath(), "removed the logs of 1 lease(s) older than leases.history_days = 2", 10s));
  REQUIRE_FALSE(fs::exists(consoles + "/old-lease"));
  REQUIRE(readFile(consoles + "/new-lease/sim-0.log") == "new\n");
}

TEST_CASE("an HTTP/1.0 client that asks for keep-alive is told so and keeps its connection") {
  TempDir dir;
  RunningDaemon d(dir, qemuFleet(dir.file("state"), 1));
  RawConnection c(d.url());
  for (int i = 0; i < 2; ++i) {
    c.send("GET /v1/healthz HTTP/1.0\r\nConnection: keep-alive\r\n\r\n");
    std::string answer = c.readResponse();
    REQUIRE(answer.rfind("HTTP/1.1 200 OK\r\n", 0) == 0);
    REQUIRE(answer.find("\r\nConnection: keep-alive\r\n") != std::string::npos);
    REQUIRE(answer.find("\"status\":\"ok\"") != std::string::npos);
  }
  // Without it, HTTP/1.0 means one request: the answer says so and the
  // connection closes.
  RawConnection once(d.url());
  once.send("GET /v1/healthz HTTP/1.0\r\n\r\n");
  std::string answer = once.readAll();
  REQUIRE(answer.find("\r\nConnection: close\r\n") != std::string::npos);
  REQUIRE(answer.find("\"status\":\"ok\"") != std::string::npos);
}

TEST_CASE("a streamed answer to an HTTP/1.0 client is plain text ended by the close") {
  TempDir dir;
  RunningDaemon d(dir, qemuFleet(dir.file("state"), 1));
  auto lease = d.request("POST", "/v1/leases", R"({"selector":{"type":"mps2-an385"},"context":"manual"})");
  REQUIRE(lease.status == 201);
  std::string id(parse(lease.body).at("id").as_string());
  RawConnection c(d.url());
  c.send("GET /v1/leases/" + id + "/boards/sim-0/console HTTP/1.0\r\n\r\n");
  std::string answer = c.readAll();
  REQUIRE(answer.rfind("HTTP/1.1 200 OK\r\n", 0) == 0);
  REQUIRE(answer.find("Transfer-Encoding") == std::string::npos);
  size_t body = answer.find("\r\n\r\n");
  REQUIRE(body != std::string::npos);
  // No chunk sizes: the body is the console text itself.
  REQUIRE(answer.substr(body + 4).rfind("-- hwfarmd: ", 0) == 0);
  REQUIRE(answer.find("the simulated board is off") != std::string::npos);
}
