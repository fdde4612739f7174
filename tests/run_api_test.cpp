// Runs through a real hwfarmd: test images on leased simulated boards and on
// the QEMU reference, parsed, compared, with their artifacts; cancel, kill -9
// mid-run. The run's decisions (shard and each, deadlines, retries, cancel
// in every phase) are stories of the plan in run_plan_test, without QEMU.
#include <catch2/catch.hpp>
#include <dirent.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <thread>

#include <boost/json.hpp>

#include "daemon/cli/http_client.h"
#include "tests/support/daemon_harness.h"
#include "tests/support/process.h"
#include "tests/support/firmware.h"
#include "tests/support/small_disk.h"
#include "tests/support/wait.h"

using namespace hwfarm::test;
using namespace std::chrono_literals;
namespace json = boost::json;
namespace fs = std::filesystem;

namespace {

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

// The run's record once it has ended (its event stream's end line).
json::object waitRun(const RunningDaemon& d, const std::string& id) {
  return json::parse(d.recordAtEnd(id)).as_object();
}

// Uploads `variant`'s image, runs it on the lease with `options` (more
// members of the request, each after a comma) and returns the record once
// the run ended.
json::object runVariant(const RunningDaemon& d, const std::string& lease, const std::string& variant,
                        const std::string& options = "") {
  std::string image = uploadImage(d, lease, variant);
  return waitRun(d, startRun(d, lease, R"({"images":)" + images({{image, variant + ".elf"}}) + options + "}"));
}

// QEMU processes (not their sandboxes) whose command line mentions `needle`.
std::vector<pid_t> qemuPids(const std::string& needle) {
  std::vector<pid_t> pids;
  for (const auto& e : fs::directory_iterator("/proc")) {
    std::string name = e.path().filename().string();
    if (!std::all_of(name.begin(), name.end(), ::isdigit)) continue;
    std::string cmd = readFile(e.path().string() + "/cmdline");
    std::string program = cmd.substr(0, cmd.find('\0'));
    if (program.size() >= 15 && program.compare(program.size() - 15, 15, "qemu-system-arm") == 0 &&
        cmd.find(needle) != std::string::npos)
      pids.push_back(std::stoi(name));
  }
  return pids;
}

int qemuProcesses(const std::string& needle) { return static_cast<int>(qemuPids(needle).size()); }

// Waits (10 s at most) until the QEMU processes whose command line holds
// `needle` are as many as `holds` wants: processes of their own, not the
// daemon's timers, so they are looked at every 10 ms.
bool qemuCount(const std::string& needle, const std::function<bool(int)>& holds) {
  waitWhile([&] { return !holds(qemuProcesses(needle)); }, 10s);
  return holds(qemuProcesses(needle));
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
  CHECK(qemuCount(out, [](int n) { return n == 0; })); // stopped as the run ends, or soon after
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
  // The reference fails the same case: every attempt is the firmware's,
  // none the lab's, and the board's verdict is its own failure.
  for (const auto& a : run.at("attempts").as_array()) {
    CHECK(a.at("failure_class").as_string() == "test");
    CHECK(a.at("reason").as_string() == "ramp: FAIL: expected 3 got 4");
  }

  json::object h = runVariant(d, lease, "hang", R"(,"deadline_s":1.5)");
  INFO(json::serialize(h));
  CHECK(h.at("state").as_string() == "failed");
  bool said = false;
  for (const auto& a : h.at("attempts").as_array())
    if (!a.at("reference").as_bool())
      said = a.at("reason").as_string() == "BEGIN but no END before the deadline (the firmware hung)";
  CHECK(said);
  CHECK(qemuCount(dir.file("state"), [](int n) { return n == 0; })); // stopped as the run ends, or soon after
}

TEST_CASE("verdict: a reference simulator killed mid-run is the lab's failure with the signal, counted once by the SLA, through hwfarmd") {
  TempDir dir;
  RunningDaemon d(dir, qemuFleet(dir.file("state"), 1));
  std::string lease = leaseBoards(d, 1);
  std::string hang = uploadImage(d, lease, "hang");
  std::string id = startRun(d, lease, R"({"images":)" + images({{hang, "hang.elf"}}) + R"(,"deadline_s":5})");
  // Given the reference's QEMU running the image (its work dir is the
  // run's place among the simulators'), and its console connected,
  std::vector<pid_t> reference;
  for (int i = 0; i < 2000 && (reference.size() != 1 || !sandboxSocketConnected(dir.path(), "/ref.uart")); ++i) {
    reference = qemuPids(dir.file("state/simulators/" + id + "-"));
    std::this_thread::sleep_for(10ms);
  }
  REQUIRE(reference.size() == 1);
  REQUIRE(sandboxSocketConnected(dir.path(), "/ref.uart"));
  // when it is killed from outside,
  REQUIRE(::kill(reference[0], SIGKILL) == 0);
  // the reference's attempt says so, as the lab's failure.
  json::object run = waitRun(d, id);
  INFO(json::serialize(run));
  bool said = false;
  for (const auto& a : run.at("attempts").as_array())
    if (a.at("reference").as_bool()) {
      CHECK(a.at("reason").as_string() == "the simulator was killed by signal 9 (Killed)");
      CHECK(a.at("failure_class").as_string() == "infrastructure");
      said = true;
    }
  CHECK(said);
  // The SLA counts it, once, in its ratio (a lab fault still counts,
  // though the target hung on its own), and against no board: no incident.
  json::value sla = json::parse(d.get("/v1/sla").body);
  INFO(json::serialize(sla));
  CHECK(sla.at("ratio").at("runs").as_int64() == 1);
  CHECK(sla.at("ratio").at("infra_failures").as_int64() == 1);
  CHECK(sla.at("incidents").as_array().empty());
}

TEST_CASE("hwfarmd killed while a run's reference simulator and target run leaves nothing running") {
  int sig = GENERATE(SIGKILL, SIGABRT);
  TempDir dir;
  RunningDaemon d(dir, qemuFleet(dir.file("state"), 1));
  std::string lease = leaseBoards(d, 1);
  std::string hang = uploadImage(d, lease, "hang");
  startRun(d, lease, R"({"images":)" + images({{hang, "hang.elf"}}) + R"(,"deadline_s":600})");
  // Given a run whose reference simulator (started on the run service's
  // thread) and target board (on the board's) both run QEMU,
  waitWhile([&] { return qemuProcesses(dir.file("state")) < 2; }, 10s);
  REQUIRE(qemuProcesses(dir.file("state")) == 2);
  // when hwfarmd dies by SIGKILL or SIGABRT,
  d.process().signal(sig);
  auto ended = d.process().wait(10s);
  REQUIRE(ended);
  REQUIRE(ended->code == sig);
  // nothing of it is left running: no QEMU, no sandbox, no reaper.
  std::vector<std::string> left = waitForNoProcessUnder(dir.path(), 15s);
  std::string names;
  for (const auto& p : left) names += p + "\n";
  INFO("signal " << sig << "; still running:\n" << names);
  REQUIRE(left.empty());
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
       "target sim-9 is neither a present board of lease " + lease + ", a board type of it, nor \"qemu\""},
      {R"({"images":)" + images({{pass, "p"}}) + R"(,"targets":["mps2-an385","mps2-an385"]})", 400,
       "the targets name board type mps2-an385 more often than lease " + lease + " holds boards of it (1)"},
      {R"({"images":)" + images({{pass, "p"}}) + R"(,"targets":["sim-0","sim-0"]})", 400, "board sim-0 is listed twice"},
      {R"({"images":)" + images({{pass, "p"}}) + R"(,"targets":["qemu","qemu"]})", 400,
       "the simulator target \"qemu\" is listed twice"},
      {R"({"images":)" + images({{pass, "p"}}) + R"(,"targets":["sim-0"],"boards":["sim-0"]})", 400,
       "targets: give \"targets\" or \"boards\", not both"},
      {R"({"images":)" + images({{pass, "p"}}) + R"(,"targets":[7]})", 400,
       "targets: expected board names, board types or \"qemu\""},
      {R"({"images":)" + images({{pass, "p"}}) + R"(,"retry":"yes"})", 400, "retry: expected true or false"},
      {R"({"images":)" + images({{pass, "p"}}) + R"(,"deadline_s":0})", 400,
       "deadline_s: expected a number of seconds in (0, 3600] (this lab's runs.max_deadline_s)"},
      {R"({"images":)" + images({{pass, "p"}}) + R"(,"deadline_s":3600.5})", 400,
       "deadline_s: expected a number of seconds in (0, 3600] (this lab's runs.max_deadline_s)"},
      {R"({"images":)" + images({{pass, "p"}}) + R"(,"commit":"a/b"})", 400,
       "commit: expected 1 to 128 bytes without \"/\" or control characters"},
      {R"({"images":)" + images({{pass, "p"}}) + R"(,"colour":1})", 400,
       "unknown key colour (images, mode, reference, targets, deadline_s, thresholds, retry, suite, commit)"},
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
  REQUIRE(qemuCount(dir.file("state"), [](int n) { return n >= 2; }));
  REQUIRE(qemuProcesses(dir.file("state")) == 2);
  auto cancelled = d.request("DELETE", "/v1/runs/" + id, "", "");
  REQUIRE(cancelled.status == 200);
  json::object run = waitRun(d, id);
  CHECK(run.at("state").as_string() == "cancelled");
  CHECK(qemuCount(dir.file("state"), [](int n) { return n == 0; }));
  CHECK(d.request("DELETE", "/v1/runs/" + id, "", "").status == 409);
  // kill -9 mid-run:
  std::string second = startRun(d, lease, R"({"images":)" + images({{hang, "hang.elf"}}) + R"(,"deadline_s":600})");
  REQUIRE(qemuCount(dir.file("state"), [](int n) { return n >= 2; }));
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

TEST_CASE("names of 250 bytes, legal in the protocol, give artifact files under 255 bytes that hwfarmctl fetches") {
  TempDir dir;
  RunningDaemon d(dir, qemuFleet(dir.file("state"), 1));
  std::string lease = leaseBoards(d, 1);
  CommandResult ran = runCommand(
      {HWFARMCTL_PATH, "--url", d.url(), "run", "--lease", lease, "--out", dir.file("out"), firmware("longname")}, {},
      120s);
  INFO(ran.out << ran.err);
  CHECK(ran.status.code == 0);
  CHECK(ran.out.find(": passed\n") != std::string::npos);
  CHECK(ran.err.empty());
  // Every artifact the record lists exists on the lab and was fetched, and
  // no file name is longer than a file system allows.
  auto list = parsed(d.get("/v1/runs")).at("runs").as_array();
  REQUIRE(list.size() == 1);
  json::object run = parsed(d.get("/v1/runs/" + std::string(list[0].at("id").as_string()))).as_object();
  size_t outputs = 0;
  for (const auto& item : run.at("artifacts").as_array()) {
    std::string path(item.as_string());
    INFO(path);
    CHECK(fs::exists(dir.file("out/" + path)));
    CHECK(fs::path(path).filename().string().size() < 255);
    if (path.find("case_abcdefghij") != std::string::npos) ++outputs;
  }
  CHECK(outputs == 2); // the board's output and the reference's
  // The golden results name the output in full.
  CHECK(readFile(dir.file("out/golden_results__mps2_an385.json")).find("out_abcdefghij") != std::string::npos);
}

TEST_CASE("one lease's hanging images hold only their share of the simulators: another lease's run passes meanwhile") {
  // Given a lab of two simulators (at most one per lease, the default)
  TempDir dir;
  RunningDaemon d(dir, qemuFleet(dir.file("state"), 2));
  std::string hostile = leaseBoards(d, 1), normal = leaseBoards(d, 1);
  // When one lease runs two images that hang until a long deadline
  std::string hang = uploadImage(d, hostile, "hang");
  std::string stuck = startRun(d, hostile,
                               R"({"images":)" + images({{hang, "h1.elf"}, {hang, "h2.elf"}}) + R"(,"deadline_s":300})");
  auto references = [&](const std::string& phase) {
    int n = 0;
    json::value record = parsed(d.get("/v1/runs/" + stuck));
    for (const auto& a : record.at("attempts").as_array())
      n += a.at("target").as_string() == "qemu_ref" && a.at("phase").as_string() == phase;
    return n;
  };
  for (int i = 0; i < 1000 && !(references("running") == 1 && references("waiting") == 1); ++i)
    std::this_thread::sleep_for(10ms);
  // Then it holds one simulator, and its second reference waits for it
  CHECK(references("running") == 1);
  CHECK(references("waiting") == 1);
  // When another lease runs a passing image with its reference
  json::object run = runVariant(d, normal, "pass");
  // Then that run got the free simulator and passed while the hanging run goes on
  INFO(json::serialize(run));
  CHECK(run.at("state").as_string() == "passed");
  CHECK(parsed(d.get("/v1/runs/" + stuck)).at("state").as_string() == "running");
  CHECK(references("waiting") == 1);
  // And a cancel ends the hanging run at once, its waiting reference never started
  REQUIRE(d.request("DELETE", "/v1/runs/" + stuck, "", "").status == 200);
  json::object ended = waitRun(d, stuck);
  CHECK(ended.at("state").as_string() == "cancelled");
  CHECK(qemuCount(dir.file("state"), [](int n) { return n == 0; }));
}

TEST_CASE("a run's references together run at most runs.max_simulator_s: past it they stop, the run's failure") {
  // Given a lab that gives a run 3 s of simulator time
  TempDir dir;
  RunningDaemon d(dir, qemuFleet(dir.file("state"), 1, "[runs]\nmax_simulator_s = 3\n"));
  std::string lease = leaseBoards(d, 1);
  // When a run's three images hang, with 2 s deadlines (one reference at a
  // time: the lease's share of the simulators)
  std::string hang = uploadImage(d, lease, "hang");
  std::string id = startRun(d, lease, R"({"images":)" +
                                          images({{hang, "h1.elf"}, {hang, "h2.elf"}, {hang, "h3.elf"}}) +
                                          R"(,"deadline_s":2})");
  json::object run = waitRun(d, id);
  INFO(json::serialize(run));
  // Then the first reference ran to its deadline, the second the second
  // left of the run's time, the third was stopped as it started;
  std::map<std::string, std::string> reasons;
  for (const auto& a : run.at("attempts").as_array())
    if (a.at("reference").as_bool())
      reasons[std::string(a.at("image").as_string())] = std::string(a.at("reason").as_string());
  const std::string why = ": the run's simulator time ran out (runs.max_simulator_s, 3 s, its references and "
                          "simulator targets together)";
  CHECK(reasons["h1"] == "BEGIN but no END before the deadline (the firmware hung)");
  CHECK(std::regex_match(reasons["h2"], std::regex("stopped after [0-9]+(\\.[0-9])? s" + std::regex_replace(why, std::regex("[().]"), "\\$&"))));
  CHECK(reasons["h3"] == "stopped as it started" + why);
  // and the run failed its own way, never the lab's.
  CHECK(run.at("state").as_string() == "failed");
  CHECK(run.at("failure_class").as_string() == "test");
  CHECK(qemuCount(dir.file("state"), [](int n) { return n == 0; }));
}

TEST_CASE("artifacts are streamed to readers that do not read, at most 32 answers of a run at once") {
  // Given a run and a 48 MiB file in its directory
  TempDir dir;
  RunningDaemon d(dir, qemuFleet(dir.file("state"), 1));
  std::string lease = leaseBoards(d, 1);
  json::object run = runVariant(d, lease, "pass", R"(,"reference":"none")");
  std::string id(run.at("id").as_string());
  std::string big(48u << 20, '\0');
  for (size_t i = 0; i < big.size(); i += 4096) big[i] = static_cast<char>('a' + i / 4096 % 26);
  { std::ofstream(dir.file("state/runs/" + id + "/big.bin"), std::ios::binary) << big; }
  // When 32 clients ask for it and never read
  std::string request = "GET /v1/runs/" + id + "/artifacts/big.bin HTTP/1.1\r\nHost: x\r\n\r\n";
  std::vector<int> idle;
  for (int i = 0; i < 32; ++i) {
    int fd = connectRaw(d.url(), 4096);
    REQUIRE(fd >= 0);
    REQUIRE(::send(fd, request.data(), request.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(request.size()));
    idle.push_back(fd);
  }
  // Then the next answer of that run is refused, another run's record is not
  auto refused = d.get("/v1/runs/" + id + "/events");
  for (int i = 0; i < 200 && refused.status != 429; ++i) {
    std::this_thread::sleep_for(10ms);
    refused = d.get("/v1/runs/" + id + "/artifacts/junit.xml");
  }
  CHECK(refused.status == 429);
  CHECK(parsed(refused).at("detail").as_string() ==
        "run " + id + " already has 32 answers streaming; close one first");
  CHECK(d.get("/v1/runs/" + id).status == 200);
  CHECK(d.get("/v1/healthz").status == 200);
  // When they leave, the file is served whole to a client that reads
  for (int fd : idle) ::close(fd);
  hwfarm::cli::HttpResult whole;
  for (int i = 0; i < 200; ++i) {
    whole = hwfarm::cli::HttpClient(d.url(), 60).request("GET", "/v1/runs/" + id + "/artifacts/big.bin", "", "");
    if (whole.status != 429) break;
    std::this_thread::sleep_for(10ms);
  }
  CHECK(whole.status == 200);
  CHECK(whole.body.size() == big.size());
  CHECK(whole.body == big);
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

TEST_CASE("outputs that drift from the reference pass or fail by their PCC, and a corrupt record is the lab's only when the reference's is whole") {
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
  // crc: a record whose CRC does not match, on the board and on the
  // reference alike (the simulator's console is lossless): the firmware's.
  auto [crc, ct] = verdictOf("crc");
  INFO(json::serialize(crc));
  CHECK(crc.at("state").as_string() == "failed");
  CHECK(ct.at("failure_class").as_string() == "test");
  CHECK(std::string(ct.at("reason").as_string()).find("CRC mismatch") != std::string::npos);
  CHECK(std::string(ct.at("reason").as_string()).find("the reference shows damaged records too") != std::string::npos);
  // The same damage on the board while the reference's build printed its
  // records whole points at the lab: an infrastructure failure, never compared.
  std::string crc_image = uploadImage(d, lease, "crc");
  std::string pass_image = uploadImage(d, lease, "pass");
  json::object wire = waitRun(d, startRun(d, lease, R"({"images":[{"image":")" + crc_image +
                                                        R"(","name":"crc.elf","reference_image":")" + pass_image + R"("}]})"));
  INFO(json::serialize(wire));
  CHECK(wire.at("state").as_string() == "error");
  json::object wt;
  for (const auto& a : wire.at("attempts").as_array())
    if (!a.at("reference").as_bool()) wt = a.as_object();
  CHECK(wt.at("failure_class").as_string() == "infrastructure");
  // That infrastructure failure is an event against the board, in the
  // database (for the tier SLA); the firmware's failures are not.
  daemon.reset();
  std::string events = sh("/usr/bin/python3 -c \"import sqlite3; c = sqlite3.connect('" + dir.file("state/hwfarm.db") +
                          "'); print([(b, d[:40]) for b, d in c.execute(\\\"SELECT board, detail FROM events WHERE "
                          "kind = 'infra_failure'\\\")])\"");
  CHECK(events.rfind("0:[('sim-0', 'run run-", 0) == 0);
  CHECK(events.find("), (") == std::string::npos); // one event
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

TEST_CASE("targets by board type listed twice, and the simulator as both target and reference") {
  TempDir dir;
  RunningDaemon d(dir, qemuFleet(dir.file("state"), 2));
  std::string lease = leaseBoards(d, 2);
  std::string image = uploadImage(d, lease, "slight");
  // A type listed twice takes the lease's two boards of it; "qemu" runs the
  // reference's simulator as a target too (IREE's tf next to tf_ref).
  std::string id = startRun(d, lease,
                            R"({"images":)" + images({{image, "slight.elf"}}) +
                                R"(,"mode":"each","targets":["mps2-an385","qemu","mps2-an385"]})");
  json::object run = waitRun(d, id);
  INFO(json::serialize(run));
  CHECK(run.at("state").as_string() == "passed");
  std::vector<std::string> names;
  for (const auto& t : run.at("targets").as_array()) names.emplace_back(t.at("name").as_string());
  CHECK(names == std::vector<std::string>{"mps2_an385_0", "qemu", "mps2_an385_1"});
  CHECK(run.at("targets").as_array()[1].at("board").as_string() == "qemu mps2-an385");
  std::map<std::string, double> pcc; // target -> the PCC of its first output
  for (const auto& a : run.at("attempts").as_array()) {
    if (a.at("reference").as_bool()) continue;
    const auto& out = a.at("cases").as_array().at(0).at("outputs").as_array().at(0);
    pcc[std::string(a.at("target").as_string())] = out.at("actual_pcc").to_number<double>();
  }
  REQUIRE(pcc.size() == 3);
  // The simulator target is the reference's own backend: identical outputs.
  CHECK(pcc.at("qemu") == 1.0);
  // The boards perturb their outputs as targets (the slight variant).
  CHECK(pcc.at("mps2_an385_0") < 1.0);
  CHECK(pcc.at("mps2_an385_0") > 0.99);
  CHECK(pcc.at("mps2_an385_1") < 1.0);
  std::string runs = dir.file("state/runs/" + id);
  CHECK(fs::exists(runs + "/traces/slight__qemu.txt"));
  CHECK(fs::exists(runs + "/traces/slight__qemu_ref.txt"));
  CHECK(fs::exists(runs + "/golden_results__qemu.json"));
  CHECK(fs::exists(runs + "/golden_results__mps2_an385_1.json"));
  CHECK_FALSE(fs::exists(runs + "/logs/flash__slight__qemu.txt")); // a simulator is not flashed
  CHECK(qemuCount(dir.file("state"), [](int n) { return n == 0; })); // stopped as the run ends, or soon after
}

TEST_CASE("run records are rows of the database, and an older hwfarmd's summary.json joins them at start-up") {
  TempDir dir;
  // A run an older hwfarmd left running (only its summary.json).
  std::string old_dir = dir.file("state/runs/run-00000000000000aa");
  fs::create_directories(old_dir);
  {
    std::ofstream(old_dir + "/summary.json")
        << R"({"id":"run-00000000000000aa","lease_id":"L","state":"running","created_ms":1000})";
  }
  std::string id;
  {
    RunningDaemon d(dir, qemuFleet(dir.file("state"), 1));
    json::object old = parsed(d.get("/v1/runs/run-00000000000000aa")).as_object();
    CHECK(old.at("state").as_string() == "interrupted");
    std::string lease = leaseBoards(d, 1);
    json::object run = runVariant(d, lease, "pass");
    id = std::string(run.at("id").as_string());
    CHECK(run.at("state").as_string() == "passed");
  }
  // Read with Python's sqlite3 module, not through hwfarmd.
  std::string rows = sh("/usr/bin/python3 -c \"import sqlite3,sys; [print(f'{i}|{s}') for i, s in sqlite3.connect(sys.argv[1])"
                        ".execute('SELECT id, state FROM runs ORDER BY created_ms')]\" " +
                        dir.file("state/hwfarm.db"));
  CHECK(rows == "0:run-00000000000000aa|interrupted\n" + id + "|passed\n");
  // The artifacts' summary.json went, the record stays (the database's).
  fs::remove(dir.file("state/runs/" + id + "/summary.json"));
  RunningDaemon again(dir, qemuFleet(dir.file("state"), 1));
  json::object run = parsed(again.get("/v1/runs/" + id)).as_object();
  CHECK(run.at("state").as_string() == "passed");
}

// --- what the reference runs: reference_image, golden outputs, suites ------

namespace {

// The record's first target attempt (not the reference's).
json::object targetAttempt(const json::object& run) {
  for (const auto& a : run.at("attempts").as_array())
    if (!a.at("reference").as_bool()) return a.as_object();
  return {};
}

// square.y's actual_pcc in a run's golden_results for target `target`.
double squarePcc(const std::string& run_dir, const std::string& target, const std::string& key = "square.y") {
  return json::parse(readFile(run_dir + "/golden_results__" + target + ".json")).at(key).at("actual_pcc").to_number<double>();
}

CommandResult hwfarmctl(const RunningDaemon& d, std::vector<std::string> args) {
  std::vector<std::string> argv{HWFARMCTL_PATH, "--url", d.url(), "run"};
  argv.insert(argv.end(), args.begin(), args.end());
  return runCommand(argv, {}, 120s);
}

} // namespace

TEST_CASE("a reference_image is what the reference runs, and its outputs are matched by case and output name") {
  TempDir dir;
  RunningDaemon d(dir, qemuFleet(dir.file("state"), 1));
  std::string lease = leaseBoards(d, 1);
  // Given the target runs slight and the reference its own build, pass:
  // square.y differs by the target's perturbation only (PCC about 0.995).
  std::string slight = uploadImage(d, lease, "slight");
  std::string pass = uploadImage(d, lease, "pass");
  std::string large = uploadImage(d, lease, "large");
  json::object run = waitRun(d, startRun(d, lease, R"({"images":[{"image":")" + slight + R"(","name":"slight.elf","reference_image":")" + pass + R"("}]})"));
  INFO(json::serialize(run));
  CHECK(run.at("state").as_string() == "passed");
  CHECK(run.at("images").at(0).at("reference_image").as_string() == pass);
  std::string run_dir = dir.file("state/runs/" + std::string(run.at("id").as_string()));
  CHECK(squarePcc(run_dir, "mps2_an385") > 0.994);
  CHECK(squarePcc(run_dir, "mps2_an385") < 0.996);
  CHECK(json::parse(readFile(run_dir + "/summary.json")).at("images").at(0).at("reference_image").as_string() == pass);
  // Given the reference runs large (the pass run plus a case "large"), the
  // pass image on the target lacks that case: a test failure naming it.
  json::object missing = waitRun(d, startRun(d, lease, R"({"images":[{"image":")" + pass + R"(","name":"pass.elf","reference_image":")" + large + R"("}]})"));
  INFO(json::serialize(missing));
  CHECK(missing.at("state").as_string() == "failed");
  json::object target = targetAttempt(missing);
  CHECK(target.at("failure_class").as_string() == "test");
  CHECK(target.at("reason").as_string() == "no TEST record for large (the reference has one)");
  std::string missing_dir = dir.file("state/runs/" + std::string(missing.at("id").as_string()));
  CHECK(readFile(missing_dir + "/traces/pass__qemu_ref.txt").find("HWFARM OUTPUT large.y") != std::string::npos);
  CHECK(readFile(missing_dir + "/traces/pass__mps2_an385.txt").find("large.y") == std::string::npos);
  // The other way round (target large, reference pass): the target's extra
  // output has nothing to be held against.
  json::object extra = waitRun(d, startRun(d, lease, R"({"images":[{"image":")" + large + R"(","name":"large.elf","reference_image":")" + pass + R"("}]})"));
  INFO(json::serialize(extra));
  CHECK(extra.at("state").as_string() == "failed");
  CHECK(std::string(targetAttempt(extra).at("reason").as_string()) ==
        "large.y: the reference has no complete output of that name");

  // hwfarmctl run --reference-image pairs the i-th with the i-th image.
  CommandResult cli = hwfarmctl(d, {"--lease", lease, "--reference-image", firmware("large"), firmware("pass")});
  INFO(cli.out << cli.err);
  CHECK(cli.status.code == 10);
  CHECK(cli.out.find("hwfarm_pass on mps2_an385 (sim-0): fail: no TEST record for large (the reference has one)") !=
        std::string::npos);
  CommandResult two = hwfarmctl(d, {"--lease", lease, "--reference-image", firmware("pass"), firmware("pass"), firmware("slight")});
  CHECK(two.status.code == 2);
  CHECK(two.err.rfind("hwfarmctl run: --reference-image: 1 given for 2 image(s): the i-th pairs with the i-th image\n", 0) == 0);
}

TEST_CASE("golden:DIR from a previous run's --out directory gives the verdicts the QEMU reference gave, with no simulator") {
  TempDir dir;
  RunningDaemon d(dir, qemuFleet(dir.file("state"), 1));
  std::string lease = leaseBoards(d, 1);
  // Given runs of slight, bad and pass against the QEMU reference, written out,
  for (const std::string variant : {"slight", "bad", "pass"}) {
    CommandResult qemu = hwfarmctl(d, {"--lease", lease, "--out", dir.file("qemu-" + variant), firmware(variant)});
    INFO(qemu.out << qemu.err);
    REQUIRE(qemu.status.code == (variant == "bad" ? 10 : 0));
  }
  // each compared against those outputs instead: the same verdicts and the
  // same PCC, from the run directory or its outputs/ tree.
  for (const std::string variant : {"slight", "bad"}) {
    for (const std::string& root : {dir.file("qemu-" + variant), dir.file("qemu-" + variant + "/outputs")}) {
      std::string out = dir.file("golden-" + variant + std::to_string(root.size()));
      CommandResult golden = hwfarmctl(d, {"--lease", lease, "--reference", "golden:" + root, "--out", out, firmware(variant)});
      INFO(golden.out << golden.err);
      CHECK(golden.status.code == (variant == "bad" ? 10 : 0));
      CHECK(golden.out.find("hwfarm_" + variant + " on golden_ref: pass\n") != std::string::npos);
      json::object summary = json::parse(readFile(out + "/summary.json")).as_object();
      CHECK(summary.at("reference").as_string() == "golden");
      for (const auto& a : summary.at("attempts").as_array())
        if (a.at("reference").as_bool()) CHECK(a.at("board").as_string() == "golden"); // no simulator ran
      CHECK(summary.at("images").at(0).at("golden").as_string().ends_with(".golden"));
      CHECK(fs::exists(out + "/traces/hwfarm_" + variant + "__golden_ref.txt"));
      // The same values (the comparator's vectorized sums may differ in the last bit).
      CHECK(squarePcc(out, "mps2_an385") == Approx(squarePcc(dir.file("qemu-" + variant), "mps2_an385")).epsilon(1e-12));
      CHECK(squarePcc(out, "mps2_an385", "precision.y") == 1.0);
      json::object qemu_summary = json::parse(readFile(dir.file("qemu-" + variant + "/summary.json"))).as_object();
      CHECK(summary.at("state") == qemu_summary.at("state"));
      CHECK(targetAttempt(summary).at("outcome") == targetAttempt(qemu_summary).at("outcome"));
    }
  }
  CHECK(qemuCount(dir.file("state/runs"), [](int n) { return n == 0; })); // stopped as the run ends, or soon after
  // A manifest image names its own golden directory (any name works then).
  std::string manifest = dir.write("suite.toml", "reference = \"golden\"\n[[image]]\nname = \"renamed\"\npath = \"" +
                                                     firmware("slight") + "\"\ngolden = \"qemu-slight/outputs/hwfarm_slight__qemu_ref\"\n");
  CommandResult own = hwfarmctl(d, {"--lease", lease, "--suite", manifest, "--out", dir.file("own")});
  INFO(own.out << own.err);
  CHECK(own.status.code == 0);
  CHECK(own.out.find("renamed on golden_ref: pass\n") != std::string::npos);
  CHECK(squarePcc(dir.file("own"), "mps2_an385") == Approx(squarePcc(dir.file("qemu-slight"), "mps2_an385")).epsilon(1e-12));
  // Golden outputs need the golden reference, and the golden reference needs outputs.
  CommandResult qemu_too = hwfarmctl(d, {"--lease", lease, "--suite", manifest, "--reference", "qemu"});
  CHECK(qemu_too.status.code == 2);
  CHECK(qemu_too.err == "hwfarmctl run: image renamed has golden outputs (" +
                            dir.file("qemu-slight/outputs/hwfarm_slight__qemu_ref") +
                            "): they need --reference golden (or golden:DIR)\n");
  CommandResult no_dir = hwfarmctl(d, {"--lease", lease, "--reference", "golden", firmware("pass")});
  CHECK(no_dir.status.code == 2);
  CHECK(no_dir.err == "hwfarmctl run: image hwfarm-pass.elf has no golden outputs: give --reference golden:DIR, or "
                      "golden = \"DIR\" in the manifest\n");
  // A golden output missing from DIR: the target's output has nothing to
  // match, its case fails.
  fs::remove(dir.file("qemu-pass/outputs/hwfarm_pass__qemu_ref/ramp.y.npy"));
  CommandResult missing = hwfarmctl(d, {"--lease", lease, "--reference", "golden:" + dir.file("qemu-pass"), firmware("pass")});
  INFO(missing.out << missing.err);
  CHECK(missing.status.code == 10);
  CHECK(missing.out.find("hwfarm_pass on mps2_an385 (sim-0): fail: ramp.y: the reference has no complete output of that name\n") !=
        std::string::npos);
  // No outputs for the image, or two candidates and no _ref: a usage error, nothing uploaded or run.
  size_t runs_before = parsed(d.get("/v1/runs")).at("runs").as_array().size();
  CommandResult none = hwfarmctl(d, {"--lease", lease, "--reference", "golden:" + dir.file("qemu-pass"), firmware("fail")});
  CHECK(none.status.code == 2);
  CHECK(none.err == "hwfarmctl run: golden:" + dir.file("qemu-pass") + ": no outputs for image hwfarm_fail (expected " +
                        dir.file("qemu-pass/outputs/hwfarm_fail__<target>_ref") + ")\n");
  fs::create_directories(dir.file("two/outputs/hwfarm_pass__a"));
  fs::create_directories(dir.file("two/outputs/hwfarm_pass__b"));
  CommandResult two = hwfarmctl(d, {"--lease", lease, "--reference", "golden:" + dir.file("two"), firmware("pass")});
  CHECK(two.status.code == 2);
  CHECK(two.err.find("image hwfarm_pass has several output directories (hwfarm_pass__a, hwfarm_pass__b)") != std::string::npos);
  fs::create_directories(dir.file("bad/outputs/hwfarm_pass__qemu_ref"));
  dir.write("bad/outputs/hwfarm_pass__qemu_ref/square.y.npy", "not numpy");
  CommandResult broken = hwfarmctl(d, {"--lease", lease, "--reference", "golden:" + dir.file("bad"), firmware("pass")});
  CHECK(broken.status.code == 2);
  CHECK(broken.err == "hwfarmctl run: " + dir.file("bad/outputs/hwfarm_pass__qemu_ref/square.y.npy") +
                          ": not a .npy file: no \\x93NUMPY magic\n");
  CHECK(parsed(d.get("/v1/runs")).at("runs").as_array().size() == runs_before);
}

TEST_CASE("a suite manifest runs its images under its names with its thresholds, and its errors say FILE:LINE:COL") {
  TempDir dir;
  RunningDaemon d(dir, qemuFleet(dir.file("state"), 2));
  std::string lease = leaseBoards(d, 2);
  fs::create_directories(dir.file("ci/fw"));
  for (const std::string variant : {"pass", "bad", "slight"})
    fs::copy_file(firmware(variant), dir.file("ci/fw/" + variant + ".elf"));
  // Given a manifest of three images: bad passes only by its rule, slight is
  // compared against its reference_image.
  std::string manifest = dir.write("ci/suite.toml", R"(suite = "nightly-m3"
mode = "shard"
deadline_s = 30

[[image]]
name = "conv"
path = "fw/pass.elf"

[[image]]
name = "dense"
path = "fw/bad.elf"

[[image]]
name = "pool"
path = "fw/slight.elf"
reference_image = "fw/pass.elf"

[[threshold]]
image = "dense"
case = "square"
output = "y"
expected_pcc = 0.4
)");
  CommandResult suite = hwfarmctl(d, {"--lease", lease, "--suite", manifest, "--mode", "each", "--out", dir.file("out")});
  INFO(suite.out << suite.err);
  CHECK(suite.status.code == 0);
  json::object summary = json::parse(readFile(dir.file("out/summary.json"))).as_object();
  CHECK(summary.at("suite").as_string() == "nightly-m3");
  CHECK(summary.at("mode").as_string() == "each"); // the command line overrides the manifest
  CHECK(summary.at("deadline_ms").as_int64() == 30000);
  CHECK(summary.at("images").at(2).at("reference_image").is_string());
  for (const std::string name : {"conv", "dense", "pool"}) {
    CHECK(fs::exists(dir.file("out/traces/" + name + "__mps2_an385_0.txt")));
    CHECK(fs::exists(dir.file("out/traces/" + name + "__mps2_an385_1.txt")));
    CHECK(fs::exists(dir.file("out/traces/" + name + "__qemu_ref.txt")));
  }
  CHECK(squarePcc(dir.file("out"), "mps2_an385_0", "dense/square.y") < 0.6);
  CHECK(readFile(dir.file("out/junit.xml")).find("<testsuites name=\"nightly-m3\"") != std::string::npos);
  // Without the rule, dense fails: the rule came from the manifest.
  std::string strict = dir.write("ci/strict.toml", "[[image]]\nname = \"dense\"\npath = \"fw/bad.elf\"\n");
  CommandResult failed = hwfarmctl(d, {"--lease", lease, "--suite", strict});
  INFO(failed.out << failed.err);
  CHECK(failed.status.code == 10);
  CHECK(failed.out.find("dense on mps2_an385_") != std::string::npos);
  // A manifest error names its place; nothing runs.
  size_t runs_before = parsed(d.get("/v1/runs")).at("runs").as_array().size();
  std::string broken = dir.write("ci/broken.toml", "suite = \"x\"\n[[image]]\npath = \"fw/pass.elf\"\ncolour = 1\n");
  CommandResult bad = hwfarmctl(d, {"--lease", lease, "--suite", broken});
  CHECK(bad.status.code == 2);
  CHECK(bad.err == "hwfarmctl run: --suite: " + broken + ":4:10: image.colour: unknown key (name, path, reference_image, golden)\n");
  std::string absent = dir.write("ci/absent.toml", "[[image]]\npath = \"fw/none.elf\"\n");
  CommandResult gone = hwfarmctl(d, {"--lease", lease, "--suite", absent});
  CHECK(gone.status.code == 2);
  CHECK(gone.err.rfind("hwfarmctl run: cannot read image " + dir.file("ci/fw/none.elf"), 0) == 0);
  CHECK(hwfarmctl(d, {"--lease", lease, "--suite", manifest, firmware("pass")}).status.code == 2);
  CHECK(parsed(d.get("/v1/runs")).at("runs").as_array().size() == runs_before);
}

TEST_CASE("bad reference_image and golden fields are 400s that start nothing, and a golden file is never an image") {
  TempDir dir;
  RunningDaemon d(dir, qemuFleet(dir.file("state"), 1));
  std::string lease = leaseBoards(d, 1);
  std::string pass = uploadImage(d, lease, "pass");
  auto up = hwfarm::cli::HttpClient(d.url()).request("POST", "/v1/leases/" + lease + "/images?name=pass.golden",
                                                     "HWFARM BEGIN suite=golden\nHWFARM END status=0\n", "",
                                                     "application/octet-stream");
  REQUIRE(up.status == 201);
  std::string golden(parsed(up).at("image").as_string());
  CHECK(golden.size() == 64 + 7);
  CHECK(golden.ends_with(".golden"));
  std::string absent = std::string(64, 'b') + ".elf";
  auto entry = [&](const std::string& extra) { return R"({"images":[{"image":")" + pass + R"(","name":"p")" + extra + "}]"; };
  struct Case {
    std::string body;
    std::string detail;
  };
  std::vector<Case> cases{
      {entry(R"(,"reference_image":")" + absent + R"(")") + "}",
       "images: reference_image " + absent + " was not uploaded to lease " + lease},
      {entry(R"(,"reference_image":")" + golden + R"(")") + "}",
       "images: reference_image " + golden + " is not an uploaded image (POST /v1/leases/" + lease + "/images first)"},
      {R"({"images":[{"image":")" + golden + R"("}]})",
       "images: " + golden + " is not an uploaded image (POST /v1/leases/" + lease + "/images first)"},
      {entry(R"(,"golden":")" + pass + R"(")") + R"(,"reference":"golden"})",
       "images: golden " + pass + " is not an uploaded golden file (POST /v1/leases/" + lease +
           "/images?name=IMAGE.golden first)"},
      {entry("") + R"(,"reference":"golden"})", "images: p: reference \"golden\" needs a \"golden\" file for every image"},
      {entry(R"(,"golden":")" + golden + R"(")") + "}", "images: p: a \"golden\" file needs reference \"golden\""},
      {entry(R"(,"golden":")" + golden + R"(","reference_image":")" + pass + R"(")") + R"(,"reference":"golden"})",
       "images: p: a reference_image needs reference \"qemu\" (the simulator runs it)"},
      {entry(R"(,"reference_image":")" + pass + R"(")") + R"(,"reference":"none"})",
       "images: p: a reference_image needs reference \"qemu\" (the simulator runs it)"},
      {entry(R"(,"reference_image":1)") + "}",
       "images: each is {\"image\": \"<sha256><ext>\", \"name\": \"<file name>\", \"reference_image\": \"<sha256><ext>\", "
       "\"golden\": \"<sha256>.golden\"} (name, reference_image and golden optional)"},
      {entry("") + R"(,"reference":"gold"})", "reference: expected \"qemu\", \"golden\" or \"none\""},
  };
  for (const auto& c : cases) {
    auto r = d.request("POST", "/v1/leases/" + lease + "/runs", c.body, "");
    INFO(c.body << " -> " << r.body);
    CHECK(r.status == 400);
    CHECK(parsed(r).at("detail").as_string() == c.detail);
  }
  CHECK(parsed(d.get("/v1/runs")).at("runs").as_array().empty());
  CHECK(qemuCount(dir.file("state"), [](int n) { return n == 0; })); // stopped as the run ends, or soon after
  // A golden file cannot be flashed: the flash upload refuses its type.
  auto flash = hwfarm::cli::HttpClient(d.url()).request("POST", "/v1/leases/" + lease + "/boards/sim-0/flash?name=x.golden",
                                                        "HWFARM END status=0\n", "", "application/octet-stream");
  CHECK(flash.status == 400);
  CHECK(parsed(flash).at("detail").as_string().starts_with("unsupported image type \".golden\""));
}

TEST_CASE("a run whose artifacts pass runs.max_artifact_bytes keeps junit.xml and what fits, ends error, and a lease's runs share its quota") {
  // Given a lab whose runs may write 256 KiB of artifacts each, 300 KiB a lease
  TempDir dir;
  RunningDaemon d(dir, qemuFleet(dir.file("state"), 1,
                                 "[runs]\nmax_artifact_bytes = 262144\nmax_lease_artifact_bytes = 307200\n"));
  std::string lease = leaseBoards(d, 1);
  std::string image = uploadImage(d, lease, "huge");
  // When a run's firmware writes a 120 KB output and 280 KB of console on its board and its reference
  std::string id = startRun(d, lease, R"({"images":)" + images({{image, "huge.elf"}}) + "}");
  // Then, while it runs and holds its 256 KiB, another run of the lease finds less than 64 KiB left: refused
  auto second = d.request("POST", "/v1/leases/" + lease + "/runs",
                          R"({"images":)" + images({{image, "huge.elf"}}) + "}", "");
  INFO(second.body);
  CHECK(second.status == 507);
  CHECK(std::regex_search(second.body,
                          std::regex("\"insufficient_storage\".*lease " + lease + "'s runs have written or hold "
                                     "262144 bytes of artifacts, its share runs.max_lease_artifact_bytes "
                                     "\\(307200\\): release it and take a new lease")));
  json::object run = waitRun(d, id);
  INFO(json::serialize(run));
  // And the run ends error, the firmware's doing, saying what it kept and what it left out
  CHECK(run.at("state").as_string() == "error");
  CHECK(run.at("failure_class").as_string() == "test");
  std::string reason(run.at("reason").as_string());
  CHECK(std::regex_search(reason, std::regex("^its artifacts \\([0-9]+ bytes\\) exceed runs.max_artifact_bytes "
                                             "\\(262144 bytes\\): [0-9]+ file\\(s\\) kept \\([0-9]+ bytes\\), "
                                             "[0-9]+ left out: traces/")));
  // and every file it lists is there, junit.xml first, within the quota
  const json::array& listed = run.at("artifacts").as_array();
  REQUIRE(!listed.empty());
  CHECK(listed.at(0).as_string() == "junit.xml");
  CHECK(std::find(listed.begin(), listed.end(), json::value("summary.json")) != listed.end());
  uint64_t bytes = 0;
  for (const auto& a : listed) {
    std::string path(a.as_string());
    auto r = d.get("/v1/runs/" + id + "/artifacts/" + path);
    INFO(path);
    CHECK(r.status == 200);
    if (path != "summary.json") bytes += r.body.size();
  }
  CHECK(bytes <= 262144);
  CHECK(d.get("/v1/runs/" + id + "/artifacts/traces/huge__mps2_an385.txt").status == 404);
  // And once it ended, its lease has what it did not write back: a small run starts and passes.
  CHECK(runVariant(d, lease, "pass").at("state").as_string() == "passed");
}

TEST_CASE("a run past runs.max_run_memory_bytes that nothing can free ends error, the firmware's, and hwfarmd works on") {
  // Given a lab whose runs may hold 16 MiB of results not written yet and
  // write 64 KiB (so an image's files wait for the run's end),
  TempDir dir;
  RunningDaemon d(dir, qemuFleet(dir.file("state"), 1,
                                 "[runs]\nmax_artifact_bytes = 65536\nmax_run_memory_bytes = 16777216\n"));
  std::string lease = leaseBoards(d, 1);
  std::string image = uploadImage(d, lease, "huge");
  // when a run of 40 images that each print 280 KB of console and a 120 KB
  // output (about 1 MB a board attempt and its reference hold),
  std::vector<std::pair<std::string, std::string>> list;
  for (int i = 0; i < 40; ++i) list.emplace_back(image, "huge" + std::to_string(i) + ".elf");
  json::object run = waitRun(d, startRun(d, lease, R"({"images":)" + images(list) + "}"));
  INFO(json::serialize(run).substr(0, 2000));
  // it stops starting images once it holds more than 16 MiB, and ends error,
  // the firmware's, saying why;
  CHECK(run.at("state").as_string() == "error");
  CHECK(run.at("failure_class").as_string() == "test");
  std::string reason(run.at("reason").as_string());
  CHECK(std::regex_search(reason, std::regex("^it holds [0-9]+ bytes of consoles, flash logs and outputs not written "
                                             "yet, past runs.max_run_memory_bytes \\(16777216 bytes\\), and nothing "
                                             "it runs can free them: its files come near runs.max_artifact_bytes "
                                             "\\(65536 bytes\\)")));
  size_t targets = 0;
  for (const auto& a : run.at("attempts").as_array()) targets += a.at("reference").as_bool() ? 0 : 1;
  CHECK(targets >= 10);
  CHECK(targets < 40);
  // the references ran at most 8 images ahead of the board;
  size_t references = run.at("attempts").as_array().size() - targets;
  CHECK(references <= targets + 8);
  // every file it lists is there, and the next run passes.
  for (const auto& a : run.at("artifacts").as_array())
    CHECK(d.get("/v1/runs/" + std::string(run.at("id").as_string()) + "/artifacts/" + std::string(a.as_string()))
              .status == 200);
  CHECK(runVariant(d, lease, "pass").at("state").as_string() == "passed");
}

TEST_CASE("artifacts stop at limits.disk_reserve_bytes: the run ends error, the lab's, listing only what was written, and the daemon works on") {
  // Given an 8 MiB state dir that keeps 4 MiB free, filled by something else to 100 KB above that
  TempDir dir;
  SmallDisk disk(dir.file("state"), "8m");
  RunningDaemon d(dir, qemuFleet(disk.dir, 1, "[limits]\ndisk_reserve_bytes = 4194304\n"));
  std::string lease = leaseBoards(d, 1);
  std::string image = uploadImage(d, lease, "huge");
  disk.fillUntil(4194304 + 100 * 1024);
  // When a run's artifacts want about 800 KB
  json::object run = waitRun(d, startRun(d, lease, R"({"images":)" + images({{image, "huge.elf"}}) + "}"));
  INFO(json::serialize(run));
  // Then the run ends error as the lab's failure, naming the reserve
  CHECK(run.at("state").as_string() == "error");
  CHECK(run.at("failure_class").as_string() == "infrastructure");
  std::string reason(run.at("reason").as_string());
  CHECK(std::regex_search(reason, std::regex("^its artifacts could not be written: no room for " + disk.dir +
                                             "/runs/run-[0-9a-f]+/[^ ]+: ([0-9]+ bytes would leave )?only [0-9]+ "
                                             "bytes free on " + disk.dir + "/runs/run-[0-9a-f]+, less than "
                                             "limits.disk_reserve_bytes \\(4194304\\)")));
  // and lists only files a client finds (the traces did not fit; the board's console log may have taken the
  // rest, and then none is listed)
  std::string id(run.at("id").as_string());
  json::array listed = run.contains("artifacts") ? run.at("artifacts").as_array() : json::array{};
  for (const auto& a : listed) {
    INFO(a.as_string());
    CHECK(d.get("/v1/runs/" + id + "/artifacts/" + std::string(a.as_string())).status == 200);
  }
  CHECK(std::find(listed.begin(), listed.end(), json::value("traces/huge__mps2_an385.txt")) == listed.end());
  // And the database still has its room: leases come and go, the daemon restarts on its state
  REQUIRE(d.request("DELETE", "/v1/leases/" + lease, "", "").status == 200);
  for (int i = 0; i < 10; ++i)
    REQUIRE(d.request("DELETE", "/v1/leases/" + leaseBoards(d, 1), "", "").status == 200);
  d.killAndRestart();
  CHECK(d.get("/v1/runs/" + id).status == 200);
  // and once space is freed, runs pass again.
  fs::remove(disk.dir + "/filler");
  CHECK(runVariant(d, leaseBoards(d, 1), "pass").at("state").as_string() == "passed");
  CHECK(d.log().find("cannot commit") == std::string::npos);
}

TEST_CASE("an upload that would eat into limits.disk_reserve_bytes is refused with 507 and leaves no file") {
  // Given a 16 MiB state dir that keeps 8 MiB free, and something else that left about 8.5 MiB free
  TempDir dir;
  SmallDisk disk(dir.file("state"), "16m");
  RunningDaemon d(dir, qemuFleet(disk.dir, 1, "[limits]\ndisk_reserve_bytes = 8388608\n"));
  std::string lease = leaseBoards(d, 1);
  disk.fillUntil(8388608 + 512 * 1024);
  // When a pipeline uploads a 1 MiB image
  auto upload = [&] {
    return hwfarm::cli::HttpClient(d.url())
        .request("POST", "/v1/leases/" + lease + "/images?name=big.bin", std::string(1 << 20, 'x'), "",
                 "application/octet-stream");
  };
  auto r = upload();
  INFO(r.body);
  // Then it is refused, saying how much is free, and no spool file is left
  CHECK(r.status == 507);
  CHECK(std::regex_search(r.body, std::regex("\"error\":\"insufficient_storage\".*cannot store the upload: 1048576 "
                                             "bytes would leave only [0-9]+ bytes free on " + disk.dir +
                                             "/[^,]*" + lease + "[^,]*, less than limits.disk_reserve_bytes "
                                             "\\(8388608\\)")));
  size_t spooled = 0;
  for (const auto& e : fs::recursive_directory_iterator(disk.dir))
    spooled += e.path().filename().string().rfind(".upload-", 0) == 0;
  CHECK(spooled == 0);
  // When the filler goes, the same upload is stored
  fs::remove(disk.dir + "/filler");
  CHECK(upload().status == 201);
}

TEST_CASE("below half of limits.disk_reserve_bytes no new lease or run is taken, healthz and the log say why, and work resumes once space is freed") {
  // Given a lease on an 8 MiB state dir that keeps 4 MiB free
  TempDir dir;
  SmallDisk disk(dir.file("state"), "8m");
  std::string config = qemuFleet(disk.dir, 2, "[limits]\ndisk_reserve_bytes = 4194304\n");
  RunningDaemon d(dir, config);
  auto take = [&d] {
    return d.request("POST", "/v1/leases", R"({"selector":{"type":"mps2-an385"},"context":"manual"})", "");
  };
  auto held = take();
  REQUIRE(held.status == 201);
  std::string lease(json::parse(held.body).at("id").as_string());
  std::string image = uploadImage(d, lease, "pass");
  CHECK(json::parse(d.get("/v1/healthz").body).at("disk").at("ok").as_bool());
  // When something else leaves less than half the reserve free (its own writers stop at the reserve)
  disk.fillUntil(2097152 - 100 * 1024);
  // Then a new lease and a new run are refused with 507, saying how much is free
  std::string why =
      "only [0-9]+ bytes free on " + disk.dir + "[^,]*, less than half of limits.disk_reserve_bytes \\(4194304\\)";
  auto refused = take();
  INFO(refused.body);
  CHECK(refused.status == 507);
  CHECK(std::regex_search(refused.body, std::regex("\"insufficient_storage\".*" + why +
                                                   ": hwfarmd grants no new lease until space is freed")));
  auto run = d.request("POST", "/v1/leases/" + lease + "/runs", R"({"images":)" + images({{image, "pass.elf"}}) + "}", "");
  INFO(run.body);
  CHECK(run.status == 507);
  CHECK(std::regex_search(run.body, std::regex(why + ": hwfarmd starts no run until space is freed")));
  // and healthz says so
  json::value health = json::parse(d.get("/v1/healthz").body);
  CHECK_FALSE(health.at("disk").at("ok").as_bool());
  CHECK(health.at("disk").at("reserve_bytes").as_int64() == 4194304);
  CHECK(health.at("disk").at("free_bytes").as_int64() < 2097152);
  CHECK(std::regex_search(std::string(health.at("disk").at("reason").as_string()), std::regex(why)));
  // And the lease it holds is released, and a restart on that disk starts and says why it refuses work
  REQUIRE(d.request("DELETE", "/v1/leases/" + lease, "", "").status == 200);
  d.killAndRestart();
  CHECK(std::regex_search(d.log(), std::regex(why + ": hwfarmd takes no new lease or run until space is freed")));
  CHECK(take().status == 507);
  // When the space is freed, leases are granted again.
  fs::remove(disk.dir + "/filler");
  CHECK(take().status == 201);
  CHECK(d.log().find("cannot commit") == std::string::npos);
}

TEST_CASE("a run's record says where each attempt's time went and the summary keeps it") {
  // A firmware that idles after END is read for the drain window; one that
  // resets after END (the pass firmware) stops its simulators there, long
  // before a drain window of 10 s.
  auto [variant, drain_ms] = GENERATE(table<std::string, int64_t>({{"idle", 250}, {"pass", 10000}}));
  INFO(variant);
  TempDir dir;
  RunningDaemon d(dir, qemuFleet(dir.file("state"), 1) + "\n[runs]\ndrain_ms = " + std::to_string(drain_ms) + "\n");
  std::string lease = leaseBoards(d, 1);
  json::object run = runVariant(d, lease, variant);
  INFO(json::serialize(run));
  REQUIRE(run.at("state").as_string() == "passed");
  auto ms = [](const json::object& t, const char* key) { return t.at(key).as_int64(); };
  for (const auto& item : run.at("attempts").as_array()) {
    const json::object& a = item.as_object();
    INFO(json::serialize(a));
    const json::object& t = a.at("timings").as_object();
    if (a.at("reference").as_bool()) {
      // A fresh simulator: its wait for a slot, its start, its console's first line and END, the drain.
      CHECK(ms(t, "wait_ms") >= 0);
      CHECK_FALSE(t.contains("flash_ms"));
      CHECK(ms(t, "start_ms") >= 0);
      CHECK(ms(t, "first_byte_ms") >= ms(t, "start_ms"));
    } else {
      // A simulated board: its flash (staged), its console from power-on.
      CHECK(ms(t, "flash_ms") >= 0);
      CHECK_FALSE(t.contains("start_ms"));
      CHECK(ms(t, "first_byte_ms") >= 0);
    }
    CHECK(ms(t, "end_ms") >= ms(t, "first_byte_ms"));
    // The console was read for runs.drain_ms (250) after END, at least, or
    // until the firmware's reset stopped the simulator.
    if (variant == "idle") CHECK(ms(t, "drain_ms") >= drain_ms - 5);
    else CHECK(ms(t, "drain_ms") < drain_ms);
    CHECK(ms(t, "end_ms") + ms(t, "drain_ms") <= static_cast<int64_t>(a.at("seconds").to_number<double>() * 1000) + 50);
  }
  int64_t attempts_ms = run.at("timings").at("attempts_ms").as_int64();
  if (variant == "idle") CHECK(attempts_ms >= drain_ms - 5);
  else CHECK(attempts_ms < drain_ms);
  CHECK(attempts_ms <= run.at("ended_ms").as_int64() - run.at("created_ms").as_int64());
  // summary.json says the same.
  json::value summary = json::parse(readFile(dir.file("state/runs/" + std::string(run.at("id").as_string()) + "/summary.json")));
  CHECK(summary.at("timings") == run.at("timings"));
  CHECK(summary.at("attempts") == run.at("attempts"));
}

TEST_CASE("artifacts are served sandboxed and unsniffed, and XML as an attachment, never a page of the dashboard's origin") {
  TempDir dir;
  RunningDaemon d(dir, qemuFleet(dir.file("state"), 1));
  std::string lease = leaseBoards(d, 1);
  json::object run = runVariant(d, lease, "pass");
  INFO(json::serialize(run));
  REQUIRE(run.at("state").as_string() == "passed");
  std::string id(run.at("id").as_string());
  // The head of a GET, its header names in lower case; its status line as "status".
  auto head = [&](const std::string& what) {
    std::string answer = rawExchange(d.url(), "GET /v1/runs/" + id + "/" + what +
                                                  " HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    std::map<std::string, std::string> out;
    std::string text = answer.substr(0, answer.find("\r\n\r\n"));
    size_t at = text.find("\r\n");
    out["status"] = text.substr(0, at);
    while (at != std::string::npos) {
      size_t next = text.find("\r\n", at + 2);
      std::string line = text.substr(at + 2, next == std::string::npos ? std::string::npos : next - at - 2);
      size_t colon = line.find(':');
      std::string name = line.substr(0, colon);
      std::transform(name.begin(), name.end(), name.begin(), ::tolower);
      CHECK(out.count(name) == 0); // each header once
      out[name] = line.substr(line.find_first_not_of(' ', colon + 1));
      at = next;
    }
    return out;
  };
  struct Expected {
    std::string what, type, disposition;
  };
  for (const Expected& e : std::vector<Expected>{
           {"artifacts/junit.xml", "application/xml", "attachment; filename=\"junit.xml\"; filename*=UTF-8''junit.xml"},
           {"artifacts/summary.json", "application/json", ""},
           {"artifacts/traces/pass__mps2_an385.txt", "text/plain; charset=utf-8", ""},
           {"artifacts/outputs/pass__qemu_ref/ramp.y.npy", "application/octet-stream", ""},
           {"artifacts.tar", "application/x-tar", "attachment; filename=\"" + id + ".tar\""}}) {
    INFO(e.what);
    auto h = head(e.what);
    CHECK(h["status"] == "HTTP/1.1 200 OK");
    CHECK(h["content-type"] == e.type);
    CHECK(h["content-security-policy"] == "sandbox; default-src 'none'");
    CHECK(h["x-content-type-options"] == "nosniff");
    CHECK(h["content-disposition"] == e.disposition);
  }
}
