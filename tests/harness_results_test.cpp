// daemon/core/results: a harness's results as pytest (Debian's, run here)
// and twister write them, read into cases; malformed, cut and hostile
// files refused with where and why; the limits that bound what is kept.
#include <catch2/catch.hpp>

#include <filesystem>
#include <string>

#include "daemon/core/results/harness_results.h"
#include "daemon/core/results/xml_reader.h"
#include "tests/support/process.h"

using namespace hwfarm;
using namespace hwfarm::results;
using namespace hwfarm::test;

namespace {

// A suite with every outcome pytest reports.
const char* kSuite = R"py(import pytest

@pytest.fixture
def board():
    raise TimeoutError("board did not answer on /dev/ttyACM0")

@pytest.fixture
def broken_teardown():
    yield
    raise RuntimeError("teardown broke")

def test_pass(record_property):
    record_property("board", "nucleo-0")
    print("hello <&>")

def test_fail():
    assert 1 == 2, "expected 2"

def test_fixture_error(board):
    pass

def test_body_raises():
    raise TimeoutError("in the test body")

def test_skip():
    pytest.skip("no such board")

@pytest.mark.xfail(reason="known bug")
def test_xfail():
    assert False

def test_fail_and_teardown_error(broken_teardown):
    assert False
)py";

// What pytest wrote with `options`, run on kSuite.
std::string pytestJunit(const TempDir& dir, const std::vector<std::string>& options) {
  std::filesystem::create_directories(dir.file("suite"));
  dir.write("suite/test_board.py", kSuite);
  std::vector<std::string> argv{"/usr/bin/python3", "-m", "pytest", "-q", "-p", "no:cacheprovider",
                                "--junitxml=" + dir.file("out.xml")};
  argv.insert(argv.end(), options.begin(), options.end());
  argv.push_back(dir.file("suite"));
  CommandResult r = runCommand(argv);
  INFO(r.out << r.err);
  REQUIRE(r.status.code == 1); // (tests failed)
  return readFile(dir.file("out.xml"));
}

const HarnessCase& named(const HarnessResults& r, const std::string& name) {
  for (const auto& c : r.cases)
    if (c.name == name) return c;
  FAIL("no case " << name);
  return r.cases.front();
}

std::string refusal(const Result<HarnessResults>& r) {
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().code() == Code::invalid_argument);
  return r.status().message();
}

bool has(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

} // namespace

TEST_CASE("pytest's junit.xml in both families: each case with its status, message, detail, output and properties") {
  for (const char* family : {"xunit2", "xunit1"}) {
    INFO(family);
    TempDir dir;
    std::string xml = pytestJunit(dir, {"-o", std::string("junit_family=") + family, "-o", "junit_logging=system-out"});
    Result<HarnessResults> read = parseHarnessResults(xml, "junit.xml");
    INFO(read.status().message());
    REQUIRE(read.ok());
    const HarnessResults& r = *read;
    CHECK(r.format == "junit");
    // pytest's own count (tests="7"): the teardown's error, a second
    // <testcase> of the same name, is folded into its failing case.
    CHECK(r.total() == 7);
    CHECK(r.passed == 1);
    CHECK(r.failed == 3);
    CHECK(r.errors == 1);
    CHECK(r.skipped == 2);
    REQUIRE(r.cases.size() == 7);
    const HarnessCase& pass = named(r, "test_pass");
    CHECK(pass.status == CaseStatus::passed);
    CHECK(pass.suite == "pytest");
    CHECK(pass.classname == "test_board");
    CHECK(has(pass.output, "hello <&>"));
    if (std::string(family) == "xunit1")
      CHECK(pass.properties == std::vector<std::pair<std::string, std::string>>{{"board", "nucleo-0"}});
    const HarnessCase& fail = named(r, "test_fail");
    CHECK(fail.status == CaseStatus::failed);
    CHECK(fail.message == "AssertionError: expected 2\nassert 1 == 2");
    CHECK(has(fail.detail, "test_board.py:17: AssertionError"));
    // An exception in a fixture is an error; in the test body, a failure.
    const HarnessCase& fixture = named(r, "test_fixture_error");
    CHECK(fixture.status == CaseStatus::error);
    CHECK(fixture.message == "failed on setup with \"TimeoutError: board did not answer on /dev/ttyACM0\"");
    CHECK(has(fixture.detail, "def board():"));
    CHECK(named(r, "test_body_raises").status == CaseStatus::failed);
    CHECK(named(r, "test_skip").status == CaseStatus::skipped);
    CHECK(named(r, "test_skip").message == "no such board");
    CHECK(named(r, "test_xfail").status == CaseStatus::skipped);
    CHECK(named(r, "test_xfail").type == "pytest.xfail");
    // A failure is never hidden by an error after it.
    const HarnessCase& both = named(r, "test_fail_and_teardown_error");
    CHECK(both.status == CaseStatus::failed);
    CHECK(both.message == "assert False");
    CHECK(both.error_message == "failed on teardown with \"RuntimeError: teardown broke\"");
  }
}

TEST_CASE("a junit.xml cut short (a harness that crashed mid-suite) is refused, saying where") {
  TempDir dir;
  std::string xml = pytestJunit(dir, {});
  for (size_t cut : {xml.size() / 3, xml.size() / 2, xml.size() - 20}) {
    INFO(cut);
    std::string message = refusal(parseJunitXml(xml.substr(0, cut), "results/junit.xml"));
    INFO(message);
    CHECK(message.rfind("results/junit.xml:", 0) == 0);
    CHECK(has(message, "cut short?)"));
  }
}

TEST_CASE("malformed and hostile JUnit XML: each refusal exact") {
  auto read = [](const std::string& xml) { return refusal(parseJunitXml(xml, "j.xml")); };
  CHECK(read("") == "j.xml:1:1: no element: the file is empty or holds only text");
  CHECK(read("<!DOCTYPE t [<!ENTITY a \"aaaa\">]><testsuites/>") ==
        "j.xml:1:1: a DOCTYPE or other declaration, which is not accepted");
  CHECK(read("<html><body/></html>") ==
        "j.xml:1:1: expected <testsuites> or <testsuite> as the root element, got <html> (is this a JUnit XML file?)");
  CHECK(read("<testsuites>\n<testsuite name=\"a\"><testcase name=\"x\" time=\"abc\"/></testsuite></testsuites>") ==
        "j.xml:2:21: <testcase> time: expected a number of seconds, got \"abc\"");
  CHECK(read("<testsuites><testcase name=\"x\"/></testsuites>") == "j.xml:1:13: a <testcase> outside any <testsuite>");
  CHECK(read("<testsuite><testcase classname=\"c\"/></testsuite>") == "j.xml:1:12: a <testcase> without a name");
  CHECK(read("<testsuite><testcase name=\"a\"><testcase name=\"b\"/></testcase></testsuite>") ==
        "j.xml:1:31: a <testcase> inside a <testcase>");
  CHECK(read("<testsuite><testcase name=\"a\"></testsuite>") == "j.xml:1:31: </testsuite> closes <testcase>");
  CHECK(read("<testsuite name=\"a&b\"/>") == "j.xml:1:19: an '&' that starts no reference (write &amp;)");
  CHECK(read("<testsuite name=\"&xxe;\"/>") ==
        "j.xml:1:18: an unknown entity &xxe; (only &lt; &gt; &amp; &quot; &apos; and &#N;)");
  CHECK(read("<testsuite name=\"&#0;\"/>") == "j.xml:1:18: a character reference to no character: &#0;");
  CHECK(read("<testsuite name=\"a\" name=\"b\"/>") == "j.xml:1:21: attribute name given twice");
  CHECK(read("<testsuite/><testsuite/>") == "j.xml:1:13: a second root element <testsuite>");
  CHECK(read("<testsuite/>junk") == "j.xml:1:16: text after the root element");
  CHECK(read("<testsuite><!-- open") == "j.xml:1:12: a comment that never ends (no -->)");
  // Nested deeper than 32: a bomb of open elements never reaches the stack's end.
  std::string deep;
  for (int i = 0; i < 40; ++i) deep += "<testsuite>";
  CHECK(read(deep) == "j.xml:1:353: elements nested deeper than 32");
  // Entities and references are read; line ends in values become spaces.
  Result<HarnessResults> ok = parseJunitXml(
      "<testsuite name=\"s\"><testcase name=\"&lt;a&gt; &#233;&#x4e2d;\" time=\" 1.5 \">"
      "<failure message=\"two&#10;lines\"><![CDATA[<raw> & text]]></failure></testcase></testsuite>",
      "j.xml");
  REQUIRE(ok.ok());
  REQUIRE(ok->cases.size() == 1);
  CHECK(ok->cases[0].name == "<a> \xC3\xA9\xE4\xB8\xAD");
  CHECK(ok->cases[0].seconds == 1.5);
  CHECK(ok->cases[0].message == "two\nlines");
  CHECK(ok->cases[0].detail == "<raw> & text");
}

TEST_CASE("limits: a file too big and too many cases are refused, cases past those kept counted, texts cut to their tail") {
  HarnessLimits small;
  small.max_bytes = 4096;
  small.max_cases = 6;
  small.kept_cases = 2;
  small.max_text_bytes = 64;
  CHECK(refusal(parseJunitXml(std::string(5000, ' '), "j.xml", small)) ==
        "j.xml: 5000 bytes, more than the 4096 a results file may have");
  auto suite = [](int cases, const std::string& detail) {
    std::string xml = "<testsuite name=\"s\">";
    for (int i = 0; i < cases; ++i)
      xml += "<testcase name=\"c" + std::to_string(i) + "\"" +
             (i % 2 ? "><failure message=\"m\">" + detail + "</failure></testcase>" : "/>");
    return xml + "</testsuite>";
  };
  CHECK(refusal(parseJunitXml(suite(7, "d"), "j.xml", small)) == "j.xml: more than 6 test cases");
  std::string detail(300, 'x');
  detail += "THE END";
  Result<HarnessResults> r = parseJunitXml(suite(5, detail), "j.xml", small);
  REQUIRE(r.ok());
  CHECK(r->passed == 3);
  CHECK(r->failed == 2);
  REQUIRE(r->cases.size() == 2);
  CHECK(r->cases_left_out == 3);
  const std::string& kept = r->cases[1].detail;
  CHECK(kept.rfind("[earlier text cut]\n", 0) == 0);
  CHECK(kept.size() == std::string("[earlier text cut]\n").size() + 64);
  CHECK(kept.substr(kept.size() - 7) == "THE END");
}

// twister.json as Zephyr 3.7's twister writes it (twisterlib/reports.py,
// json_report): suites with their platform, status, reason, dut and log,
// cases with identifier, status, reason and execution_time as strings.
const char* kTwister = R"({
  "environment": {"os": "posix", "zephyr_version": "v3.7.0", "toolchain": "zephyr"},
  "testsuites": [
    {"name": "tests/kernel/common/kernel.common", "arch": "arm", "platform": "nrf52840dk/nrf52840",
     "path": "tests/kernel/common", "runnable": true, "retries": 0, "dut": "000683290670", "status": "passed",
     "execution_time": "3.21", "build_time": "40.00",
     "testcases": [{"identifier": "kernel.common.atomic", "execution_time": "0.01", "status": "passed"},
                   {"identifier": "kernel.common.bitfield", "status": "skipped", "reason": "not on this SoC"}]},
    {"name": "tests/lib/c_lib/libraries.libc", "arch": "arm", "platform": "nrf52840dk/nrf52840",
     "status": "failed", "reason": "Testsuite failed", "dut": "000683290670", "execution_time": "1.00",
     "log": "*** Booting Zephyr ***\nAssertion failed at strtol\n",
     "testcases": [{"identifier": "libraries.libc.strtol", "status": "failed", "execution_time": "0.20"},
                   {"identifier": "libraries.libc.memcpy", "status": "blocked"}]},
    {"name": "tests/drivers/gpio/drivers.gpio", "arch": "arm", "platform": "nrf52840dk/nrf52840",
     "status": "error", "reason": "Flash error", "dut": "000683290670",
     "testcases": [{"identifier": "drivers.gpio.basic", "status": null}]},
    {"name": "tests/net/net.ip", "arch": "arm", "platform": "nrf52840dk/nrf52840", "runnable": false,
     "status": "filtered", "reason": "Not runnable on device", "build_time": "0.00", "testcases": []}
  ]
})";

TEST_CASE("twister.json: suites and cases with their platform, device, status and reason") {
  Result<HarnessResults> read = parseHarnessResults(kTwister, "twister.json");
  INFO(read.status().message());
  REQUIRE(read.ok());
  const HarnessResults& r = *read;
  CHECK(r.format == "twister");
  REQUIRE(r.cases.size() == 6);
  CHECK(r.passed == 1);
  CHECK(r.skipped == 2); // skipped, and the filtered suite
  CHECK(r.failed == 2);  // the failed case, and the case the failed suite blocked
  CHECK(r.errors == 1);  // the case of the suite whose flashing failed
  const HarnessCase& atomic = named(r, "kernel.common.atomic");
  CHECK(atomic.suite == "tests/kernel/common/kernel.common");
  CHECK(atomic.platform == "nrf52840dk/nrf52840");
  CHECK(atomic.dut == "000683290670");
  CHECK(atomic.seconds == 0.01);
  CHECK(named(r, "kernel.common.bitfield").message == "not on this SoC");
  const HarnessCase& strtol = named(r, "libraries.libc.strtol");
  CHECK(strtol.status == CaseStatus::failed);
  CHECK(has(strtol.output, "Assertion failed at strtol")); // the suite's log, for a case without its own
  const HarnessCase& blocked = named(r, "libraries.libc.memcpy");
  CHECK(blocked.status == CaseStatus::failed);
  CHECK(blocked.type == "twister.blocked (suite failed)");
  const HarnessCase& flash = named(r, "drivers.gpio.basic");
  CHECK(flash.status == CaseStatus::error);
  CHECK(flash.message == "Flash error");
  CHECK(flash.type == "twister.none (suite error)");
  const HarnessCase& filtered = named(r, "tests/net/net.ip");
  CHECK(filtered.status == CaseStatus::skipped);
  CHECK(filtered.type == "twister.filtered");
  CHECK(filtered.message == "Not runnable on device");
}

TEST_CASE("a twister.json that is not JSON or not twister's is refused, naming the line or the value") {
  auto read = [](const std::string& text) { return refusal(parseTwisterJson(text, "twister.json")); };
  CHECK(read("{\n  \"testsuites\": [\n    {\"name\": \"a\",,}") ==
        "twister.json:3:18: not JSON: syntax error");
  CHECK(read("[]") == "twister.json: (the top): expected an object with \"testsuites\" (is this twister.json?)");
  CHECK(read("{\"testsuites\": {}}") == "twister.json: testsuites: expected an array (is this twister.json?)");
  CHECK(read("{\"testsuites\": [{\"name\": 5}]}") == "twister.json: testsuites[0].name: expected a string");
  CHECK(read("{\"testsuites\": [{\"name\": \"s\", \"testcases\": [{\"identifier\": \"a\"}, {\"identifier\": \"b\", "
             "\"status\": 1}]}]}") == "twister.json: testsuites[0].testcases[1].status: expected a string");
  CHECK(read("{\"testsuites\": [{\"name\": \"s\", \"testcases\": [{\"identifier\": \"a\", \"execution_time\": "
             "\"-1\"}]}]}") == "twister.json: testsuites[0].testcases[0].execution_time: expected a number of seconds");
  CHECK(read("{\"testsuites\": []} {\"testsuites\": []}") == "twister.json:1:20: not JSON: extra data");
  CHECK(read("{\"testsuites\": [{\"name\": \"s\", \"status\": \"timeout\"}]}") ==
        "twister.json: testsuites[0].status: expected passed, failed, error, skipped, filtered, not run, blocked, "
        "started or null");
  CHECK(read("{\"testsuites\": [{\"name\": \"s\", \"testcases\": [{\"identifier\": \"a\", \"status\": "
             "\"FAILED\"}]}]}") ==
        "twister.json: testsuites[0].testcases[0].status: expected passed, failed, error, skipped, filtered, not run, "
        "blocked, started or null");
  // Small values by the million would cost far more as JSON values than as text.
  CHECK(read("{\"testsuites\": [" + std::string(4u << 20, ',') + "]}") ==
        "twister.json: more than 4194304 JSON values");
  Result<HarnessResults> bom = parseHarnessResults("\xEF\xBB\xBF{\"testsuites\": []}", "twister.json");
  REQUIRE(bom.ok());
  CHECK(bom->format == "twister");
  std::string deep(40, '[');
  CHECK(read("{\"testsuites\": " + deep) == "twister.json:1:47: not JSON: too deep");
  CHECK(refusal(parseHarnessResults("results", "r.txt")) ==
        "r.txt:1:1: neither JUnit XML (starts with '<') nor twister.json (starts with '{')");
}

TEST_CASE("twister.json: a case that started and never ended fails, even in a suite twister called passed") {
  // Given a suite twister says passed, one of whose cases started but never
  // reported (a crash, a lost console) and one blocked,
  Result<HarnessResults> read = parseHarnessResults(R"({"testsuites": [
    {"name": "tests/a/a.b", "platform": "qemu_cortex_m3", "status": "passed",
     "testcases": [{"identifier": "a.b.one", "status": "passed"},
                   {"identifier": "a.b.two", "status": "started"},
                   {"identifier": "a.b.three", "status": "blocked"}]}]})", "twister.json");
  INFO(read.status().message());
  REQUIRE(read.ok());
  // the started case is a failure (the firmware's: never a pass, never a
  // skip), the blocked one did not run.
  const HarnessCase& two = named(*read, "a.b.two");
  CHECK(two.status == CaseStatus::failed);
  CHECK(two.message == "the case started and never ended");
  CHECK(two.type == "twister.started");
  CHECK(named(*read, "a.b.three").status == CaseStatus::skipped);
  CHECK(read->failed == 1);
  CHECK(read->skipped == 1);
  CHECK(read->passed == 1);
}
