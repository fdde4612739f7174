// daemon/core/results/external_run: a harness's published results (pytest's
// JUnit XML as pytest 7 writes it, twister.json) made a run record of kind
// external. Each failure is the firmware's; an error is the lab's only when
// a [[results.infrastructure]] rule matches it (or a failed case's teardown
// error), and the record names the rule; the run's state and class follow.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "daemon/core/results/external_run.h"
#include "daemon/core/results/harness_results.h"

using namespace hwfarm;
using namespace hwfarm::results;

namespace {

// pytest's <testsuites> around `cases` (pytest 7.2, xunit2: the default).
std::string pytestXml(const std::string& cases, int tests = 1) {
  return "<?xml version=\"1.0\" encoding=\"utf-8\"?><testsuites><testsuite name=\"pytest\" errors=\"0\" "
         "failures=\"0\" skipped=\"0\" tests=\"" +
         std::to_string(tests) +
         "\" time=\"0.041\" timestamp=\"2026-12-03T16:33:27.948030\" hostname=\"vm\">" + cases +
         "</testsuite></testsuites>";
}

const std::string kPass = R"(<testcase classname="tests.test_board" name="test_banner" time="0.001" />)";

// A test body's assertion: a <failure>, no type attribute (pytest >= 6).
const std::string kFailure =
    R"(<testcase classname="tests.test_board" name="test_echo" time="0.001"><failure message="AssertionError: assert 'hello' == 'hellp'&#10;  - hellp">def test_echo():
&gt;       assert "hello" == "hellp"
E       AssertionError: assert 'hello' == 'hellp'
E         - hellp

tests/test_board.py:27: AssertionError</failure></testcase>)";

// The board fixture could not open the serial port: an <error> at setup.
const std::string kSerialSetup =
    R"(<testcase classname="tests.test_board" name="test_flash_ok" time="0.001"><error message="failed on setup with &quot;serial.serialutil.SerialException: could not open port /dev/ttyACM0: [Errno 2] No such file or directory: '/dev/ttyACM0'&quot;">@pytest.fixture
    def board():
&gt;       return serial.Serial("/dev/ttyACM0", 115200)
E       serial.serialutil.SerialException: could not open port /dev/ttyACM0: [Errno 2] No such file or directory: '/dev/ttyACM0'

/usr/lib/python3/dist-packages/serial/serialposix.py:325: SerialException</error></testcase>)";

// A fixture of the suite's own that raised: an error, but the firmware's side.
const std::string kValueErrorSetup =
    R"(<testcase classname="tests.test_board" name="test_config" time="0.001"><error message="failed on setup with &quot;ValueError: baudrate must be an integer&quot;">@pytest.fixture
    def config():
&gt;       raise ValueError("baudrate must be an integer")
E       ValueError: baudrate must be an integer

tests/test_board.py:10: ValueError</error></testcase>)";

// The board vanished mid-test: the test's read failed (a <failure>) and the
// board fixture's teardown raised SerialException (a second <testcase> of
// the same name with the <error>), as pytest writes it.
const std::string kVanished =
    R"(<testcase classname="tests.test_board" name="test_read_vanished" time="0.000"><failure message="TimeoutError: no answer">board = Serial&lt;id=0x7f, open=True&gt;

    def test_read_vanished(board):
&gt;       raise TimeoutError("no answer")
E       TimeoutError: no answer

tests/test_board.py:30: TimeoutError</failure></testcase>)"
    R"(<testcase classname="tests.test_board" name="test_read_vanished" time="0.000"><error message="failed on teardown with &quot;serial.serialutil.SerialException: device reports readiness to read but returned no data (device disconnected or multiple access on port?)&quot;">@pytest.fixture
    def board():
        yield port
&gt;       port.close()
E       serial.serialutil.SerialException: device reports readiness to read but returned no data (device disconnected or multiple access on port?)

tests/conftest.py:15: SerialException</error></testcase>)";

const std::string kSerialSetupMessage =
    "failed on setup with \"serial.serialutil.SerialException: could not open port /dev/ttyACM0: [Errno 2] No such "
    "file or directory: '/dev/ttyACM0'\"";
const std::string kVanishedError =
    "failed on teardown with \"serial.serialutil.SerialException: device reports readiness to read but returned no "
    "data (device disconnected or multiple access on port?)\"";

HarnessResults junit(const std::string& xml, const std::string& file = "results/junit.xml") {
  Result<HarnessResults> r = parseJunitXml(xml, file);
  INFO(r.status().message());
  REQUIRE(r.ok());
  return *r;
}

ExternalRun runOf(std::vector<std::pair<std::string, HarnessResults>> results) {
  ExternalRun in;
  in.id = "run-7";
  in.lease_id = "lease-3";
  in.created_ms = 1796128783000;
  in.name = "pytest";
  in.commit = "0123abcd";
  in.boards = {"nucleo-0"};
  in.board = "nucleo-0";
  in.results = std::move(results);
  in.artifacts = {"artifacts/log.txt", "results/junit.xml"};
  return in;
}

run::Record recordOf(const std::string& xml, const std::vector<InfraRule>& rules = defaultInfraRules()) {
  return externalRecord(runOf({{"results/junit.xml", junit(xml)}}), rules);
}

const run::Judgement& judgementOf(const run::Record& r) {
  REQUIRE(r.attempts.size() == 1);
  REQUIRE(r.attempts[0].judgement.has_value());
  return *r.attempts[0].judgement;
}

const run::CaseVerdict& caseNamed(const run::Judgement& j, const std::string& name) {
  for (const auto& c : j.cases)
    if (c.name == name) return c;
  FAIL("no case " << name);
  return j.cases.front();
}

} // namespace

TEST_CASE("external: a run that only passed is passed with its record's fields from the publish") {
  run::Record r = recordOf(pytestXml(kPass));
  CHECK(r.kind == run::Kind::external);
  CHECK(r.id == "run-7");
  CHECK(r.lease_id == "lease-3");
  CHECK(r.created_ms == 1796128783000);
  CHECK(r.ended_ms == 1796128783000);
  CHECK(r.harness == "junit");
  CHECK(r.suite == "pytest");
  CHECK(r.commit == "0123abcd");
  CHECK(r.reference == run::ReferenceKind::none);
  REQUIRE(r.images.size() == 1);
  CHECK(r.images[0].name == "pytest");
  CHECK(r.images[0].file == "results/junit.xml");
  REQUIRE(r.targets.size() == 1);
  CHECK(r.targets[0].board == "nucleo-0");
  CHECK(r.artifacts == std::vector<std::string>{"artifacts/log.txt", "results/junit.xml"});
  CHECK(r.state == run::State::passed);
  CHECK(r.failure == FailureClass::none);
  CHECK(r.reason.empty());
  const run::Judgement& j = judgementOf(r);
  CHECK(r.attempts[0].board == "nucleo-0");
  CHECK(r.attempts[0].target == "nucleo-0");
  CHECK(r.attempts[0].phase == run::Phase::done);
  CHECK(j.outcome == run::Outcome::pass);
  CHECK(j.failure == FailureClass::none);
  CHECK(j.counts == run::CaseCounts{1, 1, 0, 0, 0, 0});
  REQUIRE(j.cases.size() == 1);
  CHECK(j.cases[0].name == "tests.test_board.test_banner");
  CHECK(j.cases[0].outcome == run::Outcome::pass);
  CHECK(j.cases[0].rule.empty());
}

TEST_CASE("external: a failure is the firmware's: failed and class test with the case and message as the reason") {
  run::Record r = recordOf(pytestXml(kPass + kFailure, 2));
  CHECK(r.state == run::State::failed);
  CHECK(r.failure == FailureClass::test);
  const run::Judgement& j = judgementOf(r);
  CHECK(j.outcome == run::Outcome::fail);
  CHECK(j.failure == FailureClass::test);
  CHECK(j.reason == "tests.test_board.test_echo failed: AssertionError: assert 'hello' == 'hellp'\n  - hellp");
  CHECK(r.reason == j.reason);
  CHECK(j.counts == run::CaseCounts{2, 1, 1, 0, 0, 0});
  const run::CaseVerdict& c = caseNamed(j, "tests.test_board.test_echo");
  CHECK(c.outcome == run::Outcome::fail);
  CHECK(c.rule.empty());
  // All kept (at most kKeptCases): in the file's order.
  REQUIRE(j.cases.size() == 2);
  CHECK(j.cases[0].name == "tests.test_board.test_banner");
  CHECK(j.cases[1].name == "tests.test_board.test_echo");
}

TEST_CASE("external: a fixture's SerialException at setup is the lab's by the default rule serial port lost") {
  run::Record r = recordOf(pytestXml(kPass + kSerialSetup, 2));
  CHECK(r.state == run::State::error);
  CHECK(r.failure == FailureClass::infrastructure);
  const run::Judgement& j = judgementOf(r);
  CHECK(j.outcome == run::Outcome::error);
  CHECK(j.failure == FailureClass::infrastructure);
  CHECK(j.reason == "tests.test_board.test_flash_ok: an error the lab's by rule \"serial port lost\": " +
                        kSerialSetupMessage);
  CHECK(r.reason == j.reason);
  // The evidence: the traceback.
  CHECK(j.evidence.tool_output.find("serialposix.py:325: SerialException") != std::string::npos);
  CHECK(j.counts == run::CaseCounts{2, 1, 0, 0, 1, 0});
  const run::CaseVerdict& c = caseNamed(j, "tests.test_board.test_flash_ok");
  CHECK(c.outcome == run::Outcome::error);
  CHECK(c.rule == "serial port lost");
  CHECK(c.message == kSerialSetupMessage);
}

TEST_CASE("external: a fixture's ValueError at setup matches no rule and is a test error") {
  run::Record r = recordOf(pytestXml(kValueErrorSetup));
  CHECK(r.state == run::State::failed);
  CHECK(r.failure == FailureClass::test);
  const run::Judgement& j = judgementOf(r);
  CHECK(j.outcome == run::Outcome::fail);
  CHECK(j.reason == "tests.test_board.test_config: an error no [[results.infrastructure]] rule matches: "
                    "failed on setup with \"ValueError: baudrate must be an integer\"");
  CHECK(j.counts == run::CaseCounts{1, 0, 0, 0, 1, 0});
  REQUIRE(j.cases.size() == 1);
  CHECK(j.cases[0].outcome == run::Outcome::error);
  CHECK(j.cases[0].rule.empty());
  CHECK(j.evidence.empty());
}

TEST_CASE("external: a failure whose teardown raised SerialException is the lab's (the board vanished mid-test)") {
  HarnessResults h = junit(pytestXml(kPass + kVanished, 2));
  // The parser folds the teardown's <testcase> into the failed one.
  REQUIRE(h.cases.size() == 2);
  CHECK(h.failed == 1);
  CHECK(h.cases[1].status == CaseStatus::failed);
  CHECK(h.cases[1].error_message == kVanishedError);
  const std::vector<InfraRule> rules = defaultInfraRules();
  const InfraRule* rule = infrastructureRule(h.cases[1], rules);
  REQUIRE(rule != nullptr);
  CHECK(rule->name == "serial port lost");
  CHECK(infrastructureRule(h.cases[0], rules) == nullptr); // a pass never

  run::Record r = externalRecord(runOf({{"results/junit.xml", h}}), defaultInfraRules());
  CHECK(r.state == run::State::error);
  CHECK(r.failure == FailureClass::infrastructure);
  const run::Judgement& j = judgementOf(r);
  CHECK(j.reason == "tests.test_board.test_read_vanished: an error the lab's by rule \"serial port lost\": "
                    "TimeoutError: no answer (and an error: " +
                        kVanishedError + ")");
  CHECK(j.counts == run::CaseCounts{2, 1, 1, 0, 0, 0});
  const run::CaseVerdict& c = caseNamed(j, "tests.test_board.test_read_vanished");
  CHECK(c.outcome == run::Outcome::fail);
  CHECK(c.rule == "serial port lost");

  // Without rules the same failure is the firmware's.
  run::Record none = externalRecord(runOf({{"results/junit.xml", h}}), {});
  CHECK(none.state == run::State::failed);
  CHECK(judgementOf(none).reason == "tests.test_board.test_read_vanished failed: TimeoutError: no answer (and an "
                                    "error: " +
                                        kVanishedError + ")");
  CHECK(judgementOf(none).cases[0].rule.empty());
}

TEST_CASE("external: a failure and a lab's error in one run: failed and class test and the lab's case still names its rule") {
  run::Record r = recordOf(pytestXml(kSerialSetup + kFailure + kPass, 3));
  CHECK(r.state == run::State::failed);
  CHECK(r.failure == FailureClass::test);
  const run::Judgement& j = judgementOf(r);
  CHECK(j.outcome == run::Outcome::fail);
  CHECK(j.failure == FailureClass::test);
  CHECK(j.reason == "tests.test_board.test_echo failed: AssertionError: assert 'hello' == 'hellp'\n  - hellp "
                    "(and 1 error(s) the lab's, first: tests.test_board.test_flash_ok: an error the lab's by rule "
                    "\"serial port lost\": " +
                        kSerialSetupMessage + ")");
  CHECK(j.counts == run::CaseCounts{3, 1, 1, 0, 1, 0});
  CHECK(caseNamed(j, "tests.test_board.test_flash_ok").rule == "serial port lost");
  CHECK(caseNamed(j, "tests.test_board.test_echo").rule.empty());
  CHECK(caseNamed(j, "tests.test_board.test_banner").rule.empty());
}

TEST_CASE("external: two lab's errors: the reason names the first and counts the rest") {
  std::string second = kSerialSetup;
  second.replace(second.find("test_flash_ok"), 13, "test_flash_2");
  run::Record r = recordOf(pytestXml(kSerialSetup + second, 2));
  CHECK(r.state == run::State::error);
  CHECK(judgementOf(r).reason == "tests.test_board.test_flash_ok: an error the lab's by rule \"serial port lost\": " +
                                     kSerialSetupMessage + " (and 1 more)");
}

TEST_CASE("external: the default rules, each by name, on the errors they are for") {
  std::vector<InfraRule> rules = defaultInfraRules();
  REQUIRE(rules.size() == 7);
  CHECK(rules[0].name == "serial port lost");
  CHECK(rules[1].name == "board fixture timed out at setup");
  CHECK(rules[2].name == "west flash failed");
  CHECK(rules[3].name == "west flash failed");
  CHECK(rules[4].name == "twister harness could not flash");
  CHECK(rules[5].name == "twister flash error");
  CHECK(rules[6].name == "twister serial device error");
  auto ruleFor = [&](CaseStatus status, const std::string& type, const std::string& message) -> std::string {
    HarnessCase c;
    c.name = "t";
    c.status = status;
    c.type = type;
    c.message = message;
    const InfraRule* r = infrastructureRule(c, rules);
    return r ? r->name : "";
  };
  CHECK(ruleFor(CaseStatus::error, "", "failed on setup with \"TimeoutError: board did not answer\"") ==
        "board fixture timed out at setup");
  // A TimeoutError in the test body, or at teardown, is not the setup's.
  CHECK(ruleFor(CaseStatus::error, "", "failed on teardown with \"TimeoutError: board did not answer\"") == "");
  CHECK(ruleFor(CaseStatus::failed, "", "TimeoutError: board did not answer") == "");
  CHECK(ruleFor(CaseStatus::error, "", "failed on setup with \"subprocess.CalledProcessError: Command 'west flash "
                                       "-d build --skip-rebuild' returned non-zero exit status 1.\"") ==
        "west flash failed");
  CHECK(ruleFor(CaseStatus::error, "", "failed on setup with \"subprocess.CalledProcessError: Command '['west', "
                                       "'flash', '-d', 'build']' returned non-zero exit status 1.\"") ==
        "west flash failed");
  CHECK(ruleFor(CaseStatus::error, "", "failed on setup with \"twister_harness.exceptions.TwisterHarnessException: "
                                       "Could not flash device 0672FF485550755187121723\"") ==
        "twister harness could not flash");
  CHECK(ruleFor(CaseStatus::error, "twister.none (suite error)", "Serial Device Error") ==
        "twister serial device error");
  // The error's `error` text may be in its type.
  CHECK(ruleFor(CaseStatus::error, "serial.serialutil.SerialException", "") == "serial port lost");
  // Case-sensitive.
  CHECK(ruleFor(CaseStatus::error, "", "failed on setup with \"serialexception\"") == "");
  // A failure, a skip or a pass never, even with the text.
  CHECK(ruleFor(CaseStatus::failed, "", "serial.serialutil.SerialException: gone") == "");
  CHECK(ruleFor(CaseStatus::skipped, "", "SerialException") == "");
  CHECK(ruleFor(CaseStatus::passed, "SerialException", "SerialException") == "");
}

TEST_CASE("external: custom rules: detail matching and every field given must match") {
  InfraRule by_detail{"usb hub reset", "", "", "", "/hwlab/usb.py"};
  HarnessCase c;
  c.name = "test_flash";
  c.status = CaseStatus::error;
  c.type = "hwlab.BoardError";
  c.message = "failed on setup with \"hwlab.BoardError: flash failed\"";
  c.detail = "    def test_flash(board):\n/usr/lib/python3/dist-packages/hwlab/usb.py:88: in reset\n"
             "    raise BoardError(\"flash failed\")\nE   hwlab.BoardError: flash failed\n\n"
             "/usr/lib/python3/dist-packages/hwlab/usb.py:88: BoardError";
  REQUIRE(infrastructureRule(c, {by_detail}) != nullptr);
  CHECK(infrastructureRule(c, {by_detail})->name == "usb hub reset");
  HarnessCase other = c;
  other.detail = "    def test_flash(board):\nconftest.py:12: BoardError";
  CHECK(infrastructureRule(other, {by_detail}) == nullptr);
  // Text the code under test chose is no location: a source line, a '>'
  // line, the exception's message ("E   ..."), a line with a space in its path.
  for (const char* forged : {"    x = 1  # /usr/lib/python3/dist-packages/hwlab/usb.py:1: in f",
                             ">       assert 0, '/usr/lib/python3/dist-packages/hwlab/usb.py:1: x'",
                             "E   BoardError: /usr/lib/python3/dist-packages/hwlab/usb.py:1: in f",
                             "see /usr/lib/python3/dist-packages/hwlab/usb.py:1: in f",
                             "/usr/lib/python3/dist-packages/hwlab/usb.py is where it failed"}) {
    HarnessCase f = c;
    f.detail = std::string("conftest.py:3: in board\n") + forged + "\nconftest.py:5: BoardError";
    INFO(forged);
    CHECK(infrastructureRule(f, {by_detail}) == nullptr);
  }

  InfraRule every{"every field", "BoardError", "hwlab.", "flash failed", "hwlab/usb.py"};
  REQUIRE(infrastructureRule(c, {every}) != nullptr);
  CHECK(infrastructureRule(c, {every})->name == "every field");
  // Each field alone made wrong: no match.
  for (int field = 0; field < 4; ++field) {
    InfraRule wrong = every;
    std::string* f = field == 0 ? &wrong.error : field == 1 ? &wrong.type : field == 2 ? &wrong.message : &wrong.detail;
    *f += "!";
    INFO(field);
    CHECK(infrastructureRule(c, {wrong}) == nullptr);
  }
  // `error` in the message when the type lacks it.
  InfraRule in_message{"in message", "flash failed", "", "", ""};
  CHECK(infrastructureRule(c, {in_message}) != nullptr);
  // The first matching rule wins; an empty rule (no text) matches nothing.
  InfraRule empty{"empty", "", "", "", ""};
  CHECK(infrastructureRule(c, {empty}) == nullptr);
  std::vector<InfraRule> rules{empty, other.detail.empty() ? every : by_detail, every};
  CHECK(infrastructureRule(c, rules)->name == "usb hub reset");

  // Through a record: the custom rule's name is the case's and the reason's.
  std::string xml = pytestXml(
      R"(<testcase classname="tests.test_flash" name="test_flash" time="2.5"><error message="failed on setup with &quot;hwlab.BoardError: flash failed&quot;">    def test_flash(board):
/usr/lib/python3/dist-packages/hwlab/usb.py:88: in reset
E   hwlab.BoardError: flash failed</error></testcase>)");
  run::Record r = recordOf(xml, {by_detail});
  CHECK(r.state == run::State::error);
  const run::Judgement& j = judgementOf(r);
  CHECK(j.reason == "tests.test_flash.test_flash: an error the lab's by rule \"usb hub reset\": failed on setup "
                    "with \"hwlab.BoardError: flash failed\"");
  CHECK(j.cases[0].rule == "usb hub reset");
  CHECK(r.attempts[0].seconds == 2.5);
  // The default rules do not know it: a test error.
  CHECK(recordOf(xml).state == run::State::failed);
}

TEST_CASE("external: a rule with a type only never matches pytest's errors which have no type attribute") {
  InfraRule by_type{"serial type", "", "SerialException", "", ""};
  // pytest (both families) writes <error message=...> without a type.
  for (const char* family : {"xunit2", "xunit1"}) {
    INFO(family);
    std::string xml = kSerialSetup;
    if (std::string(family) == "xunit1")
      xml.replace(xml.find(" time="), 0, " file=\"tests/test_board.py\" line=\"19\"");
    HarnessResults h = junit(pytestXml(xml));
    REQUIRE(h.cases.size() == 1);
    CHECK(h.cases[0].type.empty());
    CHECK(infrastructureRule(h.cases[0], {by_type}) == nullptr);
    run::Record r = externalRecord(runOf({{"results/junit.xml", h}}), {by_type});
    CHECK(r.state == run::State::failed);
    CHECK(r.failure == FailureClass::test);
  }
  // A harness that writes the type (xunit's own, or pytest's older files): matched by it.
  HarnessResults typed = junit(pytestXml(
      R"(<testcase classname="tests.test_board" name="test_flash_ok" time="0.1"><error type="serial.serialutil.SerialException" message="could not open port">trace</error></testcase>)"));
  REQUIRE(typed.cases.size() == 1);
  CHECK(typed.cases[0].type == "serial.serialutil.SerialException");
  REQUIRE(infrastructureRule(typed.cases[0], {by_type}) != nullptr);
  run::Record r = externalRecord(runOf({{"results/junit.xml", typed}}), {by_type});
  CHECK(r.state == run::State::error);
  CHECK(judgementOf(r).reason == "tests.test_board.test_flash_ok: an error the lab's by rule \"serial type\": "
                                 "serial.serialutil.SerialException: could not open port");
}

namespace {

// twister.json: one suite whose flashing failed (an error), one failed.
const char* kTwister = R"({
  "environment": {"os": "posix", "zephyr_version": "v3.7.0", "toolchain": "zephyr"},
  "testsuites": [
    {"name": "tests/kernel/common/kernel.common", "arch": "arm", "platform": "nrf52840dk/nrf52840",
     "dut": "000683290670", "status": "passed", "execution_time": "3.21",
     "testcases": [{"identifier": "kernel.common.atomic", "execution_time": "0.01", "status": "passed"}]},
    {"name": "tests/drivers/gpio/drivers.gpio", "arch": "arm", "platform": "nrf52840dk/nrf52840",
     "status": "error", "reason": "Flash error", "dut": "000683290670",
     "testcases": [{"identifier": "drivers.gpio.basic", "status": null}]}FAILED
  ]
})";

std::string twister(bool with_failure) {
  std::string text = kTwister;
  std::string failed =
      with_failure ? ",\n    {\"name\": \"tests/lib/c_lib/libraries.libc\", \"arch\": \"arm\", \"platform\": "
                     "\"nrf52840dk/nrf52840\", \"status\": \"failed\", \"reason\": \"Testsuite failed\", "
                     "\"testcases\": [{\"identifier\": \"libraries.libc.strtol\", \"status\": \"failed\", "
                     "\"execution_time\": \"0.20\"}]}"
                   : "";
  text.replace(text.find("FAILED"), 6, failed);
  return text;
}

} // namespace

TEST_CASE("external: twister's Flash error is the lab's by the default rule and a failed case the firmware's") {
  Result<HarnessResults> flash = parseTwisterJson(twister(false), "twister.json");
  INFO(flash.status().message());
  REQUIRE(flash.ok());
  ExternalRun in = runOf({{"results/twister.json", *flash}});
  in.name = "twister";
  run::Record r = externalRecord(in, defaultInfraRules());
  CHECK(r.harness == "twister");
  CHECK(r.state == run::State::error);
  CHECK(r.failure == FailureClass::infrastructure);
  const run::Judgement& j = judgementOf(r);
  CHECK(j.reason == "drivers.gpio.basic: an error the lab's by rule \"twister flash error\": twister.none (suite "
                    "error): Flash error");
  CHECK(j.counts == run::CaseCounts{2, 1, 0, 0, 1, 0});
  CHECK(caseNamed(j, "drivers.gpio.basic").rule == "twister flash error");
  CHECK(caseNamed(j, "kernel.common.atomic").rule.empty());

  Result<HarnessResults> failed = parseTwisterJson(twister(true), "twister.json");
  INFO(failed.status().message());
  REQUIRE(failed.ok());
  run::Record f = externalRecord(runOf({{"results/twister.json", *failed}}), defaultInfraRules());
  CHECK(f.state == run::State::failed);
  CHECK(f.failure == FailureClass::test);
  const run::Judgement& fj = judgementOf(f);
  CHECK(fj.reason.rfind("libraries.libc.strtol failed: ", 0) == 0);
  CHECK(fj.reason.find("(and 1 error(s) the lab's, first: drivers.gpio.basic: an error the lab's by rule "
                       "\"twister flash error\"") != std::string::npos);
  CHECK(fj.counts == run::CaseCounts{3, 1, 1, 0, 1, 0});
  CHECK(caseNamed(fj, "drivers.gpio.basic").rule == "twister flash error");

  // JUnit and twister in one run: the harness names both, the image both files.
  run::Record both = externalRecord(
      runOf({{"results/junit.xml", junit(pytestXml(kPass))}, {"results/twister.json", *flash}}), defaultInfraRules());
  CHECK(both.harness == "junit+twister");
  REQUIRE(both.images.size() == 1);
  CHECK(both.images[0].file == "results/junit.xml results/twister.json");
  CHECK(judgementOf(both).counts == run::CaseCounts{3, 2, 0, 0, 1, 0});
  CHECK(both.state == run::State::error);
}

TEST_CASE("external: results with no test case are a test failure") {
  run::Record r = recordOf("<testsuites><testsuite name=\"pytest\" tests=\"0\"/></testsuites>");
  CHECK(r.state == run::State::failed);
  CHECK(r.failure == FailureClass::test);
  const run::Judgement& j = judgementOf(r);
  CHECK(j.outcome == run::Outcome::fail);
  CHECK(j.reason == "the results have no test case");
  CHECK(j.counts == run::CaseCounts{0, 0, 0, 0, 0, 0});
  CHECK(j.cases.empty());
  // No results file at all: the same.
  run::Record nothing = externalRecord(runOf({}), defaultInfraRules());
  CHECK(nothing.state == run::State::failed);
  CHECK(nothing.reason == "the results have no test case");
  CHECK(nothing.harness.empty());
  // Only skipped cases are cases: passed.
  run::Record skipped = recordOf(pytestXml(
      R"(<testcase classname="t" name="test_skip" time="0"><skipped type="pytest.skip" message="no such board">skip</skipped></testcase>)"));
  CHECK(skipped.state == run::State::passed);
  CHECK(judgementOf(skipped).counts == run::CaseCounts{1, 0, 0, 1, 0, 0});
}

TEST_CASE("external: 500 failing cases: 100 kept failing first and the counts exact") {
  std::string cases;
  for (int i = 0; i < 300; ++i)
    cases += "<testcase classname=\"t\" name=\"test_pass_" + std::to_string(i) + "\" time=\"0.01\"/>";
  for (int i = 0; i < 500; ++i)
    cases += "<testcase classname=\"t\" name=\"test_fail_" + std::to_string(i) +
             "\" time=\"0.01\"><failure message=\"assert " + std::to_string(i) + "\">trace</failure></testcase>";
  for (int i = 0; i < 7; ++i)
    cases += "<testcase classname=\"t\" name=\"test_serial_" + std::to_string(i) +
             "\" time=\"0\"><error message=\"failed on setup with &quot;serial.serialutil.SerialException: gone&quot;\">"
             "trace</error></testcase>";
  run::Record r = recordOf(pytestXml(cases, 807));
  const run::Judgement& j = judgementOf(r);
  CHECK(j.counts == run::CaseCounts{807, 300, 500, 0, 7, 707});
  REQUIRE(j.cases.size() == run::kKeptCases);
  for (const auto& c : j.cases) CHECK(c.outcome == run::Outcome::fail);
  CHECK(j.cases[0].name == "t.test_fail_0");
  CHECK(r.state == run::State::failed);
  CHECK(j.reason == "t.test_fail_0 failed: assert 0 (and 7 error(s) the lab's, first: t.test_serial_0: an error the "
                    "lab's by rule \"serial port lost\": failed on setup with \"serial.serialutil.SerialException: "
                    "gone\")");
  CHECK(r.attempts[0].seconds == Approx(8.0));

  // Cases past the parser's own bound are counted; their failures the firmware's.
  HarnessLimits small;
  small.kept_cases = 2;
  std::string few;
  for (int i = 0; i < 2; ++i)
    few += "<testcase classname=\"t\" name=\"test_serial_" + std::to_string(i) +
           "\" time=\"0\"><error message=\"failed on setup with &quot;serial.serialutil.SerialException: gone&quot;\">"
           "trace</error></testcase>";
  few += "<testcase classname=\"t\" name=\"test_late\" time=\"0\"><failure message=\"late\"/></testcase>";
  Result<HarnessResults> bounded = parseJunitXml(pytestXml(few, 3), "results/junit.xml", small);
  REQUIRE(bounded.ok());
  REQUIRE(bounded->cases.size() == 2);
  CHECK(bounded->cases_left_out == 1);
  run::Record b = externalRecord(runOf({{"results/junit.xml", *bounded}}), defaultInfraRules());
  CHECK(b.state == run::State::failed);
  CHECK(judgementOf(b).counts == run::CaseCounts{3, 0, 1, 0, 2, 1});
  CHECK(judgementOf(b).reason == "1 failure(s) past the cases read (and 2 error(s) the lab's, first: t.test_serial_0: "
                                 "an error the lab's by rule \"serial port lost\": failed on setup with "
                                 "\"serial.serialutil.SerialException: gone\")");
}

TEST_CASE("external: a long message is kept cut in the record") {
  std::string message(3000, 'm');
  run::Record r = recordOf(pytestXml("<testcase classname=\"t\" name=\"test_long\" time=\"0\"><failure message=\"" +
                                     message + "\">trace</failure></testcase>"));
  const run::Judgement& j = judgementOf(r);
  REQUIRE(j.cases.size() == 1);
  CHECK(j.cases[0].message == run::keptMessage(message));
  CHECK(j.cases[0].message.size() < 1100);
}

TEST_CASE("external: the record's JSON reads back with its kind, harness and each case's rule") {
  run::Record r = recordOf(pytestXml(kPass + kFailure + kSerialSetup + kVanished, 4));
  std::string json = r.toJson();
  CHECK(json.find("\"kind\":\"external\"") != std::string::npos);
  CHECK(json.find("\"harness\":\"junit\"") != std::string::npos);
  CHECK(json.find("\"infrastructure_rule\":\"serial port lost\"") != std::string::npos);
  Result<run::Record> back = run::Record::fromJson(json);
  INFO(back.status().message());
  REQUIRE(back.ok());
  CHECK(back->kind == run::Kind::external);
  CHECK(back->harness == "junit");
  CHECK(back->state == r.state);
  CHECK(back->failure == r.failure);
  CHECK(back->reason == r.reason);
  const run::Judgement& j = judgementOf(*back);
  CHECK(j.counts == judgementOf(r).counts);
  REQUIRE(j.cases.size() == judgementOf(r).cases.size());
  for (size_t i = 0; i < j.cases.size(); ++i) {
    INFO(j.cases[i].name);
    CHECK(j.cases[i].name == judgementOf(r).cases[i].name);
    CHECK(j.cases[i].rule == judgementOf(r).cases[i].rule);
  }
  CHECK(caseNamed(j, "tests.test_board.test_flash_ok").rule == "serial port lost");
  CHECK(caseNamed(j, "tests.test_board.test_read_vanished").rule == "serial port lost");
  CHECK(caseNamed(j, "tests.test_board.test_echo").rule.empty());
  CHECK(back->toJson() == json);
  // A hwfarm run's JSON says neither kind nor harness, and reads back as hwfarm.
  run::Record plain;
  plain.id = "run-1";
  std::string plain_json = plain.toJson();
  CHECK(plain_json.find("\"kind\"") == std::string::npos);
  CHECK(plain_json.find("\"harness\"") == std::string::npos);
  Result<run::Record> plain_back = run::Record::fromJson(plain_json);
  REQUIRE(plain_back.ok());
  CHECK(plain_back->kind == run::Kind::hwfarm);
}

TEST_CASE("external: several boards and no board named: the attempt's target is harness") {
  ExternalRun in = runOf({{"results/junit.xml", junit(pytestXml(kPass))}});
  in.boards = {"nucleo-0", "nucleo-1"};
  in.board = "";
  run::Record r = externalRecord(in, defaultInfraRules());
  REQUIRE(r.targets.size() == 2);
  CHECK(r.targets[1].board == "nucleo-1");
  CHECK(r.attempts[0].target == "harness");
  CHECK(r.attempts[0].board.empty());
  CHECK(r.state == run::State::passed);
}

TEST_CASE("external: a failure's teardown error is held against a rule with its own texts only") {
  // The review's abuse: a test fails with the lab fixture's path in its
  // assertion, and a conftest fixture of the pull request raises
  // SerialException at teardown. Neither is the lab's fixture's location.
  InfraRule lab{"lab fixture", "SerialException", "", "", "/usr/lib/python3/dist-packages/lab_fixtures/"};
  std::string xml = pytestXml(
      R"(<testcase classname="test_x" name="test_read" time="0.1"><failure message="AssertionError: see /usr/lib/python3/dist-packages/lab_fixtures/">def test_read():
&gt;       assert out == [0, 1, 3], "see /usr/lib/python3/dist-packages/lab_fixtures/"
E       AssertionError: see /usr/lib/python3/dist-packages/lab_fixtures/

test_x.py:4: AssertionError</failure></testcase>
<testcase classname="test_x" name="test_read" time="0.0"><error message="failed on teardown with &quot;conftest.SerialException: gone&quot;">    def board():
&gt;       raise SerialException("gone")
E       conftest.SerialException: gone

conftest.py:9: SerialException</error></testcase>)");
  run::Record r = recordOf(xml, {lab});
  CHECK(r.state == run::State::failed);
  CHECK(judgementOf(r).cases[0].rule.empty());
  // The same failure whose teardown error the lab's fixture raised: the lab's.
  std::string real = pytestXml(
      R"(<testcase classname="test_x" name="test_read" time="0.1"><failure message="serial.SerialException: read failed">test_x.py:4: SerialException</failure></testcase>
<testcase classname="test_x" name="test_read" time="0.0"><error message="failed on teardown with &quot;serial.SerialException: gone&quot;">    def board():
/usr/lib/python3/dist-packages/lab_fixtures/board.py:40: in board
E       serial.SerialException: gone

/usr/lib/python3/dist-packages/lab_fixtures/board.py:40: SerialException</error></testcase>)");
  run::Record lost = recordOf(real, {lab});
  CHECK(lost.state == run::State::error);
  CHECK(judgementOf(lost).cases[0].rule == "lab fixture");
}
