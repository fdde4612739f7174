// A test harness's results published as a run (docs/harness-results.md),
// through a real hwfarmd and the real hwfarmctl: JUnit XML written by real
// pytest (Debian's python3-pytest) for suites with a pass, a failure, an
// error in a board fixture (the lab's by a rule), an error in another
// fixture (the firmware's), a skip and an xfail; twister.json in Zephyr
// 3.7's shape; a file a crashed harness left cut (400, nothing stored); the
// archive's refusals; the SLA counting only the lab's; a restart keeping
// everything; the operator's own rules.
#include <catch2/catch.hpp>

#include <boost/json.hpp>

#include <filesystem>
#include <fstream>
#include <thread>

#include "daemon/cli/http_client.h"
#include "daemon/core/run/tar.h"
#include "tests/support/daemon_harness.h"
#include "tests/support/process.h"

using namespace hwfarm::test;
namespace json = boost::json;
namespace fs = std::filesystem;
using namespace std::chrono_literals;

namespace {

json::value parsed(const hwfarm::cli::HttpResult& r) {
  INFO(r.body);
  return json::parse(r.body);
}

std::string lease(const RunningDaemon& d, const std::string& token = "") {
  auto r = d.request("POST", "/v1/leases", R"({"selector":{"type":"mps2-an385"},"count":1,"context":"manual"})", token);
  INFO(r.body);
  REQUIRE(r.status == 201);
  return std::string(parsed(r).at("id").as_string());
}

// The suite's conftest: `board` fails the way the lab does (pyserial's
// exception name), `calibration` the way a test's own fixture does.
const char* kConftest = R"(import pytest

class SerialException(OSError):
    pass

@pytest.fixture
def board():
    raise SerialException("could not open port /dev/ttyACM0: No such file or directory")

@pytest.fixture
def calibration():
    raise ValueError("calibration table is empty")
)";

const char* kTests = R"(import pytest

def test_pass():
    assert 1 + 1 == 2

def test_fail():
    assert [0, 1, 2] == [0, 1, 3]

def test_body_raises():
    raise RuntimeError("the firmware answered garbage")

def test_board_lost(board):
    pass

def test_calibrated(calibration):
    pass

@pytest.mark.skip(reason="needs two boards")
def test_skip():
    pass

@pytest.mark.xfail(reason="known bug", strict=True)
def test_xfail():
    assert False
)";

// Writes `tests` (and the conftest) under <dir>/<name>/ and runs pytest
// there; the JUnit file's path. `family`: xunit1 or xunit2.
std::string runPytest(const TempDir& dir, const std::string& name, const std::string& tests,
                      const std::string& family = "xunit2") {
  fs::create_directories(dir.file(name));
  dir.write(name + "/conftest.py", kConftest);
  dir.write(name + "/test_board.py", tests);
  std::string xml = dir.file(name + "/out/r.xml");
  CommandResult r = runCommand({"/bin/sh", "-c",
                                "cd \"$0\" && /usr/bin/python3 -m pytest -p no:cacheprovider -o junit_family=" + family +
                                    " --junitxml out/r.xml -q test_board.py",
                                dir.file(name)},
                               {{"PYTHONDONTWRITEBYTECODE", "1"}}, std::chrono::seconds(60));
  INFO(r.out << r.err);
  REQUIRE(fs::exists(xml));
  return xml;
}

CommandResult hwfarmctl(const RunningDaemon& d, std::vector<std::string> args,
                        const std::map<std::string, std::string>& env = {}) {
  args.insert(args.begin(), {HWFARMCTL_PATH, "--url", d.url()});
  return runCommand(args, env, std::chrono::seconds(60));
}

const json::object* caseNamed(const json::object& run, const std::string& name) {
  for (const auto& c : run.at("attempts").as_array()[0].at("cases").as_array())
    if (c.at("name").as_string() == name) return &c.as_object();
  return nullptr;
}

std::string ruleOf(const json::object& run, const std::string& name) {
  const json::object* c = caseNamed(run, name);
  INFO(name << " in " << json::serialize(run));
  REQUIRE(c);
  return c->contains("infrastructure_rule") ? std::string(c->at("infrastructure_rule").as_string()) : "";
}

std::string outcomeOf(const json::object& run, const std::string& name) {
  const json::object* c = caseNamed(run, name);
  INFO(name << " in " << json::serialize(run));
  REQUIRE(c);
  return std::string(c->at("outcome").as_string());
}

// A tar of (name, bytes) members, as hwfarmctl sends it.
std::string tarOf(const std::vector<std::pair<std::string, std::string>>& files) {
  std::string out;
  for (const auto& [name, bytes] : files) {
    out += hwfarm::run::tarHeader({name, bytes.size(), 0, 0644});
    out += bytes;
    out.append(hwfarm::run::tarPadding(bytes.size()), '\0');
  }
  return out + hwfarm::run::tarEnd();
}

hwfarm::cli::HttpResult post(const RunningDaemon& d, const std::string& lease_id, const std::string& body,
                             const std::string& query = "?name=t", const std::string& token = "") {
  return hwfarm::cli::HttpClient(d.url())
      .request("POST", "/v1/leases/" + lease_id + "/results" + query, body, token, "application/x-tar");
}

size_t runsListed(const RunningDaemon& d) { return parsed(d.get("/v1/runs")).at("runs").as_array().size(); }

// What GET /v1/sla says of the ratio: runs and infrastructure failures.
std::pair<int64_t, int64_t> slaRatio(const RunningDaemon& d) {
  json::value sla = parsed(d.get("/v1/sla"));
  return {sla.at("ratio").at("runs").to_number<int64_t>(), sla.at("ratio").at("infra_failures").to_number<int64_t>()};
}

// The entries of the runs directory (the runs' folders and anything hidden).
std::vector<std::string> runsDir(const TempDir& dir) {
  std::vector<std::string> out;
  if (!fs::exists(dir.file("state/runs"))) return out;
  for (const auto& e : fs::directory_iterator(dir.file("state/runs"))) out.push_back(e.path().filename().string());
  std::sort(out.begin(), out.end());
  return out;
}

} // namespace

TEST_CASE("results publish: a real pytest run's cases each arrive with their class") {
  TempDir dir;
  RunningDaemon d(dir, qemuFleet(dir.file("state"), 1));
  std::string id = lease(d);
  std::string xml = runPytest(dir, "suite", kTests);
  fs::create_directories(dir.file("logs/board"));
  dir.write("logs/board/console.txt", "boot\nHWFARM END 0\n");
  dir.write("logs/pytest.log", "7 tests\n");
  CommandResult r = hwfarmctl(d, {"results", "publish", "--lease", id, "--name", "pytest", "--commit", "abc1234", xml,
                                  "--artifacts", dir.file("logs")});
  INFO(r.out << r.err);
  REQUIRE(r.status.code == 0); // published, whatever the verdict
  CHECK_THAT(r.out, Catch::Contains("7 case(s): 1 passed, 2 failed, 2 error(s), 2 skipped"));
  CHECK_THAT(r.out, Catch::Contains("error: test_board.test_board_lost (infrastructure, rule \"serial port lost\")"));
  CHECK_THAT(r.out, Catch::Contains("error: test_board.test_calibrated (test)"));
  CHECK_THAT(r.out, Catch::Contains("fail: test_board.test_fail (test)"));
  std::string run_id = r.out.substr(r.out.find("run run-") + 4, 20);

  json::object run = parsed(d.get("/v1/runs/" + run_id)).as_object();
  INFO(json::serialize(run));
  CHECK(run.at("kind") == "external");
  CHECK(run.at("harness") == "junit");
  CHECK(run.at("state") == "failed"); // a test failure decides; the lab's error stays in its case
  CHECK(run.at("failure_class") == "test");
  CHECK(run.at("suite") == "pytest");
  CHECK(run.at("commit") == "abc1234");
  CHECK(run.at("lease_id") == id.c_str());
  const json::object& attempt = run.at("attempts").as_array()[0].as_object();
  CHECK(attempt.at("board") == "sim-0");
  CHECK(attempt.at("counts") ==
        json::value{{"cases", 7}, {"passed", 1}, {"failed", 2}, {"skipped", 2}, {"errors", 2}});
  // A failure is the firmware's, whatever it raised; an error is the lab's only by a rule.
  CHECK(outcomeOf(run, "test_board.test_fail") == "fail");
  CHECK(ruleOf(run, "test_board.test_fail").empty());
  CHECK(outcomeOf(run, "test_board.test_body_raises") == "fail");
  CHECK(ruleOf(run, "test_board.test_body_raises").empty());
  CHECK(outcomeOf(run, "test_board.test_board_lost") == "error");
  CHECK(ruleOf(run, "test_board.test_board_lost") == "serial port lost");
  CHECK(outcomeOf(run, "test_board.test_calibrated") == "error");
  CHECK(ruleOf(run, "test_board.test_calibrated").empty());
  CHECK(outcomeOf(run, "test_board.test_skip") == "skip");
  CHECK(outcomeOf(run, "test_board.test_xfail") == "skip");
  CHECK_THAT(std::string(run.at("reason").as_string()), Catch::StartsWith("test_board.test_fail failed: "));

  // Its files: the JUnit file as given, the artifacts, summary.json.
  CHECK(run.at("artifacts") == json::value{"artifacts/board/console.txt", "artifacts/pytest.log", "results/r.xml",
                                           "summary.json"});
  auto served = d.get("/v1/runs/" + run_id + "/artifacts/results/r.xml");
  CHECK(served.status == 200);
  CHECK(served.body == readFile(xml));
  CHECK(d.get("/v1/runs/" + run_id + "/artifacts/artifacts/board/console.txt").body == "boot\nHWFARM END 0\n");
  auto tar = d.get("/v1/runs/" + run_id + "/artifacts.tar");
  CHECK(tar.status == 200);
  CHECK(tar.body.find("results/r.xml") != std::string::npos);
  // Listed like hwfarm's own runs, and the lease's runs filter finds it.
  json::value listed = parsed(d.get("/v1/runs?lease=" + id));
  REQUIRE(listed.at("runs").as_array().size() == 1);
  CHECK(listed.at("runs").as_array()[0].at("id") == run_id.c_str());
  // No archive is left behind beside the runs.
  for (const auto& e : runsDir(dir)) CHECK(e.rfind(".results-", 0) != 0);
  // The lab's error counts against the board although a test failure decided the run.
  CHECK(slaRatio(d) == std::pair<int64_t, int64_t>{1, 1});
  json::array incidents = parsed(d.get("/v1/sla")).at("incidents").as_array();
  REQUIRE(incidents.size() == 1);
  CHECK(incidents[0].at("subject") == "sim-0");
}

TEST_CASE("results publish: xunit1 JUnit gives the same classes") {
  TempDir dir;
  RunningDaemon d(dir, qemuFleet(dir.file("state"), 1));
  std::string id = lease(d);
  std::string xml = runPytest(dir, "suite", kTests, "xunit1");
  CommandResult r = hwfarmctl(d, {"--json", "results", "publish", "--lease", id, xml});
  INFO(r.out << r.err);
  REQUIRE(r.status.code == 0);
  json::object run = json::parse(r.out).as_object();
  CHECK(run.at("state") == "failed");
  CHECK(ruleOf(run, "test_board.test_board_lost") == "serial port lost");
  CHECK(ruleOf(run, "test_board.test_calibrated").empty());
  CHECK(run.at("suite") == "results"); // the default name
}

TEST_CASE("results publish: the lab's error alone ends error and counts for the SLA and a restart keeps it") {
  TempDir dir;
  RunningDaemon d(dir, qemuFleet(dir.file("state"), 1));
  std::string id = lease(d);
  auto before = slaRatio(d);
  // Only the firmware's failures: counted as a run, not as the lab's.
  std::string failing = runPytest(dir, "failing", "def test_pass():\n    pass\n\ndef test_fail():\n    assert 0\n");
  CommandResult r = hwfarmctl(d, {"--json", "results", "publish", "--lease", id, failing});
  INFO(r.out << r.err);
  REQUIRE(r.status.code == 0);
  CHECK(json::parse(r.out).at("state") == "failed");
  auto after_test = slaRatio(d);
  CHECK(after_test.first == before.first + 1);
  CHECK(after_test.second == before.second);
  CHECK(parsed(d.get("/v1/sla")).at("incidents").as_array().empty());

  // The board fixture's error: the lab's, against the board.
  std::string lost = runPytest(dir, "lost", "def test_pass():\n    pass\n\ndef test_board_lost(board):\n    pass\n");
  r = hwfarmctl(d, {"--json", "results", "publish", "--lease", id, lost});
  INFO(r.out << r.err);
  REQUIRE(r.status.code == 0);
  json::object run = json::parse(r.out).as_object();
  std::string run_id(run.at("id").as_string());
  CHECK(run.at("state") == "error");
  CHECK(run.at("failure_class") == "infrastructure");
  CHECK(run.at("reason") ==
        "test_board.test_board_lost: an error the lab's by rule \"serial port lost\": failed on setup with "
        "\"conftest.SerialException: could not open port /dev/ttyACM0: No such file or directory\"");
  auto after_lab = slaRatio(d);
  CHECK(after_lab.first == before.first + 2);
  CHECK(after_lab.second == before.second + 1);
  json::array incidents = parsed(d.get("/v1/sla")).at("incidents").as_array();
  REQUIRE(incidents.size() == 1);
  CHECK(incidents[0].at("subject") == "sim-0");
  CHECK_THAT(std::string(incidents[0].at("detail").as_string()), Catch::Contains("serial port lost"));
  // A passing publish counts as a run but resolves no incident: only
  // hwfarm's own runs and health checks do.
  std::string passing = runPytest(dir, "passing", "def test_pass():\n    pass\n");
  r = hwfarmctl(d, {"--json", "results", "publish", "--lease", id, passing});
  REQUIRE(r.status.code == 0);
  CHECK(json::parse(r.out).at("state") == "passed");
  CHECK(parsed(d.get("/v1/sla")).at("incidents").as_array().size() == 1);
  after_lab = slaRatio(d);
  CHECK(after_lab.first == before.first + 3);

  // The SLA saves a run's outcome off the loop, moments after the answer:
  // the kill comes once sla.json holds all three.
  bool saved = false;
  for (int i = 0; i < 1000 && !saved; ++i) {
    boost::system::error_code ec;
    json::value file = json::parse(readFile(dir.file("state/sla.json")), ec);
    saved = !ec && file.is_object() && file.as_object().contains("runs") &&
            static_cast<int64_t>(file.at("runs").as_array().size()) == after_lab.first;
    if (!saved) std::this_thread::sleep_for(10ms);
  }
  REQUIRE(saved);
  d.killAndRestart();
  json::object again = parsed(d.get("/v1/runs/" + run_id)).as_object();
  CHECK(again.at("state") == "error");
  CHECK(again.at("kind") == "external");
  CHECK(ruleOf(again, "test_board.test_board_lost") == "serial port lost");
  CHECK(d.get("/v1/runs/" + run_id + "/artifacts/results/r.xml").body == readFile(lost));
  CHECK(slaRatio(d) == after_lab);
  CHECK(runsListed(d) == 3);
}

TEST_CASE("results publish: a file a crashed harness left cut is refused with its line and nothing is kept") {
  TempDir dir;
  RunningDaemon d(dir, qemuFleet(dir.file("state"), 1));
  std::string id = lease(d);
  std::string xml = runPytest(dir, "suite", kTests);
  std::string whole = readFile(xml);
  std::string cut = dir.write("cut.xml", whole.substr(0, whole.size() / 2));
  auto dir_before = runsDir(dir);
  auto sla_before = slaRatio(d);
  CommandResult r = hwfarmctl(d, {"results", "publish", "--lease", id, cut});
  INFO(r.out << r.err);
  CHECK(r.status.code != 0);
  CHECK_THAT(r.err, Catch::Contains("HTTP 400: invalid_results: results/cut.xml:"));
  CHECK(runsListed(d) == 0);
  CHECK(runsDir(dir) == dir_before);
  CHECK(slaRatio(d) == sla_before);
  // One bad file among good ones: nothing of the archive is kept either.
  r = hwfarmctl(d, {"results", "publish", "--lease", id, xml, cut});
  CHECK(r.status.code != 0);
  CHECK(runsListed(d) == 0);
  CHECK(runsDir(dir) == dir_before);
}

TEST_CASE("results publish: archives that are not results are refused with what is wrong") {
  TempDir dir;
  RunningDaemon d(dir, qemuFleet(dir.file("state"), 1));
  std::string id = lease(d);
  std::string junit = R"(<testsuite name="s" tests="1"><testcase classname="c" name="t"/></testsuite>)";
  auto refused = [&](const std::string& body, const std::string& query = "?name=t") {
    auto r = post(d, id, body, query);
    INFO(r.body);
    CHECK(r.status == 400);
    return std::string(parsed(r).at("detail").as_string());
  };
  CHECK_THAT(refused("not a tar archive at all, just text that is long enough to fill a header block" +
                     std::string(512, 'x')),
             Catch::Contains("a bad header checksum"));
  CHECK(refused(tarOf({{"other/r.xml", junit}})) ==
        "member 1 \"other/r.xml\": expected results/NAME (JUnit XML or twister.json) or artifacts/PATH, each part of "
        "letters, digits, \"_.-\" and not starting with '.'");
  CHECK_THAT(refused(tarOf({{"results/../../etc/passwd", junit}})), Catch::Contains("expected results/NAME"));
  CHECK_THAT(refused(tarOf({{"artifacts/log.txt", "x"}})), Catch::Contains("the archive has no results file"));
  CHECK_THAT(refused(tarOf({{"results/r.xml", junit}, {"results/r.xml", junit}})),
             Catch::Contains("the archive has it twice"));
  // A file that is also another file's folder, in either order: a 400, never a failed write.
  CHECK(refused(tarOf({{"results/r.xml", junit}, {"artifacts/a", "x"}, {"artifacts/a/b", "y"}})) ==
        "member 3 \"artifacts/a/b\": the archive has a file artifacts/a too");
  CHECK(refused(tarOf({{"results/r.xml", junit}, {"artifacts/a/b", "y"}, {"artifacts/a", "x"}})) ==
        "member 3 \"artifacts/a\": the archive has a folder of that name too");
  // A name part too long for the disk's temp names is no problem (a fixed-length temp name).
  std::string longName = "artifacts/" + std::string(250, 'n');
  auto long_ok = post(d, id, tarOf({{"results/r.xml", junit}, {longName, "z"}}), "?name=long");
  INFO(long_ok.body);
  CHECK(long_ok.status == 201);
  std::vector<std::pair<std::string, std::string>> many;
  for (int i = 0; i < 65; ++i) many.push_back({"results/r" + std::to_string(i) + ".xml", junit});
  CHECK_THAT(refused(tarOf(many)), Catch::Contains("more than 64 results files"));
  CHECK_THAT(refused(tarOf({{"results/r.xml", "<testsuite>"}})), Catch::Contains("results/r.xml:1:"));
  std::string whole = tarOf({{"results/r.xml", junit}});
  CHECK_THAT(refused(whole.substr(0, 512 + 20)), Catch::Contains("the archive is cut"));
  CHECK_THAT(refused(tarOf({{"results/r.xml", junit}}), "?color=red"), Catch::Contains("unknown parameter"));
  CHECK_THAT(refused(tarOf({{"results/r.xml", junit}}), "?board=sim-9"), Catch::Contains("sim-9 is not in lease"));
  CHECK(runsListed(d) == 1); // (the long name's)
  // Accepted as it is: a run of one passing case.
  auto ok = post(d, id, whole, "?name=smoke&board=sim-0");
  INFO(ok.body);
  REQUIRE(ok.status == 201);
  CHECK(parsed(ok).at("state") == "passed");
  // An unknown or ended lease: nothing is read.
  CHECK(post(d, "0123456789abcdef0123456789abcdef", whole).status == 404);
  REQUIRE(d.request("DELETE", "/v1/leases/" + id, "").status == 200);
  auto ended = post(d, id, whole);
  CHECK(ended.status == 409);
  CHECK(runsListed(d) == 2);
}

TEST_CASE("results publish: only the lease's holder or an operator publishes on it") {
  TempDir dir;
  RunningDaemon d(dir, tokenFleet(dir, 1));
  std::string id = lease(d, "secret-pipeline");
  std::string body = tarOf({{"results/r.xml", R"(<testsuite name="s"><testcase name="t"/></testsuite>)"}});
  CHECK(post(d, id, body, "?name=t", "").status == 401);
  CHECK(post(d, id, body, "?name=t", "secret-viewer").status == 403);
  auto other = post(d, id, body, "?name=t", "secret-pipeline2");
  CHECK(other.status == 403);
  CHECK_THAT(other.body, Catch::Contains("belongs to"));
  CHECK(post(d, id, body, "?name=t", "secret-pipeline").status == 201);
  CHECK(post(d, id, body, "?name=t", "secret-operator").status == 201);
}

TEST_CASE("results publish: twister.json's flash error is the lab's and its failure the firmware's") {
  TempDir dir;
  RunningDaemon d(dir, qemuFleet(dir.file("state"), 1));
  std::string id = lease(d);
  auto twister = [](const std::string& status, const std::string& reason) {
    return R"({"environment": {"zephyr_version": "v3.7.0", "toolchain": "zephyr"},
  "testsuites": [{"name": "samples/hello_world/sample.basic.helloworld", "arch": "arm",
    "platform": "nucleo_f429zi", "path": "samples/hello_world", "run_id": "1", "runnable": true,
    "retries": 0, "status": ")" + status + R"(", "reason": ")" + reason + R"(", "execution_time": "2.10",
    "dut": "0672FF485550755187121723", "used_ram": 4096, "used_rom": 12000,
    "testcases": [{"identifier": "sample.basic.helloworld", "status": ")" + status + R"(", "reason": ")" + reason +
           R"(", "execution_time": "2.10"}]}]})";
  };
  fs::create_directories(dir.file("flash"));
  fs::create_directories(dir.file("failed"));
  std::string flash = dir.write("flash/twister.json", twister("error", "Flash error"));
  CommandResult r = hwfarmctl(d, {"--json", "results", "publish", "--lease", id, "--name", "twister", flash});
  INFO(r.out << r.err);
  REQUIRE(r.status.code == 0);
  json::object run = json::parse(r.out).as_object();
  CHECK(run.at("harness") == "twister");
  CHECK(run.at("state") == "error");
  CHECK(ruleOf(run, "sample.basic.helloworld") == "twister flash error");
  std::string failed = dir.write("failed/twister.json", twister("failed", "Testsuite failed"));
  r = hwfarmctl(d, {"--json", "results", "publish", "--lease", id, "--name", "twister", failed});
  INFO(r.out << r.err);
  REQUIRE(r.status.code == 0);
  run = json::parse(r.out).as_object();
  CHECK(run.at("state") == "failed");
  CHECK(run.at("failure_class") == "test");
}

TEST_CASE("results publish: the operator's rules replace the defaults") {
  TempDir dir;
  // Only an error raised from the lab's own fixture module counts: a test
  // that names its exception SerialException does not.
  RunningDaemon d(dir, qemuFleet(dir.file("state"), 1) +
                           "\n[[results.infrastructure]]\nname = \"lab fixture\"\ndetail = \"lab_fixtures.py\"\n");
  std::string id = lease(d);
  std::string xml = runPytest(dir, "suite", kTests);
  CommandResult r = hwfarmctl(d, {"--json", "results", "publish", "--lease", id, xml});
  INFO(r.out << r.err);
  REQUIRE(r.status.code == 0);
  json::object run = json::parse(r.out).as_object();
  CHECK(ruleOf(run, "test_board.test_board_lost").empty());

  fs::create_directories(dir.file("lab"));
  dir.write("lab/lab_fixtures.py", "import pytest\n\n@pytest.fixture\ndef board():\n    raise OSError('port gone')\n");
  dir.write("lab/conftest.py", "from lab_fixtures import board\n");
  dir.write("lab/test_lab.py", "def test_board_lost(board):\n    pass\n");
  CommandResult py = runCommand({"/bin/sh", "-c",
                                 "cd \"$0\" && PYTHONPATH=. /usr/bin/python3 -m pytest -p no:cacheprovider "
                                 "--junitxml out/r.xml -q test_lab.py",
                                 dir.file("lab")},
                                {{"PYTHONDONTWRITEBYTECODE", "1"}}, std::chrono::seconds(60));
  INFO(py.out << py.err);
  r = hwfarmctl(d, {"--json", "results", "publish", "--lease", id, dir.file("lab/out/r.xml")});
  INFO(r.out << r.err);
  REQUIRE(r.status.code == 0);
  run = json::parse(r.out).as_object();
  CHECK(run.at("state") == "error");
  CHECK(ruleOf(run, "test_lab.test_board_lost") == "lab fixture");
}

TEST_CASE("results publish: a published run is pruned with the history like hwfarm's own") {
  TempDir dir;
  std::string run_id;
  {
    RunningDaemon d(dir, qemuFleet(dir.file("state"), 1));
    std::string id = lease(d);
    auto r = post(d, id, tarOf({{"results/r.xml", R"(<testsuite name="s"><testcase name="t"/></testsuite>)"}}));
    INFO(r.body);
    REQUIRE(r.status == 201);
    run_id = std::string(parsed(r).at("id").as_string());
    REQUIRE(fs::exists(dir.file("state/runs/" + run_id + "/results/r.xml")));
  }
  // Kept less than a second: older than that when hwfarmd starts again.
  std::this_thread::sleep_for(std::chrono::milliseconds(1200));
  RunningDaemon d(dir, qemuFleet(dir.file("state"), 1) + "\n[runs]\nhistory_days = 0.00001\n");
  CHECK_FALSE(fs::exists(dir.file("state/runs/" + run_id)));
  CHECK(d.get("/v1/runs/" + run_id).status == 404);
  CHECK(runsListed(d) == 0);
}

namespace {

// A publish on another thread, whose writes of summary.json are held (the
// daemon runs with the failsync preload holding them while `hold` exists);
// let go and joined at the end, whatever a check did meanwhile.
struct HeldPublish {
  std::string hold;
  hwfarm::cli::HttpResult answer;
  std::thread thread;
  HeldPublish(const RunningDaemon& d, std::string hold_file, const std::string& lease_id, const std::string& archive)
      : hold(std::move(hold_file)) {
    std::error_code ec;
    fs::remove(hold + ".held", ec); // (reached() waits for a new one)
    std::ofstream(hold).flush();
    thread = std::thread([this, &d, lease_id, archive] {
      try {
        answer = post(d, lease_id, archive, "?name=first");
      } catch (const std::exception& e) {
        answer.status = 0;
        answer.body = e.what();
      }
    });
  }
  // Whether the publish reached the held write within 30 s.
  bool reached() const {
    for (int i = 0; i < 3000; ++i) {
      if (fs::exists(hold + ".held")) return true;
      std::this_thread::sleep_for(10ms);
    }
    return false;
  }
  void release() {
    std::error_code ec;
    fs::remove(hold, ec);
  }
  void join() {
    release();
    if (thread.joinable()) thread.join();
  }
  HeldPublish(const HeldPublish&) = delete; // (its thread holds `this`)
  HeldPublish& operator=(const HeldPublish&) = delete;
  ~HeldPublish() { join(); }
};

// The environment of a daemon whose writes of a published run's
// summary.json the test can hold (HeldPublish): its files are being
// written, its row not yet stored.
std::map<std::string, std::string> holdingSummaries(const TempDir& dir) {
  return {{"LD_PRELOAD", FAILSYNC_PATH},
          {"HWFARM_HOLD_SYNC", dir.file("hold")},
          {"HWFARM_HOLD_SYNC_MATCH", "summary.json.tmp"}};
}

// An archive of a real pytest run's JUnit file with one passing test.
std::string passingResults(const TempDir& dir) {
  return tarOf({{"results/r.xml", readFile(runPytest(dir, "passing", "def test_pass():\n    pass\n"))}});
}

// runs/ while a publish is held: the archive taken from its request and
// the run's hidden folder being made, nothing else.
void checkHeldEntries(const TempDir& dir) {
  std::vector<std::string> entries = runsDir(dir);
  REQUIRE(entries.size() == 2);
  CHECK(entries[0].rfind(".building-run-", 0) == 0);
  CHECK(entries[1].rfind(".results-run-", 0) == 0);
}

} // namespace

TEST_CASE("results publish: a second publish on a lease while its first is written is refused 429 and goes through after") {
  TempDir dir;
  // Given a daemon whose writes of a published run's summary.json the test
  // can hold,
  RunningDaemon d(dir, qemuFleet(dir.file("state"), 1), holdingSummaries(dir));
  std::string id = lease(d);
  std::string archive = passingResults(dir);
  // when a first publish on the lease is held writing its files,
  HeldPublish first(d, dir.file("hold"), id, archive);
  REQUIRE(first.reached());
  // a second one on the same lease is refused, saying why,
  hwfarm::cli::HttpResult second = post(d, id, archive, "?name=second");
  INFO(second.body);
  CHECK(second.status == 429);
  json::value refused = parsed(second);
  CHECK(refused.at("error") == "too_many_runs");
  CHECK(refused.at("detail").as_string() == "lease " + id + " is publishing results already: retry once it is done");
  // and keeps nothing (what is there is the first one's);
  CHECK(runsListed(d) == 0);
  checkHeldEntries(dir);
  // the first one, let go, is answered,
  first.join();
  INFO(first.answer.body);
  REQUIRE(first.answer.status == 201);
  CHECK(parsed(first.answer).at("state") == "passed");
  // and then the second goes through.
  hwfarm::cli::HttpResult again = post(d, id, archive, "?name=second");
  INFO(again.body);
  CHECK(again.status == 201);
  CHECK(runsListed(d) == 2);
}

TEST_CASE("results publish: a kill while a published run is written leaves neither the run nor its folder after a restart") {
  TempDir dir;
  RunningDaemon d(dir, qemuFleet(dir.file("state"), 1), holdingSummaries(dir));
  std::string id = lease(d);
  std::string archive = passingResults(dir);
  // A publish held writing its files in their hidden folder, unanswered,
  HeldPublish held(d, dir.file("hold"), id, archive);
  REQUIRE(held.reached());
  checkHeldEntries(dir);
  // is cut short by a kill: its client gets no answer,
  d.killAndRestart();
  held.join();
  INFO(held.answer.body);
  CHECK(held.answer.status != 201);
  // and the restart removes the folder and lists no run.
  CHECK(runsDir(dir).empty());
  CHECK(runsListed(d) == 0);
  // The lease still publishes.
  hwfarm::cli::HttpResult again = post(d, id, archive, "?name=again");
  INFO(again.body);
  CHECK(again.status == 201);
  CHECK(runsListed(d) == 1);
}
