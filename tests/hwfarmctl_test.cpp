// hwfarmctl as Jenkinsfiles run it: a real binary against a real hwfarmd.
#include <catch2/catch.hpp>

#include <signal.h>
#include <sys/stat.h>

#include <boost/json.hpp>
#include <regex>
#include <thread>

#include "tests/support/daemon_harness.h"

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
  for (int i = 0; i < 500 && alive(sleeper); ++i) std::this_thread::sleep_for(10ms); // killed, not yet reaped
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
  for (int i = 0; i < 500 && alive(left); ++i) std::this_thread::sleep_for(10ms); // killed, not yet reaped
  REQUIRE_FALSE(alive(left));
}

// Issue 9, item 14: header values and the request line were written as
// given, so a CR/LF in a token or a lease id added headers of its own.
TEST_CASE("issue 9: hwfarmctl sends no CR or LF in a header or the request line") {
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
