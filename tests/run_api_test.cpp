// Runs through a real hwfarmd: test images on leased simulated boards and on
// the QEMU reference, parsed, compared, with their artifacts; cancel, kill -9
// mid-run, shard and each modes (issue 11).
#include <catch2/catch.hpp>
#include <dirent.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <map>
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

std::string firmware(const std::string& variant) {
  return std::string(HWFARM_FIRMWARE_DIR) + "/hwfarm-" + variant + ".elf";
}

json::value parsed(const hwfarm::cli::HttpResult& r) { return json::parse(r.body); }

std::string leaseBoards(const RunningDaemon& d, int count) {
  auto r = d.request("POST", "/v1/leases",
                     R"({"selector":{"type":"mps2-an385"},"count":)" + std::to_string(count) + R"(,"context":"manual"})",
                     "");
  REQUIRE(r.status == 201);
  return std::string(parsed(r).at("id").as_string());
}

// Uploads `variant`'s image into the lease's store; its stored name.
std::string uploadImage(const RunningDaemon& d, const std::string& lease, const std::string& variant) {
  auto r = hwfarm::cli::HttpClient(d.url())
               .request("POST", "/v1/leases/" + lease + "/images?name=" + variant + ".elf", readFile(firmware(variant)),
                        "", "application/octet-stream");
  INFO(r.body);
  REQUIRE(r.status == 201);
  return std::string(parsed(r).at("image").as_string());
}

std::string startRun(const RunningDaemon& d, const std::string& lease, const std::string& body) {
  auto r = d.request("POST", "/v1/leases/" + lease + "/runs", body, "");
  INFO(r.body);
  REQUIRE(r.status == 201);
  return std::string(parsed(r).at("id").as_string());
}

std::string images(const std::vector<std::pair<std::string, std::string>>& list) {
  std::string out = "[";
  for (const auto& [stored, name] : list)
    out += (out.size() > 1 ? "," : "") + std::string(R"({"image":")") + stored + R"(","name":")" + name + R"("})";
  return out + "]";
}

// The run's record once it is no longer running (or after 90 s).
json::object waitRun(const RunningDaemon& d, const std::string& id) {
  auto deadline = std::chrono::steady_clock::now() + 90s;
  json::object run;
  while (std::chrono::steady_clock::now() < deadline) {
    auto r = d.get("/v1/runs/" + id);
    REQUIRE(r.status == 200);
    run = parsed(r).as_object();
    if (run.at("state").as_string() != "running") return run;
    std::this_thread::sleep_for(50ms);
  }
  FAIL("run " << id << " still running: " << json::serialize(run));
  return run;
}

// Uploads `variant`'s image, runs it on the lease with `options` (more
// members of the request, each after a comma) and returns the record once
// the run ended.
json::object runVariant(const RunningDaemon& d, const std::string& lease, const std::string& variant,
                        const std::string& options = "") {
  std::string image = uploadImage(d, lease, variant);
  return waitRun(d, startRun(d, lease, R"({"images":)" + images({{image, variant + ".elf"}}) + options + "}"));
}

int qemuProcesses(const std::string& needle) {
  int n = 0;
  for (const auto& e : fs::directory_iterator("/proc")) {
    std::string name = e.path().filename().string();
    if (!std::all_of(name.begin(), name.end(), ::isdigit)) continue;
    std::string cmd = readFile(e.path().string() + "/cmdline");
    std::string program = cmd.substr(0, cmd.find('\0'));
    if (program.size() >= 15 && program.compare(program.size() - 15, 15, "qemu-system-arm") == 0 &&
        cmd.find(needle) != std::string::npos)
      ++n;
  }
  return n;
}

std::string sh(const std::string& command) {
  TempDir out;
  int rc = std::system((command + " >" + out.file("o") + " 2>&1").c_str());
  return std::to_string(WEXITSTATUS(rc)) + ":" + readFile(out.file("o"));
}

} // namespace

TEST_CASE("a run of the pass image on two boards of a type and the QEMU reference passes, with its artifacts") {
  TempDir dir;
  RunningDaemon d(dir, qemuFleet(dir.file("state"), 2));
  std::string lease = leaseBoards(d, 2);
  std::string image = uploadImage(d, lease, "pass");
  std::string id = startRun(d, lease, R"({"images":)" + images({{image, "pass.elf"}}) + R"(,"mode":"each"})");
  json::object run = waitRun(d, id);
  INFO(json::serialize(run));
  CHECK(run.at("state").as_string() == "passed");
  // Two targets (named by board type, _0 and _1) and the reference.
  REQUIRE(run.at("attempts").as_array().size() == 3);
  std::set<std::string> targets;
  for (const auto& a : run.at("attempts").as_array()) {
    targets.insert(std::string(a.at("target").as_string()));
    CHECK(a.at("outcome").as_string() == "pass");
  }
  CHECK(targets == std::set<std::string>{"mps2_an385_0", "mps2_an385_1", "qemu_ref"});
  std::string out = dir.file("state/runs/" + id);
  for (const char* f : {"summary.json", "junit.xml", "golden_results__mps2_an385_0.json",
                        "golden_results__mps2_an385_1.json", "traces/pass__mps2_an385_0.txt",
                        "traces/pass__mps2_an385_1.txt", "traces/pass__qemu_ref.txt",
                        "logs/flash__pass__mps2_an385_0.txt", "outputs/pass__mps2_an385_0/square.y.npy",
                        "outputs/pass__qemu_ref/ramp.y.npy"})
    CHECK(fs::exists(out + "/" + f));
  CHECK(readFile(out + "/traces/pass__qemu_ref.txt").find("HWFARM END status=0") != std::string::npos);
  // golden_results: ttrt's fields, the reference's values on the board.
  json::value golden = json::parse(readFile(out + "/golden_results__mps2_an385_1.json"));
  CHECK(golden.at("square.y").at("actual_pcc").to_number<double>() == 1.0);
  CHECK(golden.at("square.y").at("allclose").as_bool());
  CHECK(golden.at("ramp.y").at("dtype").as_string() == "i32");
  // junit.xml is valid for Jenkins, and served to agents that are not here.
  CHECK(sh("xmllint --noout --schema " + std::string(HWFARM_SOURCE_DIR) + "/tests/junit-10-contract.xsd " + out +
           "/junit.xml") == "0:" + out + "/junit.xml validates\n");
  auto served = d.get("/v1/runs/" + id + "/artifacts/junit.xml");
  CHECK(served.status == 200);
  CHECK(served.body == readFile(out + "/junit.xml"));
  // numpy reads the outputs as the firmware printed them.
  CHECK(sh("/usr/bin/python3 -c \"import numpy; a = numpy.load('" + out +
           "/outputs/pass__mps2_an385_0/ramp.y.npy'); print(a.dtype, list(a))\"") == "0:int32 [0, 1, 2, 3]\n");
  // Nothing of the run keeps running, and the run is listed.
  CHECK(qemuProcesses(out) == 0);
  auto list = parsed(d.get("/v1/runs")).at("runs").as_array();
  REQUIRE(list.size() == 1);
  CHECK(list[0].at("id").as_string() == id);
  // /metrics counts it: one passed run, two passing attempts (the reference is not judged).
  std::string metrics = d.get("/metrics").body;
  CHECK(metrics.find("hwfarm_runs_total{agent=\"") != std::string::npos);
  CHECK(metrics.find(",state=\"passed\"} 1\n") != std::string::npos);
  CHECK(metrics.find(",class=\"none\"} 2\n") != std::string::npos);
  CHECK(metrics.find("hwfarm_runs_running{agent=") != std::string::npos);
}

TEST_CASE("a failing case fails the run as a test failure, and a hang is a test failure at the deadline") {
  TempDir dir;
  RunningDaemon d(dir, qemuFleet(dir.file("state"), 1));
  std::string lease = leaseBoards(d, 1);
  json::object run = runVariant(d, lease, "fail");
  std::string id(run.at("id").as_string());
  INFO(json::serialize(run));
  CHECK(run.at("state").as_string() == "failed");
  CHECK(run.at("failure_class").as_string() == "test");
  std::string junit = readFile(dir.file("state/runs/" + id + "/junit.xml"));
  CHECK(junit.find("<failure type=\"test\" message=\"FAIL: expected 3 got 4\">") != std::string::npos);

  json::object h = runVariant(d, lease, "hang", R"(,"deadline_s":1.5)");
  INFO(json::serialize(h));
  CHECK(h.at("state").as_string() == "failed");
  bool said = false;
  for (const auto& a : h.at("attempts").as_array())
    if (!a.at("reference").as_bool())
      said = a.at("reason").as_string() == "BEGIN but no END before the deadline (the firmware hung)";
  CHECK(said);
  CHECK(qemuProcesses(dir.file("state")) == 0);
}

TEST_CASE("a shard run spreads its images over the boards, each image once") {
  TempDir dir;
  RunningDaemon d(dir, qemuFleet(dir.file("state"), 2));
  std::string lease = leaseBoards(d, 2);
  std::string pass = uploadImage(d, lease, "pass");
  std::vector<std::pair<std::string, std::string>> list;
  for (int i = 0; i < 4; ++i) list.emplace_back(pass, "img" + std::to_string(i) + ".elf");
  std::string id = startRun(d, lease, R"({"images":)" + images(list) + R"(,"reference":"none"})");
  json::object run = waitRun(d, id);
  INFO(json::serialize(run));
  CHECK(run.at("state").as_string() == "passed");
  std::map<std::string, int> per_board;
  std::set<std::string> seen;
  for (const auto& a : run.at("attempts").as_array()) {
    ++per_board[std::string(a.at("board").as_string())];
    seen.insert(std::string(a.at("image").as_string()));
  }
  CHECK(seen == std::set<std::string>{"img0", "img1", "img2", "img3"});
  CHECK(per_board.size() == 2); // both boards took images
  CHECK(per_board.begin()->second + per_board.rbegin()->second == 4);
  CHECK(fs::exists(dir.file("state/runs/" + id + "/golden_results__mps2_an385_0.json")));
}

TEST_CASE("bad run requests are 4xx with a reason and start nothing") {
  TempDir dir;
  RunningDaemon d(dir, qemuFleet(dir.file("state"), 1));
  std::string lease = leaseBoards(d, 1);
  std::string pass = uploadImage(d, lease, "pass");
  struct Case {
    std::string body;
    int status;
    std::string detail;
  };
  std::vector<Case> cases{
      {R"({"images":[]})", 400, "images: expected 1 to 1000 images"},
      {R"({"images":[{"image":"../../etc/passwd"}]})", 400, "images: ../../etc/passwd is not an uploaded image (POST /v1/leases/" + lease + "/images first)"},
      {R"({"images":[{"image":")" + std::string(64, 'a') + R"(.elf"}]})", 400,
       "images: " + std::string(64, 'a') + ".elf was not uploaded to lease " + lease},
      {R"({"images":)" + images({{pass, "p"}}) + R"(,"mode":"all"})", 400, "mode: expected \"shard\" or \"each\""},
      {R"({"images":)" + images({{pass, "p"}}) + R"(,"boards":["sim-9"]})", 400,
       "board sim-9 is not a present board of lease " + lease},
      {R"({"images":)" + images({{pass, "p"}}) + R"(,"deadline_s":0})", 400,
       "deadline_s: expected a number of seconds in (0, 86400]"},
      {R"({"images":)" + images({{pass, "p"}}) + R"(,"colour":1})", 400,
       "unknown key colour (images, mode, reference, boards, deadline_s, thresholds, suite)"},
      {R"({"images":)" + images({{pass, "p"}}) + R"(,"thresholds":[{"expected_pcc":2}]})", 400,
       "thresholds[0].expected_pcc: expected image, case, output (names), expected_pcc (-1 to 1), atol, rtol (>= 0), "
       "equal_nan, require_allclose, ignore (true or false)"},
  };
  for (const auto& c : cases) {
    auto r = d.request("POST", "/v1/leases/" + lease + "/runs", c.body, "");
    INFO(c.body << " -> " << r.body);
    CHECK(r.status == c.status);
    CHECK(parsed(r).at("detail").as_string() == c.detail);
  }
  CHECK(d.request("POST", "/v1/leases/nope/runs", "{}", "").status == 404);
  CHECK(parsed(d.get("/v1/runs")).at("runs").as_array().empty());
  CHECK(d.get("/v1/runs/run-nope").status == 404);
  CHECK(d.get("/v1/runs/x/artifacts/summary.json").status == 404);
}

TEST_CASE("a cancelled run leaves no QEMU behind, and a run killed with hwfarmd shows interrupted after the restart") {
  TempDir dir;
  RunningDaemon d(dir, qemuFleet(dir.file("state"), 1));
  std::string lease = leaseBoards(d, 1);
  std::string hang = uploadImage(d, lease, "hang");
  std::string id = startRun(d, lease, R"({"images":)" + images({{hang, "hang.elf"}}) + R"(,"deadline_s":600})");
  // Wait until the board and the reference both run their QEMU.
  for (int i = 0; i < 500 && qemuProcesses(dir.file("state")) < 2; ++i) std::this_thread::sleep_for(10ms);
  REQUIRE(qemuProcesses(dir.file("state")) == 2);
  auto cancelled = d.request("DELETE", "/v1/runs/" + id, "", "");
  REQUIRE(cancelled.status == 200);
  json::object run = waitRun(d, id);
  CHECK(run.at("state").as_string() == "cancelled");
  for (int i = 0; i < 500 && qemuProcesses(dir.file("state")) > 0; ++i) std::this_thread::sleep_for(10ms);
  CHECK(qemuProcesses(dir.file("state")) == 0);
  CHECK(d.request("DELETE", "/v1/runs/" + id, "", "").status == 409);
  // kill -9 mid-run:
  std::string second = startRun(d, lease, R"({"images":)" + images({{hang, "hang.elf"}}) + R"(,"deadline_s":600})");
  for (int i = 0; i < 500 && qemuProcesses(dir.file("state")) < 2; ++i) std::this_thread::sleep_for(10ms);
  d.killAndRestart();
  json::object after = parsed(d.get("/v1/runs/" + second)).as_object();
  CHECK(after.at("state").as_string() == "interrupted");
  CHECK(after.at("failure_class").as_string() == "infrastructure");
  CHECK(after.at("reason").as_string() ==
        "hwfarmd stopped during the run (restarted or killed); the run did not finish");
}

TEST_CASE("hwfarmctl run uploads the images, prints each verdict, fetches the artifacts and exits with the verdict") {
  TempDir dir;
  RunningDaemon d(dir, qemuFleet(dir.file("state"), 2));
  std::string lease = leaseBoards(d, 2);
  CommandResult passed = runCommand({HWFARMCTL_PATH, "--url", d.url(), "run", "--lease", lease, "--mode", "each",
                                     "--out", dir.file("out"), firmware("pass")},
                                    {}, 120s);
  INFO(passed.out << passed.err);
  REQUIRE(passed.status.code == 0);
  CHECK(passed.out.find("hwfarm_pass on mps2_an385_0 (sim-") != std::string::npos);
  CHECK(passed.out.find("hwfarm_pass on qemu_ref: pass\n") != std::string::npos);
  CHECK(passed.out.find(": passed\n") != std::string::npos);
  CHECK(fs::exists(dir.file("out/junit.xml")));
  CHECK(fs::exists(dir.file("out/summary.json")));
  CHECK(fs::exists(dir.file("out/traces/hwfarm_pass__mps2_an385_0.txt")));
  CHECK(fs::exists(dir.file("out/traces/hwfarm_pass__mps2_an385_1.txt")));
  CHECK(json::parse(readFile(dir.file("out/summary.json"))).at("state").as_string() == "passed");

  // A failing image exits 10; the lease comes from $HWFARM_LEASE_ID as in `lease run`.
  CommandResult failed =
      runCommand({HWFARMCTL_PATH, "--url", d.url(), "run", "--board", "sim-0", firmware("fail")},
                 {{"HWFARM_LEASE_ID", lease}}, 120s);
  INFO(failed.out << failed.err);
  CHECK(failed.status.code == 10);
  CHECK(failed.out.find("fail: ramp: FAIL: expected 3 got 4") != std::string::npos);
  // A thresholds file lets the bad image pass; a broken one is a usage error naming its place.
  std::string rules = dir.write("thresholds.toml", "[[threshold]]\ncase = \"square\"\noutput = \"y\"\nexpected_pcc = 0.4\n");
  CommandResult loose = runCommand({HWFARMCTL_PATH, "--url", d.url(), "run", "--lease", lease, "--board", "sim-0",
                                    "--thresholds", rules, firmware("bad")},
                                   {}, 120s);
  INFO(loose.out << loose.err);
  CHECK(loose.status.code == 0);
  std::string broken = dir.write("broken.toml", "[[threshold]]\nexpected_pcc = \n");
  CommandResult bad_file = runCommand({HWFARMCTL_PATH, "--url", d.url(), "run", "--lease", lease, "--thresholds",
                                       broken, firmware("bad")});
  CHECK(bad_file.status.code == 2);
  CHECK(bad_file.err.rfind("hwfarmctl run: --thresholds: " + broken + ":2:", 0) == 0);
  // No lease at all is a usage error.
  CHECK(runCommand({HWFARMCTL_PATH, "--url", d.url(), "run", firmware("pass")}, {{"HWFARM_LEASE_ID", ""}}).status.code ==
        2);
}

TEST_CASE("a [[reference]] names the simulator a board type is compared with") {
  TempDir dir;
  // The test firmware (Cortex-M3 code) also runs on the Cortex-M4 AN386.
  RunningDaemon d(dir, qemuFleet(dir.file("state"), 1) +
                           "[[reference]]\ntype = \"mps2-an385\"\nmachine = \"mps2-an386\"\n");
  std::string lease = leaseBoards(d, 1);
  json::object run = runVariant(d, lease, "pass");
  INFO(json::serialize(run));
  CHECK(run.at("state").as_string() == "passed");
  bool seen = false;
  for (const auto& a : run.at("attempts").as_array())
    if (a.at("reference").as_bool()) seen = a.at("board").as_string() == "qemu mps2-an386";
  CHECK(seen);
}

TEST_CASE("runs older than runs.history_days are removed with their artifacts at start-up") {
  TempDir dir;
  std::string state = dir.file("state");
  // Given two ended runs on disk, one ended 40 days ago and one an hour ago,
  fs::create_directories(state + "/runs/run-old");
  fs::create_directories(state + "/runs/run-new/traces");
  int64_t now = std::chrono::duration_cast<std::chrono::milliseconds>(
                    std::chrono::system_clock::now().time_since_epoch()).count();
  auto record = [](const std::string& id, int64_t ended) {
    return R"({"id":")" + id + R"(","lease_id":"l","state":"passed","created_ms":)" + std::to_string(ended - 1000) +
           R"(,"ended_ms":)" + std::to_string(ended) + "}";
  };
  dir.write("state/runs/run-old/summary.json", record("run-old", now - 40LL * 86400000));
  dir.write("state/runs/run-new/summary.json", record("run-new", now - 3600000));
  dir.write("state/runs/run-new/traces/x.txt", "kept");
  // when hwfarmd starts (history_days = 30 by default),
  RunningDaemon d(dir, qemuFleet(state, 1));
  // the old one is gone, the recent one is listed and kept.
  CHECK_FALSE(fs::exists(state + "/runs/run-old"));
  CHECK(readFile(state + "/runs/run-new/traces/x.txt") == "kept");
  auto list = parsed(d.get("/v1/runs")).at("runs").as_array();
  REQUIRE(list.size() == 1);
  CHECK(list[0].at("id").as_string() == "run-new");
  CHECK(d.get("/v1/runs/run-old").status == 404);
}

TEST_CASE("outputs that drift from the reference pass or fail by their PCC, and a corrupt record is infrastructure") {
  TempDir dir;
  auto daemon = std::make_unique<RunningDaemon>(dir, qemuFleet(dir.file("state"), 1));
  RunningDaemon& d = *daemon;
  std::string lease = leaseBoards(d, 1);
  auto verdictOf = [&](const std::string& variant) {
    json::object run = runVariant(d, lease, variant);
    json::object target;
    for (const auto& a : run.at("attempts").as_array())
      if (!a.at("reference").as_bool()) target = a.as_object();
    return std::make_pair(run, target);
  };
  // slight: PCC about 0.995 against the reference, above the default 0.99.
  auto [slight, st] = verdictOf("slight");
  INFO(json::serialize(slight));
  CHECK(slight.at("state").as_string() == "passed");
  std::string golden = readFile(dir.file("state/runs/" + std::string(slight.at("id").as_string()) +
                                         "/golden_results__mps2_an385.json"));
  double pcc = json::parse(golden).at("square.y").at("actual_pcc").to_number<double>();
  CHECK(pcc > 0.994);
  CHECK(pcc < 0.996);
  CHECK_FALSE(json::parse(golden).at("square.y").at("allclose").as_bool());
  // bad: PCC about 0.5: the case fails, a test failure.
  auto [bad, bt] = verdictOf("bad");
  INFO(json::serialize(bad));
  CHECK(bad.at("state").as_string() == "failed");
  CHECK(bt.at("failure_class").as_string() == "test");
  CHECK(std::string(bt.at("reason").as_string()).rfind("square.y: actual_pcc 0.4986", 0) == 0);
  // crc: a record corrupted on the wire is the lab's failure, never compared.
  auto [crc, ct] = verdictOf("crc");
  INFO(json::serialize(crc));
  CHECK(crc.at("state").as_string() == "error");
  CHECK(ct.at("failure_class").as_string() == "infrastructure");
  CHECK(std::string(ct.at("reason").as_string()).find("CRC mismatch") != std::string::npos);
  // That infrastructure failure is an event against the board, in the
  // database (for the tier SLA); the test failures are not.
  daemon.reset();
  std::string events = sh("/usr/bin/python3 -c \"import sqlite3; c = sqlite3.connect('" + dir.file("state/hwfarm.db") +
                          "'); print([(b, d[:40]) for b, d in c.execute(\\\"SELECT board, detail FROM events WHERE "
                          "kind = 'infra_failure'\\\")])\"");
  CHECK(events.rfind("0:[('sim-0', 'run run-", 0) == 0);
  CHECK(events.find("), (") == std::string::npos); // one event
}

TEST_CASE("after an image that hangs until its deadline, the board runs the next image") {
  TempDir dir;
  RunningDaemon d(dir, qemuFleet(dir.file("state"), 1));
  std::string lease = leaseBoards(d, 1);
  std::string hang = uploadImage(d, lease, "hang");
  std::string pass = uploadImage(d, lease, "pass");
  std::string id = startRun(d, lease, R"({"images":)" + images({{hang, "hang.elf"}, {pass, "pass.elf"}}) +
                                          R"(,"deadline_s":1.5})");
  json::object run = waitRun(d, id);
  INFO(json::serialize(run));
  CHECK(run.at("state").as_string() == "failed"); // the hang is the firmware's failure, nothing else failed
  std::map<std::string, std::string> outcome; // "<image>@<target>" -> outcome
  for (const auto& a : run.at("attempts").as_array())
    outcome[std::string(a.at("image").as_string()) + "@" + std::string(a.at("target").as_string())] =
        std::string(a.at("outcome").as_string());
  CHECK(outcome == std::map<std::string, std::string>{{"hang@mps2_an385", "fail"},
                                                      {"hang@qemu_ref", "fail"},
                                                      {"pass@mps2_an385", "pass"},
                                                      {"pass@qemu_ref", "pass"}});
  CHECK(qemuProcesses(dir.file("state")) == 0);
}

TEST_CASE("a run's thresholds set the PCC an output needs, make an output exact, or leave it out") {
  TempDir dir;
  RunningDaemon d(dir, qemuFleet(dir.file("state"), 1));
  std::string lease = leaseBoards(d, 1);
  auto stateOf = [&](const std::string& variant, const std::string& thresholds) {
    return std::string(runVariant(d, lease, variant, R"(,"thresholds":)" + thresholds).at("state").as_string());
  };
  // bad (PCC about 0.5) passes where square.y needs only 0.4,
  CHECK(stateOf("bad", R"([{"case":"square","output":"y","expected_pcc":0.4}])") == "passed");
  // and where it is left out;
  CHECK(stateOf("bad", R"([{"output":"y","case":"square","ignore":true}])") == "passed");
  // slight (PCC 0.995, not allclose) fails once its outputs must match.
  CHECK(stateOf("slight", R"([{"require_allclose":true}])") == "failed");
  CHECK(stateOf("slight", R"([])") == "passed");
}
