// The pytest example (examples/pytest/) under `hwfarmctl lease run
// --results`, end to end: a real hwfarmd with one fault-injection board
// behind a pty (tests/fakes/fake_board.cpp), the real hwfarmctl, real
// pytest (/usr/bin/python3 -m pytest) running the example suite as it is
// shipped, its board fixture reading HWFARM_BOARD_0_SERIAL_PORT. hwfarmd
// never opens the board's tty here (no flash, power or console through the
// lease: the suite must be its only reader); the board is flashed with the
// fake board's own tool and power-cycled by the fixture
// (HWFARM_EXAMPLE_RESET_CMD). Each case: the published run (kind
// external), its verdict and classes, what hwfarmctl printed and exited
// with, and the lease given back.
#include <catch2/catch.hpp>

#include <boost/json.hpp>

#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <regex>
#include <thread>

#include "tests/support/daemon_harness.h"
#include "tests/support/fake_board.h"
#include "tests/support/process.h"

using namespace hwfarm::test;
namespace json = boost::json;
namespace fs = std::filesystem;
using namespace std::chrono_literals;

namespace {

const std::string kExample = HWFARM_SOURCE_DIR "/examples/pytest";

std::string str(const json::value& v) { return std::string(v.as_string()); }

std::string stateOf(const RunningDaemon& d, const std::string& board) {
  json::value boards = json::parse(d.get("/v1/boards").body);
  for (const auto& b : boards.at("boards").as_array())
    if (b.at("name").as_string() == board) return str(b.at("state"));
  return "";
}

bool waitState(const RunningDaemon& d, const std::string& board, const std::string& state) {
  for (int i = 0; i < 500; ++i) {
    if (stateOf(d, board) == state) return true;
    std::this_thread::sleep_for(10ms);
  }
  return false;
}

// One fake board (fake-1, type "fake") plugged in, available, and flashed
// with the pass firmware's console (fake_board_image.txt) by the fake
// board's own tool; `work` is the directory the commands run in (their
// out/ lands there).
struct Lab {
  TempDir dir;
  // (stopped, `d` is no more: its database is then free to read)
  std::unique_ptr<RunningDaemon> daemon = std::make_unique<RunningDaemon>(
      dir, qemuFleet(dir.file("state"), 0, "[leases]\nrecovery_s = 0\n") + fakeBoard(dir, 1));
  RunningDaemon& d = *daemon;
  Process board = plugIn(dir, 1);
  std::string sock = dir.file("fake1.sock");
  std::string work = dir.file("work");

  Lab() {
    REQUIRE(waitState(d, "fake-1", "available"));
    CommandResult flashed = runCommand({FAKE_BOARD_PATH, "flash", sock, kExample + "/fake_board_image.txt"});
    INFO(flashed.out << flashed.err);
    REQUIRE(flashed.status.code == 0);
    fs::create_directory(work);
  }

  void mode(const std::string& m) const {
    CommandResult r = runCommand({FAKE_BOARD_PATH, "mode", sock, m});
    INFO(r.out << r.err);
    REQUIRE(r.status.code == 0);
  }
};

// What a `hwfarmctl lease run` printed and exited with.
struct Ran {
  ExitStatus status;
  std::string out, err;
  std::string lease; // from "lease ID granted"
  std::string run;   // from "run ID: STATE"
  std::string state; // STATE
};

// The example suite as the README runs it (plus: no cache, no bytecode in
// the source tree).
std::vector<std::string> pytest(const std::string& junit = "out/r.xml") {
  return {"/usr/bin/python3", "-m", "pytest", "-p", "no:cacheprovider", "--junitxml", junit, kExample};
}

// `hwfarmctl lease run --type fake OPTIONS -- CMD` in lab.work, with the
// fake board's power cycle as the fixture's reset; `env` more of the
// command's environment.
Ran leaseRun(const Lab& lab, const std::vector<std::string>& options, const std::vector<std::string>& cmd,
             const std::map<std::string, std::string>& env = {}) {
  std::vector<std::string> argv{HWFARMCTL_PATH, "--url", lab.d.url(), "lease", "run", "--type", "fake"};
  argv.insert(argv.end(), options.begin(), options.end());
  argv.push_back("--");
  argv.insert(argv.end(), cmd.begin(), cmd.end());
  std::map<std::string, std::string> e{{"HWFARM_URL", ""},
                                       {"HWFARM_TOKEN", ""},
                                       {"HWFARM_CONTEXT", ""},
                                       {"HWFARM_WORKER", ""},
                                       {"CHANGE_ID", ""},
                                       {"GIT_COMMIT", ""},
                                       {"PYTEST_ADDOPTS", ""},
                                       {"HWFARM_EXAMPLE_FAIL", ""},
                                       {"PYTHONDONTWRITEBYTECODE", "1"},
                                       {"HWFARM_EXAMPLE_RESET_CMD",
                                        "'" FAKE_BOARD_PATH "' power '" + lab.sock + "' cycle"}};
  for (const auto& [k, v] : env) e[k] = v;
  static int n = 0;
  std::string out = lab.dir.file("ctl" + std::to_string(++n) + ".out"),
              err = lab.dir.file("ctl" + std::to_string(n) + ".err");
  Process ctl(argv, out, err, e, lab.work);
  std::optional<ExitStatus> status = ctl.wait(180s);
  Ran r;
  r.out = readFile(out);
  r.err = readFile(err);
  INFO(r.out << r.err);
  REQUIRE(status);
  r.status = *status;
  std::smatch m;
  if (std::regex_search(r.err, m, std::regex("lease (\\S+) granted"))) r.lease = m[1];
  if (std::regex_search(r.out, m, std::regex("(?:^|\n)run (\\S+): (\\S+)"))) {
    r.run = m[1];
    r.state = m[2];
  }
  return r;
}

// pytest's own summary ("3 passed, 1 skipped, 1 xfailed in 0.03s"), each
// word with its count.
std::map<std::string, int64_t> pytestSummary(const std::string& out) {
  std::map<std::string, int64_t> counts;
  std::string last;
  std::regex summary("=+ ([^=\n]*) in [0-9.]+s[^=\n]*=+");
  for (auto it = std::sregex_iterator(out.begin(), out.end(), summary); it != std::sregex_iterator(); ++it)
    last = (*it)[1];
  std::regex pair("([0-9]+) ([a-z]+)");
  for (auto it = std::sregex_iterator(last.begin(), last.end(), pair); it != std::sregex_iterator(); ++it)
    counts[(*it)[2]] = std::stoll((*it)[1]);
  return counts;
}

json::object record(const RunningDaemon& d, const std::string& run) {
  auto r = d.get("/v1/runs/" + run);
  INFO(r.body);
  REQUIRE(r.status == 200);
  return json::parse(r.body).as_object();
}

// The run's one attempt's cases by name ("test_board.test_ramp_output").
std::map<std::string, json::object> casesOf(const json::object& rec) {
  std::map<std::string, json::object> out;
  for (const auto& c : rec.at("attempts").at(0).at("cases").as_array()) out[str(c.at("name"))] = c.as_object();
  return out;
}

std::string ruleOf(const json::object& c) {
  return c.contains("infrastructure_rule") ? str(c.at("infrastructure_rule")) : "";
}

int64_t count(const json::object& rec, const char* what) {
  return rec.at("attempts").at(0).at("counts").at(what).to_number<int64_t>();
}

std::vector<std::string> runsOfLease(const RunningDaemon& d, const std::string& lease) {
  auto r = d.get("/v1/runs?lease=" + lease);
  INFO(r.body);
  REQUIRE(r.status == 200);
  std::vector<std::string> ids;
  json::value runs = json::parse(r.body);
  for (const auto& run : runs.at("runs").as_array()) ids.push_back(str(run.at("id")));
  return ids;
}

std::string leaseState(const RunningDaemon& d, const std::string& lease) {
  return str(json::parse(d.get("/v1/leases/" + lease).body).at("state"));
}

} // namespace

TEST_CASE("pytest example: a green suite under lease run is published as a passed run with pytest's counts") {
  Lab lab;
  // When the example suite runs under lease run --results on the board,
  Ran r = leaseRun(lab, {"--results", "out/*.xml"}, pytest());
  INFO(r.out << r.err);
  // hwfarmctl exits with pytest's 0, having published and released,
  CHECK(r.status.exited);
  CHECK(r.status.code == 0);
  REQUIRE_FALSE(r.lease.empty());
  REQUIRE_FALSE(r.run.empty());
  CHECK(r.state == "passed");
  CHECK(r.err.find("lease " + r.lease + " released") != std::string::npos);
  // and the run holds what pytest reported: xfail is a skip in JUnit.
  std::map<std::string, int64_t> summary = pytestSummary(r.out);
  INFO("pytest's summary: " << summary.size() << " word(s)");
  REQUIRE(summary["passed"] == 3);
  REQUIRE(summary["skipped"] == 1);
  REQUIRE(summary["xfailed"] == 1);
  json::object rec = record(lab.d, r.run);
  INFO(json::serialize(rec));
  CHECK(str(rec.at("kind")) == "external");
  CHECK(str(rec.at("state")) == "passed");
  CHECK(str(rec.at("lease_id")) == r.lease);
  const json::object& a = rec.at("attempts").at(0).as_object();
  CHECK(str(a.at("board")) == "fake-1");
  CHECK(count(rec, "passed") == summary["passed"]);
  CHECK(count(rec, "skipped") == summary["skipped"] + summary["xfailed"]);
  CHECK(count(rec, "failed") == 0);
  CHECK(count(rec, "errors") == 0);
  CHECK(count(rec, "cases") == 5);
  CHECK(r.out.find("5 case(s): 3 passed, 0 failed, 0 error(s), 2 skipped\n") != std::string::npos);
  // It is listed, and its results file is served as pytest wrote it.
  std::vector<std::string> listed;
  json::value runs = json::parse(lab.d.get("/v1/runs").body);
  for (const auto& run : runs.at("runs").as_array()) listed.push_back(str(run.at("id")));
  CHECK(std::find(listed.begin(), listed.end(), r.run) != listed.end());
  auto served = lab.d.get("/v1/runs/" + r.run + "/artifacts/results/r.xml");
  CHECK(served.status == 200);
  std::string written = readFile(lab.work + "/out/r.xml");
  CHECK(written.find("<testsuite") != std::string::npos);
  CHECK(served.body == written);
  // The lease ended with the command; its board is free again.
  CHECK(leaseState(lab.d, r.lease) == "released");
  CHECK(waitState(lab.d, "fake-1", "available"));
}

TEST_CASE("pytest example: a failing test fails the published run as the firmware's and lease run exits 1") {
  Lab lab;
  Ran r = leaseRun(lab, {"--results", "out/*.xml"}, pytest(), {{"HWFARM_EXAMPLE_FAIL", "1"}});
  INFO(r.out << r.err);
  CHECK(r.status.exited);
  CHECK(r.status.code == 1); // pytest's
  REQUIRE_FALSE(r.run.empty());
  CHECK(r.state == "failed");
  json::object rec = record(lab.d, r.run);
  INFO(json::serialize(rec));
  CHECK(str(rec.at("kind")) == "external");
  CHECK(str(rec.at("state")) == "failed");
  CHECK(str(rec.at("failure_class")) == "test");
  CHECK(count(rec, "failed") == 1);
  CHECK(count(rec, "errors") == 0);
  CHECK(count(rec, "passed") == 2);
  auto cases = casesOf(rec);
  REQUIRE(cases.count("test_board.test_ramp_output"));
  const json::object& ramp = cases["test_board.test_ramp_output"];
  CHECK(str(ramp.at("outcome")) == "fail");
  CHECK(str(ramp.at("message")).find("AssertionError") != std::string::npos);
  CHECK_FALSE(ramp.contains("infrastructure_rule"));
  CHECK(r.out.find("  fail: test_board.test_ramp_output (test): ") != std::string::npos);
  CHECK(leaseState(lab.d, r.lease) == "released");
}

TEST_CASE("pytest example: a board unplugged mid-test is the lab's by the serial port rule and counts against the "
          "board") {
  Lab lab;
  // Given a board that prints half its run after the fixture's power cycle
  // and then vanishes, while test_ramp_output waits for its ramp,
  lab.mode("unplug");
  Ran r = leaseRun(lab, {"--results", "out/*.xml"}, pytest());
  INFO(r.out << r.err);
  CHECK(r.status.exited);
  CHECK(r.status.code == 1); // pytest's
  REQUIRE_FALSE(r.run.empty());
  json::object rec = record(lab.d, r.run);
  INFO(json::serialize(rec));
  auto cases = casesOf(rec);
  // the test that was reading failed, but its board fixture's teardown
  // error says the board went away: the lab's, by "serial port lost";
  REQUIRE(cases.count("test_board.test_ramp_output"));
  const json::object& ramp = cases["test_board.test_ramp_output"];
  CHECK(str(ramp.at("outcome")) == "fail");
  CHECK(ruleOf(ramp) == "serial port lost");
  CHECK(str(ramp.at("message")).find("failed on teardown with") != std::string::npos);
  // the tests after it erred at setup, the lab's by the same rule;
  for (const char* later : {"test_board.test_run_ends_with_status_0", "test_board.test_some_case_is_skipped"}) {
    INFO(later);
    REQUIRE(cases.count(later));
    CHECK(str(cases[later].at("outcome")) == "error");
    CHECK(str(cases[later].at("message")).find("failed on setup with") != std::string::npos);
    CHECK(ruleOf(cases[later]) == "serial port lost");
  }
  CHECK(str(cases.at("test_board.test_board_begins_its_run").at("outcome")) == "pass");
  CHECK(count(rec, "cases") == 5);
  CHECK(count(rec, "passed") == 1);
  CHECK(count(rec, "failed") == 1);
  CHECK(count(rec, "errors") == 2);
  CHECK(count(rec, "skipped") == 1);
  // no case failed the firmware's way: the run is the lab's error.
  for (const auto& [name, c] : cases) {
    INFO(name);
    std::string outcome = str(c.at("outcome"));
    if (outcome == "fail" || outcome == "error") CHECK(ruleOf(c) == "serial port lost");
  }
  CHECK(str(rec.at("state")) == "error");
  CHECK(str(rec.at("failure_class")) == "infrastructure");
  CHECK(r.state == "error");
  CHECK(r.out.find("  fail: test_board.test_ramp_output (infrastructure, rule \"serial port lost\"): ") !=
        std::string::npos);
  // The board's infrastructure failure counts for the SLA: an incident on
  // fake-1,
  json::object sla;
  for (int i = 0; i < 500; ++i) {
    sla = json::parse(lab.d.get("/v1/sla").body).as_object();
    if (sla.at("ratio").at("infra_failures").to_number<int64_t>() >= 1 && !sla.at("incidents").as_array().empty())
      break;
    std::this_thread::sleep_for(10ms);
  }
  INFO(json::serialize(sla));
  CHECK(sla.at("ratio").at("runs").to_number<int64_t>() == 1);
  CHECK(sla.at("ratio").at("infra_failures").to_number<int64_t>() == 1);
  bool incident = false;
  for (const auto& inc : sla.at("incidents").as_array())
    for (const auto& b : inc.at("boards").as_array()) incident = incident || b.as_string() == "fake-1";
  CHECK(incident);
  CHECK(leaseState(lab.d, r.lease) == "released");
  // and the lease's events (the database's event log, free to read once
  // hwfarmd stopped) hold the run's infrastructure failure against fake-1,
  // naming the rule, beside the board's vanishing hwfarmd saw itself.
  lab.daemon.reset();
  CommandResult events = runCommand(
      {"/usr/bin/python3", "-c",
       "import sqlite3,sys\n"
       "c = sqlite3.connect('file:' + sys.argv[1] + '?mode=ro', uri=True)\n"
       "for b, d in c.execute(\"SELECT board, detail FROM events WHERE kind = 'infra_failure' AND lease_id = ? "
       "ORDER BY id\", (sys.argv[2],)): print(b + ': ' + d)",
       lab.dir.file("state/hwfarm.db"), r.lease});
  INFO(events.out << events.err);
  CHECK(events.status.code == 0);
  CHECK(events.out.find("fake-1: ") != std::string::npos);
  CHECK(events.out.find("rule \"serial port lost\"") != std::string::npos);
  CHECK(events.out.find("fake-1: board vanished while leased") != std::string::npos);
}

TEST_CASE("pytest example: a results file a crash left cut is refused with its place and nothing is published") {
  Lab lab;
  // Given a command that exits 0 but leaves only the head of pytest's file
  std::string py;
  for (const auto& a : pytest()) py += "'" + a + "' ";
  Ran r = leaseRun(lab, {"--results", "out/cut.xml"},
                   {"/bin/sh", "-c", py + "; head -c 300 out/r.xml > out/cut.xml; rm out/r.xml"});
  INFO(r.out << r.err);
  // hwfarmctl shows the daemon's 400 with the file's line and column, and
  // exits with an error although the command exited 0;
  CHECK(r.status.exited);
  CHECK(r.status.code != 0);
  CHECK(r.err.find("400") != std::string::npos);
  CHECK(std::regex_search(r.err, std::regex("cut\\.xml:[0-9]+:[0-9]+")));
  CHECK(r.run.empty());
  // no run was made, and the lease was given back.
  REQUIRE_FALSE(r.lease.empty());
  CHECK(runsOfLease(lab.d, r.lease).empty());
  CHECK(json::parse(lab.d.get("/v1/runs").body).at("runs").as_array().empty());
  CHECK(leaseState(lab.d, r.lease) == "released");
  CHECK(fs::exists(lab.work + "/out/cut.xml"));
}

TEST_CASE("pytest example: results no file matches publish nothing and lease run fails after releasing") {
  Lab lab;
  // Given --results naming a folder the suite does not write to,
  Ran r = leaseRun(lab, {"--results", "reports/*.xml"}, pytest());
  INFO(r.out << r.err);
  CHECK(r.status.exited);
  CHECK(r.status.code != 0);
  CHECK(r.err.find("--results reports/*.xml: no file matches") != std::string::npos);
  CHECK(r.run.empty());
  REQUIRE_FALSE(r.lease.empty());
  CHECK(runsOfLease(lab.d, r.lease).empty());
  CHECK(json::parse(lab.d.get("/v1/runs").body).at("runs").as_array().empty());
  CHECK(r.err.find("lease " + r.lease + " released") != std::string::npos);
  CHECK(leaseState(lab.d, r.lease) == "released");
  CHECK(fs::exists(lab.work + "/out/r.xml")); // pytest did write, elsewhere
}

TEST_CASE("pytest example: an empty results file under a command that exits 0 fails lease run with the run's "
          "verdict") {
  Lab lab;
  // Given a well-formed JUnit file with no test case and a command that
  // exits 0 (a harness whose exit code did not reflect that nothing ran),
  fs::create_directory(lab.work + "/out");
  std::ofstream(lab.work + "/out/empty.xml") << "<testsuites/>\n";
  Ran r = leaseRun(lab, {"--results", "out/*.xml"}, {"true"});
  INFO(r.out << r.err);
  // the run is published failed, and lease run exits with its verdict (10)
  // as `hwfarmctl run` does, not with the command's 0;
  CHECK(r.status.exited);
  CHECK(r.status.code == 10);
  REQUIRE_FALSE(r.run.empty());
  CHECK(r.state == "failed");
  CHECK(r.out.find("the results have no test case") != std::string::npos);
  json::object rec = record(lab.d, r.run);
  INFO(json::serialize(rec));
  CHECK(str(rec.at("state")) == "failed");
  CHECK(str(rec.at("failure_class")) == "test");
  CHECK(count(rec, "cases") == 0);
  // the lease was given back.
  REQUIRE_FALSE(r.lease.empty());
  CHECK(r.err.find("lease " + r.lease + " released") != std::string::npos);
  CHECK(leaseState(lab.d, r.lease) == "released");
}

TEST_CASE("pytest example: one results pattern of two that matches nothing publishes nothing and lease run fails") {
  Lab lab;
  // Given a green suite writing out/r.xml and a second pattern for a file it
  // does not write,
  Ran r = leaseRun(lab, {"--results", "out/*.xml", "--results", "out/twister.json"}, pytest());
  INFO(r.out << r.err);
  // the pattern that matched nothing is named, nothing is published (not
  // even out/r.xml), and lease run exits non-zero although pytest exited 0;
  CHECK(r.status.exited);
  CHECK(r.status.code != 0);
  CHECK(r.status.code == 1);
  CHECK(pytestSummary(r.out)["passed"] == 3);
  CHECK(r.err.find("--results out/twister.json: no file matches") != std::string::npos);
  CHECK(r.err.find("--results out/*.xml: no file matches") == std::string::npos);
  CHECK(r.run.empty());
  REQUIRE_FALSE(r.lease.empty());
  CHECK(runsOfLease(lab.d, r.lease).empty());
  CHECK(json::parse(lab.d.get("/v1/runs").body).at("runs").as_array().empty());
  // the lease was still given back.
  CHECK(r.err.find("lease " + r.lease + " released") != std::string::npos);
  CHECK(leaseState(lab.d, r.lease) == "released");
  CHECK(fs::exists(lab.work + "/out/r.xml"));
}

TEST_CASE("pytest example: a results file two patterns match is published once") {
  Lab lab;
  // Given two patterns naming pytest's one file (a glob and another path to it),
  Ran r = leaseRun(lab, {"--results", "out/*.xml", "--results", "./out/../out/r.xml"}, pytest());
  INFO(r.out << r.err);
  CHECK(r.status.exited);
  CHECK(r.status.code == 0);
  REQUIRE_FALSE(r.run.empty());
  CHECK(r.state == "passed");
  // it is sent once: the counts are pytest's, not doubled,
  json::object rec = record(lab.d, r.run);
  INFO(json::serialize(rec));
  CHECK(count(rec, "cases") == 5);
  CHECK(count(rec, "passed") == 3);
  CHECK(count(rec, "skipped") == 2);
  CHECK(r.out.find("5 case(s): 3 passed, 0 failed, 0 error(s), 2 skipped\n") != std::string::npos);
  CHECK(r.err.find("published 1 results file(s)") != std::string::npos);
  // and kept once.
  std::vector<std::string> results;
  for (const auto& a : rec.at("artifacts").as_array())
    if (a.as_string().starts_with("results/")) results.push_back(str(a));
  CHECK(results == std::vector<std::string>{"results/r.xml"});
  CHECK(leaseState(lab.d, r.lease) == "released");
}

TEST_CASE("pytest example: results and artifacts past 1 GiB are refused before anything is read or sent") {
  Lab lab;
  // Given a valid results file and an artifact of 1 GiB and more (sparse:
  // nothing of it is on disk),
  fs::create_directory(lab.work + "/out");
  std::ofstream(lab.work + "/out/r.xml")
      << "<testsuite name=\"s\" tests=\"1\"><testcase classname=\"c\" name=\"t\"/></testsuite>\n";
  { std::ofstream(lab.work + "/out/big.bin"); }
  fs::resize_file(lab.work + "/out/big.bin", (uint64_t{1} << 30) + 1);
  Ran r = leaseRun(lab, {"--results", "out/*.xml", "--artifacts", "out/big.bin"}, {"true"});
  INFO(r.out << r.err);
  // lease run says so and fails with the usage code, nothing published,
  CHECK(r.status.exited);
  CHECK(r.status.code == 2);
  CHECK(r.err.find("more than the 1024 MiB a publish may send") != std::string::npos);
  CHECK(r.run.empty());
  REQUIRE_FALSE(r.lease.empty());
  CHECK(runsOfLease(lab.d, r.lease).empty());
  // and the lease was given back.
  CHECK(leaseState(lab.d, r.lease) == "released");
}
