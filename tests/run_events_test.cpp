// A run's event stream and artifacts.tar through a real hwfarmd over QEMU
// boards, and hwfarmctl run following the stream: its lines, Ctrl-C, a
// daemon restarted under it, the live display on a terminal (issue 11).
// run_routes_test calls the same handlers in process.
#include <catch2/catch.hpp>
#include <fcntl.h>
#include <pty.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <thread>

#include <boost/json.hpp>

#include "daemon/cli/http_client.h"
#include "tests/support/daemon_harness.h"
#include "tests/support/process.h"

using namespace hwfarm::test;
using namespace std::chrono_literals;
namespace json = boost::json;
namespace fs = std::filesystem;

namespace {

std::string elf(const std::string& variant) { return std::string(HWFARM_FIRMWARE_DIR) + "/hwfarm-" + variant + ".elf"; }

// hwfarmd on `boards` simulated boards, all of them leased; on a unix
// socket, whose address a restart keeps (a TCP port of 0 would change).
struct Lab {
  explicit Lab(int boards, bool unix_socket = false)
      : d(dir, unix_socket ? std::regex_replace(qemuFleet(dir.file("state"), boards), std::regex("127\\.0\\.0\\.1:0"),
                                                "unix:" + dir.file("hwfarmd.sock"))
                           : qemuFleet(dir.file("state"), boards)) {
    auto r = d.request("POST", "/v1/leases",
                       R"({"selector":{"type":"mps2-an385"},"context":"manual","count":)" + std::to_string(boards) + "}");
    REQUIRE(r.status == 201);
    lease = std::string(json::parse(r.body).at("id").as_string());
  }

  // Starts a run of `variants` (uploaded first) with the members `extra`.
  std::string run(const std::vector<std::string>& variants, const std::string& extra) {
    json::array list;
    for (const auto& v : variants) {
      auto up = hwfarm::cli::HttpClient(d.url()).request("POST", "/v1/leases/" + lease + "/images?name=" + v + ".elf",
                                                         readFile(elf(v)), "", "application/octet-stream");
      REQUIRE(up.status == 201);
      list.push_back(json::object{{"image", json::parse(up.body).at("image")}, {"name", v + ".elf"}});
    }
    auto r = d.request("POST", "/v1/leases/" + lease + "/runs",
                       "{\"images\":" + json::serialize(list) + (extra.empty() ? "" : "," + extra) + "}");
    INFO(r.body);
    REQUIRE(r.status == 201);
    return std::string(json::parse(r.body).at("id").as_string());
  }

  json::object record(const std::string& id) const {
    auto r = d.get("/v1/runs/" + id);
    REQUIRE(r.status == 200);
    return json::parse(r.body).as_object();
  }

  // Polls the record until `done` holds for it (60 s at most).
  json::object until(const std::string& id, const std::function<bool(const json::object&)>& done) const {
    json::object r;
    for (auto end = std::chrono::steady_clock::now() + 60s; std::chrono::steady_clock::now() < end;
         std::this_thread::sleep_for(20ms))
      if (done(r = record(id))) return r;
    FAIL("run " << id << " never got there: " << json::serialize(r));
    return r;
  }
  json::object ended(const std::string& id) const {
    return until(id, [](const json::object& r) { return r.at("state") != "running"; });
  }
  // Once a board runs its image (its console is being read).
  void boardRunning(const std::string& id) const {
    until(id, [](const json::object& r) {
      for (const auto& a : r.at("attempts").as_array())
        if (!a.at("reference").as_bool() && a.at("phase") == "running") return true;
      return false;
    });
  }

  // GET /v1/runs/{id}/events to its end: the lines; `on_line` sees each as it comes.
  std::vector<json::object> events(const std::string& id,
                                   const std::function<void(const json::object&)>& on_line = nullptr) const {
    std::vector<json::object> lines;
    std::string pending, error;
    int status = hwfarm::cli::HttpClient(d.url()).stream(
        "/v1/runs/" + id + "/events", "",
        [&](const std::string& piece) {
          pending += piece;
          for (size_t nl; (nl = pending.find('\n')) != std::string::npos; pending.erase(0, nl + 1)) {
            lines.push_back(json::parse(pending.substr(0, nl)).as_object());
            if (on_line) on_line(lines.back());
          }
        },
        &error);
    INFO(error);
    REQUIRE(status == 200);
    CHECK(pending.empty());
    return lines;
  }

  TempDir dir;
  RunningDaemon d;
  std::string lease;
};

// Sends GET `target` on a fresh connection and reads the status line: the
// socket, and the status.
std::pair<int, int> openRaw(const std::string& url, const std::string& target) {
  int fd = connectRaw(url);
  REQUIRE(fd >= 0);
  std::string request = "GET " + target + " HTTP/1.1\r\nHost: x\r\n\r\n";
  REQUIRE(::send(fd, request.data(), request.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(request.size()));
  char head[12] = {};
  size_t got = 0;
  for (ssize_t n; got < sizeof head && (n = ::recv(fd, head + got, sizeof head - got, 0)) > 0;) got += n;
  REQUIRE(got == sizeof head);
  return {fd, std::stoi(std::string(head + 9, 3))};
}

int phaseRank(const json::value& phase) {
  static const std::vector<std::string> order{"waiting", "flashing", "running", "finishing", "done"};
  return static_cast<int>(std::find(order.begin(), order.end(), phase.as_string()) - order.begin());
}

// `hwfarmctl run` of the hang image on sim-0, its output in `out`, once
// the board runs it and hwfarmctl follows the events.
struct HangingCtl {
  HangingCtl(const Lab& lab, const TempDir& out) {
    ctl = std::make_unique<Process>(std::vector<std::string>{HWFARMCTL_PATH, "--url", lab.d.url(), "run", "--lease",
                                                             lab.lease, "--board", "sim-0", "--deadline", "60", elf("hang")},
                                    out.file("out"), out.file("err"));
    auto said = waitForText(out.file("out"), "image(s) on lease", 30s);
    REQUIRE(said);
    id = said->substr(4, said->find(':') - 4);
    lab.boardRunning(id);
    std::this_thread::sleep_for(100ms); // the stream is open by now
  }
  std::unique_ptr<Process> ctl;
  std::string id;
};

} // namespace

TEST_CASE("the events of a run on two boards and the reference go in order, end after the artifacts and match the record") {
  Lab lab(2);
  std::string id = lab.run({"pass", "hang"}, R"("mode":"each","deadline_s":1.5)");
  bool artifacts_there = false;
  auto lines = lab.events(id, [&](const json::object& l) {
    if (l.at("event") == "end") artifacts_there = fs::exists(lab.dir.file("state/runs/" + id + "/junit.xml"));
  });
  json::object run = lab.record(id);
  INFO(json::serialize(run));
  REQUIRE(run.at("state") == "failed");
  REQUIRE(lines.size() > 8);
  // The record first, as it stood: running, then one line per change.
  CHECK(lines.front().at("event") == "run");
  CHECK(lines.front().at("run").at("id").as_string() == id);
  CHECK(lines.front().at("run").at("state") == "running");
  // Last, once the artifacts are written: the end with the record's verdict.
  CHECK(lines.back() == json::value(json::object{{"event", "end"}, {"state", "failed"}, {"failure_class", "test"}}));
  CHECK(artifacts_there);
  json::array attempts = lines.front().at("run").at("attempts").as_array();
  std::map<size_t, int> rank; // each attempt's phase only moves forward
  for (size_t i = 1; i + 1 < lines.size(); ++i) {
    const json::object& l = lines[i];
    INFO(json::serialize(l));
    REQUIRE((l.at("event") == "attempt" || l.at("event") == "progress"));
    if (l.at("event") != "attempt") continue;
    size_t index = static_cast<size_t>(l.at("index").as_int64());
    REQUIRE(index <= attempts.size());
    if (index == attempts.size()) attempts.emplace_back(nullptr);
    int r = phaseRank(l.at("attempt").at("phase"));
    CHECK(r >= rank[index]);
    rank[index] = r;
    attempts[index] = l.at("attempt");
  }
  // The attempts as the lines left them are the record's: 2 images on 2 boards, and the reference.
  const json::array& final_attempts = run.at("attempts").as_array();
  REQUIRE(attempts.size() == 6);
  REQUIRE(final_attempts.size() == 6);
  for (size_t i = 0; i < attempts.size(); ++i) {
    json::object expected = final_attempts[i].as_object();
    expected.erase("cases");
    expected.erase("evidence");
    CHECK(attempts[i] == expected);
  }
  std::set<std::string> judged;
  for (const auto& a : attempts) judged.insert(std::string(a.at("target").as_string()) + " " + std::string(a.at("outcome").as_string()));
  CHECK(judged == std::set<std::string>{"mps2_an385_0 pass", "mps2_an385_1 pass", "qemu_ref pass", "mps2_an385_0 fail",
                                        "mps2_an385_1 fail", "qemu_ref fail"});
  json::object progress;
  for (const auto& l : lines)
    if (l.at("event") == "progress") progress = l;
  CHECK(progress == json::object{{"event", "progress"}, {"done", 6}, {"total", 6}});

  // Ended, the run's stream is its record and the end line, at once.
  auto again = lab.events(id);
  REQUIRE(again.size() == 2);
  CHECK(again[0] == json::object{{"event", "run"}, {"run", run}});
  CHECK(again[1] == lines.back());
  // An unknown run is a 404 with a JSON error.
  auto unknown = lab.d.get("/v1/runs/run-0000000000000000/events");
  CHECK(unknown.status == 404);
  CHECK(json::parse(unknown.body).at("error") == "not_found");
}

TEST_CASE("readers that leave mid-run give their stream back and leave the run and hwfarmd fine") {
  Lab lab(1);
  std::string id = lab.run({"hang"}, R"("deadline_s":4)");
  std::vector<int> open;
  for (int i = 0; i < 16; ++i) {
    auto [fd, status] = openRaw(lab.d.url(), "/v1/runs/" + id + "/events");
    CHECK(status == 200);
    open.push_back(fd);
  }
  auto [refused, status] = openRaw(lab.d.url(), "/v1/runs/" + id + "/events");
  CHECK(status == 429);
  ::close(refused);
  // Half of them hang up: their places are free again.
  for (int i = 0; i < 8; ++i) ::close(open[i]);
  open.erase(open.begin(), open.begin() + 8);
  int next = 429;
  for (int i = 0; i < 100 && next != 200; ++i) {
    auto [fd, s] = openRaw(lab.d.url(), "/v1/runs/" + id + "/events");
    next = s;
    if (s == 200) open.push_back(fd);
    else ::close(fd), std::this_thread::sleep_for(20ms);
  }
  CHECK(next == 200);
  // The other readers keep reading until the run ends, then their streams end.
  for (int fd : open) {
    std::string got;
    char buffer[4096];
    for (ssize_t n; (n = ::recv(fd, buffer, sizeof buffer, 0)) > 0;) got.append(buffer, static_cast<size_t>(n));
    CHECK(got.find("{\"event\":\"end\",\"state\":\"failed\"") != std::string::npos);
    ::close(fd);
  }
  CHECK(lab.record(id).at("state") == "failed");
  CHECK(lab.d.get("/v1/healthz").status == 200);
  CHECK(lab.d.process().running());
}

TEST_CASE("artifacts.tar is 409 while the run runs, then holds each artifact under the run's id as served one by one") {
  Lab lab(1);
  std::string id = lab.run({"hang"}, R"("deadline_s":1.5)");
  auto early = lab.d.get("/v1/runs/" + id + "/artifacts.tar");
  CHECK(early.status == 409);
  CHECK(json::parse(early.body).at("error") == "run_running");
  json::object run = lab.ended(id);
  auto tar = lab.d.get("/v1/runs/" + id + "/artifacts.tar");
  REQUIRE(tar.status == 200);
  std::ofstream(lab.dir.file("run.tar"), std::ios::binary) << tar.body;
  CommandResult listed = runCommand({"/bin/tar", "-tf", lab.dir.file("run.tar")});
  INFO(listed.err);
  REQUIRE(listed.status.code == 0);
  std::string expected;
  for (const auto& path : run.at("artifacts").as_array()) expected += id + "/" + std::string(path.as_string()) + "\n";
  CHECK(listed.out == expected);
  fs::create_directories(lab.dir.file("x"));
  REQUIRE(runCommand({"/bin/tar", "-xf", lab.dir.file("run.tar"), "-C", lab.dir.file("x")}).status.code == 0);
  for (const auto& path : run.at("artifacts").as_array()) {
    std::string p(path.as_string());
    auto one = lab.d.get("/v1/runs/" + id + "/artifacts/" + p);
    REQUIRE(one.status == 200);
    CHECK(readFile(lab.dir.file("x/" + id + "/" + p)) == one.body);
  }
  CHECK(lab.d.get("/v1/runs/run-0000000000000000/artifacts.tar").status == 404);
}

TEST_CASE("an artifact folder swapped for a symlink to outside the run is neither served nor archived") {
  Lab lab(1);
  std::string id = lab.run({"pass"}, R"("reference":"none")");
  json::object run = lab.ended(id);
  std::string trace;
  for (const auto& path : run.at("artifacts").as_array())
    if (path.as_string().starts_with("traces/")) trace = std::string(path.as_string());
  REQUIRE(!trace.empty());
  std::string runs = lab.dir.file("state/runs/" + id);
  REQUIRE(lab.d.get("/v1/runs/" + id + "/artifacts/" + trace).status == 200);
  // Given the run's traces/ folder swapped for a symlink to a directory
  // outside that holds a secret under the trace's name,
  fs::rename(runs + "/traces", lab.dir.file("traces.moved"));
  fs::create_directories(lab.dir.file("outside"));
  std::ofstream(lab.dir.file("outside/" + trace.substr(7))) << "SECRET\n";
  fs::create_directory_symlink(lab.dir.file("outside"), runs + "/traces");
  // and a folder that is a symlink to /etc,
  fs::create_directory_symlink("/etc", runs + "/etc");
  // when a client asks for the trace or /etc's hostname through them,
  // each is a 404 like any artifact the run does not have;
  for (const std::string& path : {trace, std::string("etc/hostname")}) {
    auto r = lab.d.get("/v1/runs/" + id + "/artifacts/" + path);
    CHECK(r.status == 404);
    CHECK(r.body == "{\"error\":\"not_found\",\"detail\":\"run " + id + " has no artifact " + path + "\"}");
  }
  // and artifacts.tar holds every other artifact but not the secret.
  auto tar = lab.d.get("/v1/runs/" + id + "/artifacts.tar");
  REQUIRE(tar.status == 200);
  CHECK(tar.body.find("SECRET") == std::string::npos);
  std::ofstream(lab.dir.file("run.tar"), std::ios::binary) << tar.body;
  CommandResult listed = runCommand({"/bin/tar", "-tf", lab.dir.file("run.tar")});
  REQUIRE(listed.status.code == 0);
  std::string expected;
  for (const auto& path : run.at("artifacts").as_array())
    if (path.as_string() != trace) expected += id + "/" + std::string(path.as_string()) + "\n";
  CHECK(listed.out == expected);
}

TEST_CASE("hwfarmd stopping cancels the run and ends its event stream with the end line") {
  Lab lab(1);
  std::string id = lab.run({"hang"}, R"("deadline_s":60)");
  lab.boardRunning(id);
  auto started = std::chrono::steady_clock::now();
  auto lines = lab.events(id, [&](const json::object& l) {
    if (l.at("event") == "run") lab.d.process().signal(SIGTERM);
  });
  CHECK(std::chrono::steady_clock::now() - started < 10s);
  REQUIRE(!lines.empty());
  CHECK(lines.back().at("event") == "end");
  CHECK(lines.back().at("state") == "cancelled");
  auto exit = lab.d.process().wait(10s);
  REQUIRE(exit);
  CHECK(exit->code == 0);
}

TEST_CASE("hwfarmctl run follows the events: the same plain lines, and Ctrl-C cancels") {
  Lab lab(2);
  CommandResult passed =
      runCommand({HWFARMCTL_PATH, "--url", lab.d.url(), "run", "--lease", lab.lease, "--mode", "each", elf("pass")}, {}, 120s);
  INFO(passed.out << passed.err);
  REQUIRE(passed.status.code == 0);
  std::string id = passed.out.substr(4, passed.out.find(':') - 4);
  // Each verdict once, as the record has it; no terminal codes off a terminal.
  std::string expected = "run " + id + ": 1 image(s) on lease " + lab.lease + "\n";
  std::multiset<std::string> verdicts;
  json::object record = lab.record(id);
  for (const auto& a : record.at("attempts").as_array())
    verdicts.insert(std::string(a.at("image").as_string()) + " on " + std::string(a.at("target").as_string()) +
                    (a.at("reference").as_bool() ? "" : " (" + std::string(a.at("board").as_string()) + ")") + ": pass\n");
  std::multiset<std::string> printed;
  std::string rest = passed.out.substr(expected.size());
  for (size_t nl; (nl = rest.find('\n')) != std::string::npos && printed.size() < 3; rest.erase(0, nl + 1))
    printed.insert(rest.substr(0, nl + 1));
  CHECK(passed.out.rfind(expected, 0) == 0);
  CHECK(printed == verdicts);
  CHECK(rest == "run " + id + ": passed\n");
  CHECK(passed.err.empty());
  CHECK(passed.out.find('\x1b') == std::string::npos);

  // Ctrl-C while the stream is open cancels the run and exits 11.
  TempDir out;
  HangingCtl hang(lab, out);
  hang.ctl->signal(SIGINT);
  auto stopped = hang.ctl->wait(20s);
  REQUIRE(stopped);
  INFO(readFile(out.file("out")) << readFile(out.file("err")));
  CHECK(stopped->code == 11);
  CHECK(readFile(out.file("err")) == "hwfarmctl run: cancelling run " + hang.id + "\n");
  CHECK(readFile(out.file("out")).find("run " + hang.id + ": cancelled (cancelled by ") != std::string::npos);
}

TEST_CASE("hwfarmctl run reads the record when hwfarmd is killed and restarted under its event stream") {
  Lab lab(1, true);
  TempDir out;
  HangingCtl hang(lab, out);
  lab.d.killAndRestart();
  auto exited = hang.ctl->wait(30s);
  REQUIRE(exited);
  INFO(readFile(out.file("out")) << readFile(out.file("err")));
  CHECK(exited->code == 9);
  CHECK(readFile(out.file("out")).find("run " + hang.id + ": interrupted (hwfarmd stopped during the run") !=
        std::string::npos);
}

TEST_CASE("on a terminal hwfarmctl run draws each attempt in place on stderr, and stdout keeps the plain lines") {
  Lab lab(1);
  int master = -1, slave = -1;
  char name[128] = {};
  REQUIRE(::openpty(&master, &slave, name, nullptr, nullptr) == 0);
  ::fcntl(master, F_SETFL, O_NONBLOCK);
  TempDir out;
  Process ctl({HWFARMCTL_PATH, "--url", lab.d.url(), "run", "--lease", lab.lease, elf("pass")}, out.file("out"), name);
  std::string screen;
  auto drain = [&] {
    char buffer[4096];
    for (ssize_t n; (n = ::read(master, buffer, sizeof buffer)) > 0;) screen.append(buffer, static_cast<size_t>(n));
  };
  std::optional<ExitStatus> exit;
  for (int i = 0; i < 3000 && !(exit = ctl.wait(10ms)); ++i) drain();
  drain();
  ::close(slave);
  ::close(master);
  REQUIRE(exit);
  std::string plain = readFile(out.file("out"));
  INFO(plain << screen);
  CHECK(exit->code == 0);
  std::string id = plain.substr(4, plain.find(':') - 4);
  CHECK(plain.find('\x1b') == std::string::npos);
  CHECK(plain.find("hwfarm_pass on mps2_an385 (sim-0): pass\n") != std::string::npos);
  CHECK(plain.find("hwfarm_pass on qemu_ref: pass\n") != std::string::npos);
  // The block: a header with the progress, a line per attempt, erased
  // before each result line and at the end.
  CHECK(screen.find("run " + id + ": 0/") != std::string::npos);
  CHECK(screen.find("  hwfarm_pass on mps2_an385 (sim-0): ") != std::string::npos);
  CHECK(screen.find("\x1b[J") != std::string::npos);
  CHECK(screen.size() >= 6);
  CHECK(screen.substr(screen.size() - 3) == "\x1b[J"); // nothing of it is left on the screen
}
