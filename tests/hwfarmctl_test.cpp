// hwfarmctl as Jenkinsfiles run it: a real binary against a real hwfarmd.
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <pty.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>

#include <boost/json.hpp>
#include <regex>
#include <thread>

#include "tests/support/daemon_harness.h"
#include "tests/support/firmware.h"
#include "tests/support/wait.h"

using namespace hwfarm::test;
namespace json = boost::json;
using namespace std::chrono_literals;

namespace {

struct Ctl {
  const RunningDaemon& d;
  std::map<std::string, std::string> env;

  CommandResult operator()(std::vector<std::string> args) const {
    args.insert(args.begin(), HWFARMCTL_PATH);
    std::map<std::string, std::string> e{{"HWFARM_URL", d.url()}, {"HWFARM_TOKEN", ""}, {"CHANGE_ID", ""},
                                         {"HWFARM_CONTEXT", ""},  {"HWFARM_WORKER", ""}, {"JOB_NAME", "tvm/main"},
                                         {"BUILD_NUMBER", "12"},  {"STAGE_NAME", "hw"},  {"BUILD_URL", ""}};
    for (const auto& [k, v] : env) e[k] = v;
    return runCommand(args, e, 60s);
  }
};

std::string leaseState(const RunningDaemon& d, const std::string& id) {
  return std::string(json::parse(d.get("/v1/leases/" + id).body).at("state").as_string());
}

bool alive(pid_t pid) { return processAlive(pid); }

size_t activeLeases(const RunningDaemon& d) {
  return json::parse(d.get("/v1/leases").body).at("leases").as_array().size();
}

} // namespace

TEST_CASE("lease acquire, show, renew, list and release from the command line") {
  TempDir dir;
  RunningDaemon d(dir, qemuFleet(dir.file("state"), 2));
  Ctl ctl{d, {}};
  auto acquired = ctl({"lease", "acquire", "--type", "mps2-an385", "--ttl", "120", "-q"});
  REQUIRE(acquired.status.code == 0);
  std::string id = acquired.out.substr(0, acquired.out.size() - 1);
  REQUIRE(std::regex_match(id, std::regex("[0-9a-f]{32}")));
  auto lease = json::parse(d.get("/v1/leases/" + id).body);
  REQUIRE(lease.at("holder").at("job").as_string() == "tvm/main");
  REQUIRE(lease.at("holder").at("build").as_string() == "12");
  REQUIRE(lease.at("context").as_string() == "manual");

  auto shown = ctl({"lease", "show", id});
  REQUIRE(shown.status.code == 0);
  REQUIRE(shown.out.find("lease:    " + id + " (active)\nholder:   anonymous tvm/main #12\n") == 0);
  REQUIRE(std::regex_search(shown.out, std::regex("\nsim-0  +mps2-an385  +w0  +-  +-  +ok\n")));

  auto renewed = ctl({"--json", "lease", "renew", id, "--ttl", "300"});
  REQUIRE(renewed.status.code == 0);
  REQUIRE(json::parse(renewed.out).at("ttl_s").as_int64() == 300);

  auto listed = ctl({"lease", "list"});
  REQUIRE(listed.out.find(id + "  active  anonymous  tvm/main  sim-0") != std::string::npos);

  REQUIRE(ctl({"lease", "release", id}).status.code == 0);
  REQUIRE(leaseState(d, id) == "released");
  REQUIRE(ctl({"lease", "list"}).out == "ID  STATE  HOLDER  JOB  BOARDS  EXPIRES\n");
}

TEST_CASE("the context comes from CHANGE_ID for pull requests") {
  TempDir dir;
  RunningDaemon d(dir, qemuFleet(dir.file("state"), 1));
  Ctl ctl{d, {{"CHANGE_ID", "1234"}}};
  auto r = ctl({"--json", "lease", "acquire", "--type", "mps2-an385"});
  REQUIRE(json::parse(r.out).at("context").as_string() == "pr");
}

TEST_CASE("hwfarmctl exit codes tell the failures apart") {
  TempDir dir;
  std::string config = std::regex_replace(qemuFleet(dir.file("state"), 1), std::regex("tier = 1"), "tier = 3");
  RunningDaemon d(dir, config);
  Ctl ctl{d, {}};
  REQUIRE(ctl({"lease", "acquire", "--type", "mps2-an385", "-q"}).status.code == 0);

  auto busy = ctl({"lease", "acquire", "--type", "mps2-an385", "--wait", "0.2"});
  REQUIRE(busy.status.code == 4);
  REQUIRE(busy.err.find("hwfarmctl: HTTP 408: wait_timeout: ") == 0);

  auto tier = ctl({"lease", "acquire", "--type", "mps2-an385", "--context", "pr"});
  REQUIRE(tier.status.code == 5);
  REQUIRE(tier.err.find("tier_refused") != std::string::npos);

  auto none = ctl({"lease", "acquire", "--type", "nucleo"});
  REQUIRE(none.status.code == 6);

  auto bad_token = ctl({"--token", "wrong", "boards"});
  REQUIRE(bad_token.status.code == 7);

  auto usage = ctl({"lease", "acquire"});
  REQUIRE(usage.status.code == 2);
  REQUIRE(usage.err == "hwfarmctl: name the boards with --type T and/or --label L\n");
  REQUIRE(ctl({"lease", "acquire", "--type", "x", "--count", "two"}).status.code == 2);
  REQUIRE(ctl({"lease", "frobnicate"}).status.code == 2);

  Ctl nowhere{d, {{"HWFARM_URL", "unix:" + dir.file("nobody.sock")}}};
  auto unreachable = nowhere({"lease", "list"});
  REQUIRE(unreachable.status.code == 3);
}

TEST_CASE("token new prints a token whose hash the daemon accepts") {
  TempDir dir;
  RunningDaemon d(dir, qemuFleet(dir.file("state"), 1));
  auto r = Ctl{d, {}}({"token", "new", "ci-lab1", "--role", "pipeline"});
  REQUIRE(r.status.code == 0);
  std::smatch token;
  REQUIRE(std::regex_search(r.out, token, std::regex("# (hwf_[0-9a-f]{48})\n")));
  std::string entry = r.out.substr(r.out.find("[[token]]"));
  TempDir other;
  std::string tokens = other.write("tokens.toml", entry);
  ::chmod(tokens.c_str(), 0600);
  std::string config = std::regex_replace(qemuFleet(other.file("state"), 1, "tokens_file = \"" + tokens + "\"\n"),
                                          std::regex("anonymous = \"loopback\"\n"), "");
  RunningDaemon secured(other, config);
  REQUIRE(secured.get("/v1/boards").status == 401);
  REQUIRE(secured.get("/v1/boards", token[1]).status == 200);
}

TEST_CASE("lease run gives CMD the boards and releases on exit with CMD's exit code") {
  TempDir dir;
  RunningDaemon d(dir, qemuFleet(dir.file("state"), 2));
  Ctl ctl{d, {}};
  std::string out = dir.file("env.txt");
  SECTION("a failing command") {
    auto r = ctl({"lease", "run", "--type", "mps2-an385", "--count", "2", "--", "/bin/sh", "-c",
                  "echo $HWFARM_LEASE_ID $HWFARM_BOARD_COUNT $HWFARM_BOARD_0_NAME $HWFARM_BOARD_1_NAME "
                  "$HWFARM_BOARD_1_TYPE > " + out + "; exit 3"});
    REQUIRE(r.status.code == 3);
    std::smatch m;
    std::string env = readFile(out);
    REQUIRE(std::regex_match(env, m, std::regex("([0-9a-f]{32}) 2 sim-0 sim-1 mps2-an385\n")));
    REQUIRE(leaseState(d, m[1]) == "released");
    REQUIRE(r.err.find("hwfarmctl: lease " + m[1].str() + " released") != std::string::npos);
  }
  SECTION("a succeeding command that outlives the TTL is renewed meanwhile") {
    auto r = ctl({"lease", "run", "--type", "mps2-an385", "--ttl", "1", "--", "/bin/sh", "-c",
                  "sleep 2.5; echo $HWFARM_LEASE_ID > " + out});
    REQUIRE(r.status.code == 0);
    std::string id = readFile(out).substr(0, 32);
    auto lease = json::parse(d.get("/v1/leases/" + id).body);
    REQUIRE(lease.at("state").as_string() == "released"); // not expired: it was renewed
  }
  SECTION("a command that cannot start") {
    auto r = ctl({"lease", "run", "--type", "mps2-an385", "--", "/nonexistent/tool"});
    REQUIRE(r.status.code == 127);
    REQUIRE(activeLeases(d) == 0);
  }
  REQUIRE(activeLeases(d) == 0);
}

TEST_CASE("lease run forwards SIGTERM to the command and its children and releases") {
  TempDir dir;
  RunningDaemon d(dir, qemuFleet(dir.file("state"), 1));
  std::string started = dir.file("started");
  Process ctl({HWFARMCTL_PATH, "--url", d.url(), "lease", "run", "--type", "mps2-an385", "--", "/bin/sh", "-c",
               "sleep 60 & echo $! > " + started + "; wait"},
              dir.file("ctl.out"), dir.file("ctl.err"), {{"HWFARM_WORKER", ""}});
  auto pid_text = waitForText(started, "\n", 15s);
  REQUIRE(pid_text);
  pid_t sleeper = std::stoi(*pid_text);
  REQUIRE(activeLeases(d) == 1);
  ctl.signal(SIGTERM); // a Jenkins abort
  auto status = ctl.wait(15s);
  REQUIRE(status);
  REQUIRE(status->exited);
  REQUIRE(status->code == 128 + SIGTERM); // the shell died of the forwarded SIGTERM
  REQUIRE(activeLeases(d) == 0);
  waitWhile([&] { return alive(sleeper); }, 5s); // killed, not yet reaped
  REQUIRE_FALSE(alive(sleeper)); // the grandchild is gone too
}

TEST_CASE("lease run stops the command when its lease ends under it") {
  TempDir dir;
  RunningDaemon d(dir, qemuFleet(dir.file("state"), 1));
  Process ctl({HWFARMCTL_PATH, "--url", d.url(), "lease", "run", "--type", "mps2-an385", "--ttl", "1", "--",
               "/bin/sleep", "60"},
              dir.file("ctl.out"), dir.file("ctl.err"), {{"HWFARM_WORKER", ""}});
  std::string id;
  for (int i = 0; i < 500 && id.empty(); ++i) {
    auto leases = json::parse(d.get("/v1/leases").body).at("leases").as_array();
    if (!leases.empty()) id = std::string(leases.at(0).at("id").as_string());
    else std::this_thread::sleep_for(10ms);
  }
  REQUIRE(!id.empty());
  REQUIRE(d.request("POST", "/v1/boards/sim-0/maintenance", "", "").status == 409); // still leased
  // Someone else ends it (here the same anonymous principal releases it).
  REQUIRE(d.request("DELETE", "/v1/leases/" + id, "").status == 200);
  auto status = ctl.wait(20s);
  REQUIRE(status);
  REQUIRE(status->code == 8);
  REQUIRE(readFile(dir.file("ctl.err")).find("lease " + id + " ended while the command ran") != std::string::npos);
}

TEST_CASE("lease run aborted while waiting for boards exits at once and leaves the queue") {
  TempDir dir;
  RunningDaemon d(dir, qemuFleet(dir.file("state"), 1));
  REQUIRE(d.request("POST", "/v1/leases", R"({"selector":{"type":"mps2-an385"},"context":"manual"})", "").status ==
          201);
  Process ctl({HWFARMCTL_PATH, "--url", d.url(), "lease", "run", "--type", "mps2-an385", "--wait", "600", "--",
               "/bin/true"},
              dir.file("ctl.out"), dir.file("ctl.err"), {{"HWFARM_WORKER", ""}});
  size_t depth = 0;
  for (int i = 0; i < 500 && depth == 0; ++i) {
    depth = json::parse(d.get("/v1/queue").body).at("queue").as_array().size();
    if (!depth) std::this_thread::sleep_for(10ms);
  }
  REQUIRE(depth == 1);
  ctl.signal(SIGTERM); // a Jenkins abort while the stage waits
  auto status = ctl.wait(5s);
  REQUIRE(status);
  REQUIRE(status->code == 128 + SIGTERM);
  REQUIRE(readFile(dir.file("ctl.err")).find("Terminated while waiting for boards; giving up") != std::string::npos);
  for (int i = 0; i < 500 && depth > 0; ++i) {
    depth = json::parse(d.get("/v1/queue").body).at("queue").as_array().size();
    if (depth) std::this_thread::sleep_for(10ms);
  }
  REQUIRE(depth == 0);
}

TEST_CASE("lease run stops what the command left running in its group") {
  TempDir dir;
  RunningDaemon d(dir, qemuFleet(dir.file("state"), 1));
  std::string pidfile = dir.file("bg.pid");
  auto r = Ctl{d, {}}({"lease", "run", "--type", "mps2-an385", "--", "/bin/sh", "-c",
                       "sleep 60 & echo $! > " + pidfile});
  REQUIRE(r.status.code == 0);
  pid_t left = std::stoi(readFile(pidfile));
  waitWhile([&] { return alive(left); }, 5s); // killed, not yet reaped
  REQUIRE_FALSE(alive(left));
}

// Issue 9, item 14: header values and the request line were written as
// given, so a CR/LF in a token or a lease id added headers of its own.
TEST_CASE("hwfarmctl sends no CR or LF in a header or the request line") {
  TempDir dir;
  RunningDaemon d(dir, qemuFleet(dir.file("state"), 1));
  Ctl injected{d, {{"HWFARM_TOKEN", "secret\r\nX-Injected: 1"}}};
  for (std::vector<std::string> args : {std::vector<std::string>{"boards"}, {"console", "L1", "sim-0"}}) {
    auto r = injected(args);
    CHECK(r.status.code == 2);
    CHECK(r.err == "hwfarmctl: the token contains a control character (CR, LF, ...); nothing was sent\n");
  }
  Ctl ctl{d, {}};
  auto show = ctl({"lease", "show", "L1\r\nX-Injected: 1"});
  CHECK(show.status.code == 2);
  CHECK(show.err ==
        "hwfarmctl: the request path contains a space or a control character (CR, LF, ...); nothing was sent\n");
  CHECK(d.log().find("X-Injected") == std::string::npos);
  // Ordinary requests are unaffected.
  REQUIRE(ctl({"boards"}).status.code == 0);
}

namespace {

// The first word of hwfarmctl's output line "run ID: ...".
std::string runIdOf(const std::string& out) {
  std::smatch m;
  REQUIRE(std::regex_search(out, m, std::regex("run (run-[0-9a-f]{16}): ")));
  return m[1];
}

// Polls `path` until `pattern` matches its contents (test code only).
bool waitForMatch(const std::string& path, const std::regex& pattern, std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (std::regex_search(readFile(path), pattern)) return true;
    std::this_thread::sleep_for(20ms);
  }
  return false;
}

size_t queueDepth(const RunningDaemon& d) { return json::parse(d.get("/v1/queue").body).at("queue").as_array().size(); }

} // namespace

TEST_CASE("every lease id hwfarmctl prints is taken back whole or by a unique prefix, and an ambiguous one lists the matches") {
  TempDir dir;
  RunningDaemon d(dir, qemuFleet(dir.file("state"), 1));
  Ctl ctl{d, {}};
  // Given 17 leases that ended and one active: two ids share a first digit.
  std::vector<std::string> ids;
  for (int i = 0; i < 17; ++i) {
    auto r = ctl({"lease", "acquire", "--type", "mps2-an385", "-q"});
    REQUIRE(r.status.code == 0);
    ids.push_back(r.out.substr(0, 32));
    REQUIRE(ctl({"lease", "release", ids.back().substr(0, 12)}).status.code == 0);
  }
  std::string active = ctl({"lease", "acquire", "--type", "mps2-an385", "-q"}).out.substr(0, 32);
  // What `boards` shows of the lease is accepted back.
  std::smatch shown;
  std::string boards = ctl({"boards"}).out;
  REQUIRE(std::regex_search(boards, shown, std::regex("leased  +([0-9a-f]{12}) ")));
  auto show = ctl({"lease", "show", shown[1]});
  CHECK(show.status.code == 0);
  CHECK(show.out.find("lease:    " + active + " (active)") == 0);
  // The shortest prefix that is unique works for an ended lease too; upper case is the same id.
  std::string ended = ids[3];
  size_t unique_length = 1;
  auto shared = [&](size_t n) {
    return std::count_if(ids.begin(), ids.end(), [&](const std::string& id) { return id.compare(0, n, ended, 0, n) == 0; }) +
           (active.compare(0, n, ended, 0, n) == 0);
  };
  while (shared(unique_length) > 1) ++unique_length;
  std::string prefix = ended.substr(0, unique_length);
  for (auto& c : prefix) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  CHECK(ctl({"--json", "lease", "show", prefix}).out.find("\"id\":\"" + ended + "\"") != std::string::npos);
  // A first digit two ids share is ambiguous: exit 1, the matches listed.
  std::map<char, std::vector<std::string>> by_first;
  for (const auto& id : ids) by_first[id[0]].push_back(id);
  by_first[active[0]].push_back(active);
  auto crowded = std::find_if(by_first.begin(), by_first.end(), [](const auto& e) { return e.second.size() > 1; });
  REQUIRE(crowded != by_first.end());
  auto ambiguous = ctl({"lease", "show", std::string(1, crowded->first)});
  CHECK(ambiguous.status.code == 1);
  CHECK(ambiguous.err.rfind("hwfarmctl: \"" + std::string(1, crowded->first) + "\" is ambiguous: " +
                                std::to_string(crowded->second.size()) + " lease ids begin with it; give more of the id:\n",
                            0) == 0);
  for (const auto& id : crowded->second) CHECK(ambiguous.err.find("  " + id + " (") != std::string::npos);
  // A prefix nothing begins with.
  std::string nothing = "0";
  while (std::any_of(ids.begin(), ids.end(), [&](const std::string& id) { return id.rfind(nothing, 0) == 0; }) ||
         active.rfind(nothing, 0) == 0)
    nothing += "0";
  auto none = ctl({"lease", "renew", nothing});
  CHECK(none.status.code == 1);
  CHECK(none.err == "hwfarmctl: no lease id begins with \"" + nothing + "\"\n");
  // The daemon's filter: only the matches come back.
  auto listed = json::parse(d.get("/v1/leases?all=1&prefix=" + ended.substr(0, unique_length)).body);
  CHECK(listed.at("leases").as_array().size() == 1);
  REQUIRE(ctl({"lease", "release", active.substr(0, 8)}).status.code == 0);
  CHECK(leaseState(d, active) == "released");
}

TEST_CASE("a viewer resolves a prefix among the leases it may list") {
  TempDir dir;
  RunningDaemon d(dir, tokenFleet(dir, 1));
  auto r = d.request("POST", "/v1/leases", R"({"selector":{"type":"mps2-an385"},"context":"manual"})", "secret-pipeline");
  REQUIRE(r.status == 201);
  std::string id(json::parse(r.body).at("id").as_string());
  Ctl viewer{d, {{"HWFARM_TOKEN", "secret-viewer"}}};
  auto show = viewer({"lease", "show", id.substr(0, 10)});
  CHECK(show.status.code == 0);
  CHECK(show.out.find(id) != std::string::npos);
  // Releasing needs the lease's holder: the prefix resolves, the role does not suffice.
  CHECK(viewer({"lease", "release", id.substr(0, 10)}).status.code == 7);
  Ctl nobody{d, {{"HWFARM_TOKEN", "wrong"}}};
  CHECK(nobody({"lease", "show", id.substr(0, 10)}).status.code == 7);
}

TEST_CASE("a board type no board has is refused with the configured types, the closest first") {
  TempDir dir;
  std::string config = qemuFleet(dir.file("state"), 1) +
                       "  [[worker.board]]\n  name = \"m4\"\n  type = \"mps2-an386\"\n  driver = \"qemu\"\n"
                       "  [[worker.board]]\n  name = \"nucleo\"\n  type = \"nucleo-f429zi\"\n  driver = \"qemu\"\n"
                       "  qemu = { machine = \"mps2-an385\" }\n";
  RunningDaemon d(dir, config);
  auto r = Ctl{d, {}}({"lease", "acquire", "--type", "mps2-an358"});
  CHECK(r.status.code == 6);
  CHECK(r.err == "hwfarmctl: HTTP 422: unsatisfiable: selector type=mps2-an358 matches 0 configured board(s), 1 "
                 "requested; no configured board has type \"mps2-an358\"; did you mean \"mps2-an385\"? (configured "
                 "types: mps2-an385, mps2-an386, nucleo-f429zi)\n");
  auto answer = d.request("POST", "/v1/leases", R"({"selector":{"type":"nucleo-f492zi"},"context":"manual"})", "");
  CHECK(answer.status == 422);
  auto body = json::parse(answer.body);
  CHECK(body.at("configured_types") == json::parse(R"(["nucleo-f429zi","mps2-an385","mps2-an386"])"));
  // An unknown worker gets the same; a known type that labels rule out names no type.
  auto worker = Ctl{d, {{"HWFARM_WORKER", "w9"}}}({"lease", "acquire", "--type", "mps2-an385"});
  CHECK(worker.err.find("no configured worker or Jenkins node is named \"w9\"; did you mean \"w0\"? (workers: w0)") !=
        std::string::npos);
  auto labels = Ctl{d, {}}({"lease", "acquire", "--type", "mps2-an385", "--label", "nope"});
  CHECK(labels.status.code == 6);
  CHECK(labels.err.find("configured types") == std::string::npos);
}

TEST_CASE("a waiting lease acquire logs its place in the queue, and Ctrl-C ends the wait and leaves the queue") {
  TempDir dir;
  RunningDaemon d(dir, qemuFleet(dir.file("state"), 1));
  Ctl ctl{d, {}};
  // Given the only board leased and one request waiting ahead.
  std::string holder = ctl({"lease", "acquire", "--type", "mps2-an385", "-q"}).out.substr(0, 32);
  std::map<std::string, std::string> env{{"HWFARM_WORKER", ""}, {"HWFARM_CONTEXT", ""}, {"CHANGE_ID", ""}};
  Process first({HWFARMCTL_PATH, "--url", d.url(), "lease", "acquire", "--type", "mps2-an385", "-q"},
                dir.file("first.out"), dir.file("first.err"), env);
  waitWhile([&] { return queueDepth(d) < 1; }, 5s);
  REQUIRE(queueDepth(d) == 1);
  Process second({HWFARMCTL_PATH, "--url", d.url(), "lease", "acquire", "--type", "mps2-an385", "-q"},
                 dir.file("second.out"), dir.file("second.err"), env);
  // Then (no terminal) one line with its place.
  CHECK(waitForMatch(dir.file("second.err"),
                     std::regex("^hwfarmctl: waiting for 1 \u00d7 mps2-an385 \\(queue position 2, 1 ahead of you\\)\u2026\n$"),
                     20s));
  CHECK(waitForMatch(dir.file("first.err"),
                     std::regex("^hwfarmctl: waiting for 1 \u00d7 mps2-an385 \\(queue position 1, next in line\\)\u2026\n$"),
                     20s));
  // When SIGINT ends the second's wait: exit 130, and it leaves the queue.
  second.signal(SIGINT);
  auto stopped = second.wait(10s);
  REQUIRE(stopped);
  CHECK(stopped->code == 130);
  CHECK(readFile(dir.file("second.err")).find("hwfarmctl: Interrupt while waiting for boards; giving up\n") !=
        std::string::npos);
  waitWhile([&] { return queueDepth(d) > 1; }, 5s);
  CHECK(queueDepth(d) == 1);
  // The first gets the board once it is free, and no line is left behind.
  REQUIRE(ctl({"lease", "release", holder}).status.code == 0);
  auto granted = first.wait(20s);
  REQUIRE(granted);
  CHECK(granted->code == 0);
  std::string lease = readFile(dir.file("first.out")).substr(0, 32);
  CHECK(leaseState(d, lease) == "active");
  REQUIRE(ctl({"lease", "release", lease}).status.code == 0);
  CHECK(activeLeases(d) == 0);
}

TEST_CASE("the queue answers a waiting client its own request by key, and no one else's") {
  TempDir dir;
  RunningDaemon d(dir, tokenFleet(dir, 1));
  REQUIRE(d.request("POST", "/v1/leases", R"({"selector":{"type":"mps2-an385"},"context":"manual"})", "secret-pipeline")
              .status == 201);
  std::thread waiting([&] {
    d.request("POST", "/v1/leases",
              R"({"selector":{"type":"mps2-an385"},"context":"manual","wait_s":3,"idempotency_key":"k 1"})",
              "secret-pipeline", 10);
  });
  json::array own;
  for (int i = 0; i < 500 && own.empty(); ++i) {
    own = json::parse(d.get("/v1/queue?key=k%201", "secret-pipeline").body).at("queue").as_array();
    if (own.empty()) std::this_thread::sleep_for(10ms);
  }
  CHECK(own.size() == 1);
  CHECK(own.at(0).at("position").as_int64() == 1);
  CHECK(json::parse(d.get("/v1/queue?key=k%201", "secret-pipeline2").body).at("queue").as_array().empty());
  CHECK(json::parse(d.get("/v1/queue?key=other", "secret-pipeline").body).at("queue").as_array().empty());
  waiting.join();
}

TEST_CASE("on a terminal lease acquire redraws its place in the queue in place and erases it at the grant") {
  TempDir dir;
  RunningDaemon d(dir, qemuFleet(dir.file("state"), 1));
  Ctl ctl{d, {}};
  std::string holder = ctl({"lease", "acquire", "--type", "mps2-an385", "-q"}).out.substr(0, 32);
  int master = -1, slave = -1;
  char name[128] = {};
  REQUIRE(::openpty(&master, &slave, name, nullptr, nullptr) == 0);
  ::fcntl(master, F_SETFL, O_NONBLOCK);
  Process waiting({HWFARMCTL_PATH, "--url", d.url(), "lease", "acquire", "--type", "mps2-an385", "-q"},
                  dir.file("out"), name, {{"HWFARM_WORKER", ""}, {"HWFARM_CONTEXT", ""}, {"CHANGE_ID", ""}});
  std::string screen;
  auto drain = [&] {
    char buffer[4096];
    for (ssize_t n; (n = ::read(master, buffer, sizeof buffer)) > 0;) screen.append(buffer, static_cast<size_t>(n));
  };
  std::string line = "\r\x1b[Kwaiting for 1 \u00d7 mps2-an385 (queue position 1, next in line)\u2026";
  for (int i = 0; i < 1000 && screen.find(line) == std::string::npos; ++i) {
    drain();
    std::this_thread::sleep_for(10ms);
  }
  CHECK(screen.find(line) != std::string::npos);
  REQUIRE(ctl({"lease", "release", holder}).status.code == 0);
  auto granted = waiting.wait(20s);
  drain();
  ::close(slave);
  ::close(master);
  REQUIRE(granted);
  CHECK(granted->code == 0);
  INFO(screen);
  CHECK(screen.substr(screen.size() - 4) == "\r\x1b[K"); // nothing of it is left on the line
  CHECK(screen.find('\n') == std::string::npos);         // redrawn, never scrolled
}

TEST_CASE("runs started with --no-wait are listed, shown, waited for, cancelled and fetched by id or prefix") {
  TempDir dir;
  RunningDaemon d(dir, qemuFleet(dir.file("state"), 1));
  Ctl ctl{d, {}};
  std::string lease = ctl({"lease", "acquire", "--type", "mps2-an385", "--ttl", "600", "-q"}).out.substr(0, 32);
  // A passing run, started without waiting.
  auto started = ctl({"run", "--lease", lease.substr(0, 8), "--reference", "none", "--no-wait", firmware("pass")});
  REQUIRE(started.status.code == 0);
  std::string pass = runIdOf(started.out);
  auto waited = ctl({"run", "wait", pass.substr(4, 6)});
  CHECK(waited.status.code == 0);
  CHECK(waited.out.find("hwfarm_pass on mps2_an385 (sim-0): pass\n") != std::string::npos);
  CHECK(waited.out.find("run " + pass + ": passed\n") != std::string::npos);
  auto shown = ctl({"run", "show", pass.substr(0, 10)});
  CHECK(shown.status.code == 0);
  CHECK(shown.out.rfind("run " + pass + ": passed\n  lease " + lease + ", created ", 0) == 0);
  CHECK(shown.out.find("hwfarm_pass on mps2_an385 (sim-0): pass\n") != std::string::npos);
  TempDir out;
  auto fetched = ctl({"run", "fetch", pass, "--out", out.path()});
  CHECK(fetched.status.code == 0);
  CHECK(json::parse(readFile(out.file("summary.json"))).at("state").as_string() == "passed");
  CHECK(readFile(out.file("junit.xml")).find("<testsuite") != std::string::npos);
  // An artifact gone from the lab (removed by hand): every other file is
  // still fetched, the missing one is named, the verdict printed, exit 1.
  REQUIRE(std::filesystem::remove(dir.file("state/runs/" + pass + "/junit.xml")));
  TempDir partial;
  auto gaps = ctl({"run", "fetch", pass, "--out", partial.path()});
  CHECK(gaps.status.code == 1);
  CHECK(gaps.err == "hwfarmctl: run " + pass + ": artifact junit.xml: not in the lab's archive (gone from the lab)\n");
  CHECK(gaps.out.find(", 1 could not be fetched\nrun " + pass + ": passed\n") != std::string::npos);
  CHECK(json::parse(readFile(partial.file("summary.json"))).at("state").as_string() == "passed");
  CHECK(!std::filesystem::exists(partial.file("junit.xml")));
  // The files come as one archive, spooled beside them and removed after.
  CHECK(!std::filesystem::exists(partial.file(".hwfarm-artifacts.tar")));
  // A file that cannot be written here (a folder in its place) is named;
  // the others are written.
  TempDir blocked;
  std::filesystem::create_directories(blocked.file("summary.json/x"));
  auto unwritable = ctl({"run", "fetch", pass, "--out", blocked.path()});
  CHECK(unwritable.status.code == 1);
  CHECK(unwritable.err.rfind("hwfarmctl: run " + pass + ": artifact summary.json: cannot write " +
                                 blocked.file("summary.json") + ": ",
                             0) == 0);
  CHECK(unwritable.out.find(", 2 could not be fetched\n") != std::string::npos);
  size_t written = 0;
  for (const auto& e : std::filesystem::recursive_directory_iterator(blocked.path())) {
    written += e.is_regular_file();
    CHECK(e.path().filename().string()[0] != '.'); // no part or spool left
  }
  CHECK(written > 0);
  CHECK(unwritable.out.rfind("artifacts: " + std::to_string(written) + " file(s) in " + blocked.path() + ", 2 could", 0) == 0);
  // A link where the spool goes is replaced, never written through.
  TempDir linked;
  const std::string outside = dir.write("outside.txt", "keep");
  std::filesystem::create_symlink(outside, linked.file(".hwfarm-artifacts.tar"));
  CHECK(ctl({"run", "fetch", pass, "--out", linked.path()}).status.code == 1); // (junit.xml is gone)
  CHECK(readFile(outside) == "keep");
  CHECK(!std::filesystem::exists(std::filesystem::symlink_status(linked.file(".hwfarm-artifacts.tar"))));
  CHECK(json::parse(readFile(linked.file("summary.json"))).at("state").as_string() == "passed");
  // A failing run: run wait exits as run does (10).
  std::string fail = runIdOf(ctl({"run", "--lease", lease, "--reference", "none", "--no-wait", firmware("fail")}).out);
  CHECK(ctl({"run", "wait", fail}).status.code == 10);
  CHECK(ctl({"run", "fetch", fail, "--out", out.file("fail")}).status.code == 10);
  // A hanging run: fetch refuses while it runs, cancel ends it (11), a second cancel is an error.
  std::string hang = runIdOf(
      ctl({"run", "--lease", lease, "--reference", "none", "--deadline", "120", "--no-wait", firmware("hang")}).out);
  auto early = ctl({"run", "fetch", hang, "--out", out.file("hang")});
  CHECK(early.status.code == 1);
  CHECK(early.err.find("is still running") != std::string::npos);
  auto running = ctl({"runs", "--state", "running"});
  CHECK(running.out.find(hang + "  running  " + lease.substr(0, 12)) != std::string::npos);
  CHECK(running.out.find(pass) == std::string::npos);
  auto cancelled = ctl({"run", "cancel", hang.substr(4)});
  CHECK(cancelled.status.code == 0);
  CHECK(cancelled.out == "run " + hang + ": cancelled\n");
  CHECK(ctl({"run", "wait", hang}).status.code == 11);
  auto again = ctl({"run", "cancel", hang});
  CHECK(again.status.code == 1);
  CHECK(again.err.find("HTTP 409: run_ended") != std::string::npos);
  // runs lists them newest first, filtered by state and lease (a prefix).
  auto listed = ctl({"runs", "--lease", lease.substr(0, 6)});
  CHECK(listed.status.code == 0);
  size_t at_hang = listed.out.find(hang), at_fail = listed.out.find(fail), at_pass = listed.out.find(pass);
  CHECK(at_hang < at_fail);
  CHECK(at_fail < at_pass);
  CHECK(at_pass != std::string::npos);
  auto passed = json::parse(ctl({"--json", "runs", "--state", "passed"}).out).at("runs").as_array();
  REQUIRE(passed.size() == 1);
  CHECK(passed.at(0).at("id").as_string() == pass);
  CHECK(d.get("/v1/runs?state=finished").status == 400);
  // upload retry takes a run the same way (a prefix no run has is refused before anything is sent).
  std::string unknown = "run-";
  for (char c : std::string("0123456789abcdef"))
    if (pass[4] != c && fail[4] != c && hang[4] != c) unknown += c;
  unknown.resize(5);
  auto retry = ctl({"upload", "retry", unknown});
  CHECK(retry.status.code == 1);
  CHECK(retry.err == "hwfarmctl: no run id begins with \"" + unknown + "\"\n");
  CHECK(json::parse(d.get("/v1/runs?lease=" + lease + "&prefix=" + fail.substr(0, 8)).body).at("runs").as_array().size() ==
        1);
  REQUIRE(ctl({"lease", "release", lease}).status.code == 0);
}

TEST_CASE("without --ttl a lease gets the daemon's leases.default_ttl_s, with it its own") {
  TempDir dir;
  RunningDaemon d(dir, qemuFleet(dir.file("state"), 1) + "[leases]\ndefault_ttl_s = 77\n");
  Ctl ctl{d, {}};
  auto plain = json::parse(ctl({"--json", "lease", "acquire", "--type", "mps2-an385"}).out);
  CHECK(plain.at("ttl_s").as_int64() == 77);
  REQUIRE(ctl({"lease", "release", std::string(plain.at("id").as_string())}).status.code == 0);
  auto own = json::parse(ctl({"--json", "lease", "acquire", "--type", "mps2-an385", "--ttl=30"}).out);
  CHECK(own.at("ttl_s").as_int64() == 30);
}
