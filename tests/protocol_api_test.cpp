// The result protocol through a real hwfarmd (docs/protocol.md): test images
// that show what a console can do to a run, each run with `hwfarmctl run` on
// a leased simulated board and the QEMU reference, judged from the record and
// the artifacts: a record is never taken from a cut line, the same bytes
// read the same on a board and on the reference, a FAIL message is never
// mistaken for a CRC, a lost or miscounted record fails the attempt, and a
// record after END or a run without a test case never passes.
#include <catch2/catch.hpp>

#include <algorithm>
#include <filesystem>
#include <map>

#include <boost/json.hpp>

#include "tests/support/daemon_harness.h"
#include "tests/support/process.h"
#include "tests/support/firmware.h"

using namespace hwfarm::test;
using namespace std::chrono_literals;
namespace json = boost::json;
namespace fs = std::filesystem;

namespace {

// A daemon with one simulated board, leased.
struct Lab {
  TempDir dir;
  RunningDaemon daemon;
  std::string lease;
  // `extra`: more of the fleet's configuration.
  explicit Lab(const std::string& extra = "") : daemon(dir, qemuFleet(dir.file("state"), 1, extra)) {
    CommandResult acquired = runCommand(
        {HWFARMCTL_PATH, "--url", daemon.url(), "-q", "lease", "acquire", "--type", "mps2-an385", "--context", "manual"});
    REQUIRE(acquired.status.code == 0);
    lease = acquired.out.substr(0, acquired.out.find('\n'));
  }

  struct Ran {
    int exit_code;
    std::string out;          // what hwfarmctl printed
    std::string dir;          // the artifacts
    json::object target, ref; // the attempts in summary.json
  };

  // `hwfarmctl run` of `variant` on the board and the reference.
  Ran run(const std::string& variant, const std::string& deadline_s = "20") {
    std::string out = dir.file("out-" + variant);
    CommandResult r = runCommand({HWFARMCTL_PATH, "--url", daemon.url(), "run", "--lease", lease, "--deadline",
                                  deadline_s, "--out", out, firmware(variant)},
                                 {}, 120s);
    INFO(r.out << r.err);
    REQUIRE(fs::exists(out + "/summary.json"));
    Ran ran{r.status.code, r.out + r.err, out, {}, {}};
    json::value summary = json::parse(readFile(out + "/summary.json"));
    for (const auto& a : summary.at("attempts").as_array())
      (a.at("reference").as_bool() ? ran.ref : ran.target) = a.as_object();
    return ran;
  }
};

std::string text(const json::object& o, const char* key) {
  const json::value* v = o.if_contains(key);
  return v && v->is_string() ? std::string(v->as_string()) : std::string();
}

} // namespace

TEST_CASE("a control byte before END ends the run on a board and on the reference alike, and stops the board") {
  Lab lab;
  // Given a firmware whose END record comes after a 0x01 (as after a break),
  Lab::Ran r = lab.run("ctrlend");
  INFO(r.out);
  // both the board and the reference ended with it, and the run passed,
  CHECK(r.exit_code == 0);
  CHECK(text(r.target, "outcome") == "pass");
  CHECK(text(r.ref, "outcome") == "pass");
  CHECK(r.target.at("end_status").as_int64() == 0);
  // and the simulated board was stopped on it, as on a plain END.
  std::string console;
  for (const auto& e : fs::recursive_directory_iterator(lab.dir.file("state/consoles")))
    if (e.path().filename() == "sim-0.log") console = readFile(e.path().string());
  INFO(console);
  CHECK(console.find("] \x01HWFARM END status=0\n") != std::string::npos);
  CHECK(console.find("-- the firmware ended: stopping the simulator --") != std::string::npos);
}

TEST_CASE("a line the console ended inside of is no record: the cut output is not an output of the board or the reference") {
  Lab lab;
  // Given a board that dies inside "HWFARM OUTPUT ramp.y i32 4 0 1 2 37",
  // after "... 2 3",
  Lab::Ran r = lab.run("cut", "2");
  INFO(r.out);
  // the run fails (no END), and neither side has a ramp.y from the cut line:
  // it has square.y, whole before it.
  CHECK(r.exit_code == 10);
  CHECK(text(r.target, "reason") == "BEGIN but no END before the deadline (the firmware hung)");
  CHECK(readFile(r.dir + "/traces/hwfarm_cut__qemu_ref.txt").find("HWFARM OUTPUT ramp.y i32 4 0 1 2 3") !=
        std::string::npos);
  for (const char* side : {"mps2_an385", "qemu_ref"}) {
    INFO(side);
    std::string outputs = r.dir + "/outputs/hwfarm_cut__" + side;
    CHECK(fs::exists(outputs + "/square.y.npy"));
    CHECK_FALSE(fs::exists(outputs + "/ramp.y.npy"));
  }
}

TEST_CASE("a FAIL message ending like a CRC suffix is a FAIL with its message, in version 1 and in version 2") {
  Lab lab;
  for (const char* variant : {"star", "v2star"}) {
    INFO(variant);
    // Given "HWFARM TEST ramp FAIL bad word at *20003f00" (in version 2
    // followed by the record's own CRC),
    Lab::Ran r = lab.run(variant);
    INFO(r.out);
    // the case fails as the firmware said, a test failure, not the lab's.
    CHECK(r.exit_code == 10);
    CHECK(text(r.target, "failure_class") == "test");
    CHECK(text(r.target, "reason") == "ramp: FAIL: bad word at *20003f00");
    std::string junit = readFile(r.dir + "/junit.xml");
    CHECK(junit.find("<failure type=\"test\" message=\"FAIL: bad word at *20003f00\">") != std::string::npos);
    CHECK(junit.find("CRC") == std::string::npos);
  }
}

TEST_CASE("a record after 64 KiB of other bytes on its line reads the same on a board and on the reference") {
  Lab lab;
  // Given "HWFARM TEST hidden FAIL" after 65,536 bytes of junk on one line,
  Lab::Ran r = lab.run("longline");
  INFO(r.out);
  // it is no case on either side: both see the same damaged line, and the
  // board's verdict is the reference's own.
  CHECK(r.exit_code == 10);
  CHECK(text(r.target, "failure_class") == "test");
  CHECK(text(r.target, "reason").find("a record after other text on its line (HWFARM TEST hidden FAIL after 65536 bytes)") !=
        std::string::npos);
  CHECK(text(r.target, "reason") == text(r.ref, "reason") + " (the reference shows damaged records too: the firmware's)");
  CHECK(readFile(r.dir + "/junit.xml").find("FAIL: ") == std::string::npos);
}

TEST_CASE("version 2 runs say their record count was verified, and a miscount or a lost record fails the attempt") {
  Lab lab;
  // Given the pass run in version 2 and in version 1,
  Lab::Ran v2 = lab.run("v2");
  Lab::Ran v1 = lab.run("pass");
  // both pass, and only version 2's count is verified.
  CHECK(v2.exit_code == 0);
  CHECK(v1.exit_code == 0);
  CHECK(json::serialize(v2.target.at("protocol")) == R"({"version":2,"record_count":"verified"})");
  CHECK(json::serialize(v2.ref.at("protocol")) == R"({"version":2,"record_count":"verified"})");
  CHECK(json::serialize(v1.target.at("protocol")) == R"({"version":1,"record_count":"unverified"})");
  // A firmware whose END counts one record more than it printed fails,
  Lab::Ran miscount = lab.run("v2count");
  INFO(miscount.out);
  CHECK(miscount.exit_code == 10);
  CHECK(json::serialize(miscount.target.at("protocol")) == R"({"version":2,"record_count":"mismatch"})");
  // (the reference counts wrong too: the firmware's, never the lab's)
  CHECK(text(miscount.target, "reason") == "line 10: END: counts 8 records before it, 7 arrived intact: 1 lost on the "
                                           "way (the reference shows damaged records too: the firmware's)");
  CHECK(text(miscount.target, "failure_class") == "test");
  // and so does a run whose FAIL record's tag was damaged on the wire: its
  // FAIL is not read, but it is not lost either.
  Lab::Ran lost = lab.run("v2lost");
  INFO(lost.out);
  CHECK(lost.exit_code == 10);
  CHECK(json::serialize(lost.target.at("protocol")) == R"({"version":2,"record_count":"mismatch"})");
  CHECK(text(lost.target, "reason").rfind("line 6: a damaged record tag (HWFARO TEST ramp FAIL", 0) == 0);
  std::string junit = readFile(lost.dir + "/junit.xml");
  CHECK(junit.find("counts 7 records before it, 6 arrived intact: 1 lost on the way") != std::string::npos);
}

// The board's attempt failed as the firmware's, with `reason` in its
// verdict; the run exits 10.
static void firmwaresFailure(const Lab::Ran& r, const std::string& reason) {
  INFO(r.out);
  CHECK(r.exit_code == 10);
  CHECK(text(r.target, "failure_class") == "test");
  CHECK(text(r.target, "reason").find(reason) != std::string::npos);
}

TEST_CASE("verdict: integer outputs match exactly, a failing reference fails the target, and an output only the "
          "reference printed is missing, through hwfarmd") {
  Lab lab;
  // Given an image whose ramp.y (i32) is one more everywhere on the target
  // (PCC 1.0 against the reference), the board fails it: integers must be
  // equal, and it is the firmware's failure.
  Lab::Ran off = lab.run("offbyone");
  CHECK(text(off.ref, "outcome") == "pass");
  firmwaresFailure(off, "ramp.y: ");
  firmwaresFailure(off, "values outside atol 0 + rtol 0");
  // An image whose ramp case passes on the board but fails on the reference
  // simulator: the board does not pass against it.
  Lab::Ran ref = lab.run("reffail");
  CHECK(text(ref.ref, "reason") == "ramp: FAIL: expected 3 got 4");
  CHECK(text(ref.target, "reason").rfind("the reference qemu_ref fails its own tests: ramp: FAIL: expected 3 got 4", 0) ==
        0);
  firmwaresFailure(ref, "(the test fails on the simulator too)");
  CHECK(readFile(ref.dir + "/junit.xml").find("failures=\"0\"") == std::string::npos);
  // An output the reference printed outside any TEST record, which the
  // board did not print, is missing.
  Lab::Ran only = lab.run("refonly");
  CHECK(text(only.ref, "outcome") == "pass");
  firmwaresFailure(only, "boot.z: output missing (the reference has it)");
}

TEST_CASE("verdict: an early END hides nothing and the health-check image is no test run, through hwfarmd") {
  // (a drain window of 2 s: the record after END comes at once, but a
  // loaded machine may hold QEMU back longer than the default 250 ms)
  Lab lab("[runs]\ndrain_ms = 2000\n");
  // Given an image that prints END status=0 and then a FAIL record,
  Lab::Ran late = lab.run("afterend");
  INFO(late.out);
  // the board's and the reference's consoles are read after END: the run fails.
  CHECK(late.exit_code == 10);
  CHECK(text(late.target, "failure_class") == "test");
  CHECK(text(late.target, "reason").find("record after END") != std::string::npos);
  std::string junit = readFile(late.dir + "/junit.xml");
  CHECK(junit.find("failures=\"0\"") == std::string::npos);
  // The health-check image uploaded by mistake runs no test case: it never passes.
  Lab::Ran health = lab.run("health", "2");
  INFO(health.out);
  CHECK(health.exit_code == 10);
  CHECK(text(health.target, "failure_class") == "test");
  CHECK(readFile(health.dir + "/junit.xml").find("<failure") != std::string::npos);
}

namespace {

// junit.xml's test cases per image (their classname): how many, and how
// many fail or err.
struct JunitCases {
  int tests = 0, failures = 0, errors = 0;
};
std::map<std::string, JunitCases> junitByImage(const std::string& xml) {
  std::map<std::string, JunitCases> out;
  const std::string open = "<testcase classname=\"";
  for (size_t at = xml.find(open); at != std::string::npos; at = xml.find(open, at + 1)) {
    size_t name_end = xml.find('"', at + open.size());
    JunitCases& c = out[xml.substr(at + open.size(), name_end - at - open.size())];
    ++c.tests;
    size_t end = xml.find('>', name_end);
    if (xml[end - 1] == '/') continue; // <testcase .../>: passed
    std::string body = xml.substr(end, xml.find("</testcase>", end) - end);
    c.failures += body.find("<failure") != std::string::npos;
    c.errors += body.find("<error") != std::string::npos;
  }
  return out;
}

} // namespace

TEST_CASE("verdict: junit.xml's counts agree with the verdict for every test firmware variant, through hwfarmd") {
  Lab lab;
  // Given every test firmware there is (the rules, not its variants'
  // output, decide: a variant added later is checked too),
  std::vector<std::string> images;
  for (const auto& f : fs::directory_iterator(HWFARM_FIRMWARE_DIR))
    if (f.path().extension() == ".elf") images.push_back(f.path().string());
  std::sort(images.begin(), images.end());
  REQUIRE(images.size() >= 25);
  // run in one run on the simulated board against the reference,
  std::string out = lab.dir.file("out-all");
  std::vector<std::string> argv{HWFARMCTL_PATH, "--url", lab.daemon.url(), "run", "--lease", lab.lease,
                                "--deadline", "3", "--out", out};
  argv.insert(argv.end(), images.begin(), images.end());
  CommandResult r = runCommand(argv, {}, 300s);
  INFO(r.out << r.err);
  REQUIRE(fs::exists(out + "/summary.json"));
  json::value summary = json::parse(readFile(out + "/summary.json"));
  std::map<std::string, JunitCases> junit = junitByImage(readFile(out + "/junit.xml"));
  // each target verdict shows in junit.xml: a pass has no failing or
  // erring case, a test failure a <failure>, the lab's an <error> or a
  // <failure>; never an image without a case.
  size_t judged = 0, passed = 0;
  for (const auto& a : summary.at("attempts").as_array()) {
    if (a.at("reference").as_bool()) continue;
    std::string image = text(a.as_object(), "image"), outcome = text(a.as_object(), "outcome");
    INFO(image << ": " << outcome << " " << text(a.as_object(), "reason"));
    ++judged;
    const JunitCases& c = junit[image];
    CHECK(c.tests >= 1);
    if (outcome == "pass") {
      ++passed;
      CHECK(c.failures + c.errors == 0);
    } else if (text(a.as_object(), "failure_class") == "test") {
      CHECK(c.failures >= 1);
    } else {
      CHECK(c.failures + c.errors >= 1);
    }
  }
  CHECK(judged == images.size());
  // and the run's exit code says the same: some variants pass, most fail.
  CHECK(passed >= 5);
  CHECK(passed < judged);
  CHECK(r.status.code == 10);
}
