// daemon/core/run/report: verdicts and failure classes from parsed consoles,
// and the junit.xml (checked with xmllint against
// tests/junit-10-contract.xsd) and golden_results.json they give.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <functional>

#include <boost/json.hpp>

#include "daemon/core/run/case_summary.h"
#include "daemon/core/run/record.h"
#include "daemon/core/run/report.h"
#include "daemon/core/run/thresholds.h"
#include "tests/support/process.h"

using namespace hwfarm;
using namespace hwfarm::run;

namespace {

const char* kPass =
    "boot\n"
    "HWFARM BEGIN suite=selftest\n"
    "HWFARM TEST square PASS\n"
    "HWFARM OUTPUT square.y f32 4 -1 -0.875 -0.5 0.125\n"
    "HWFARM TEST ramp PASS\n"
    "HWFARM OUTPUT ramp.y i32 4 0 1 2 3\n"
    "HWFARM END status=0\n";

Attempt attempt(const std::string& target, const std::string& console, bool timed_out = false) {
  Attempt a;
  a.image = "pass";
  a.target = target;
  a.board = target + "-board";
  Parser p;
  p.feed(console);
  p.finish();
  a.parsed = std::move(p).take();
  a.timed_out = timed_out;
  a.seconds = 0.0421;
  a.trace_tail = console;
  return a;
}

std::string replaced(std::string s, const std::string& from, const std::string& to) {
  s.replace(s.find(from), from.size(), to);
  return s;
}

const CaseReport* caseOf(const TargetReport& r, const std::string& name) {
  for (const auto& c : r.cases)
    if (c.name == name) return &c;
  return nullptr;
}

// xmllint's verdict on `xml` against the contract schema ("" when valid).
std::string schemaErrors(const std::string& xml) {
  test::TempDir dir;
  std::string file = dir.write("junit.xml", xml);
  std::string log = dir.file("xmllint.log");
  std::string cmd = "xmllint --noout --schema " + std::string(HWFARM_SOURCE_DIR) + "/tests/junit-10-contract.xsd " +
                    file + " >" + log + " 2>&1";
  int rc = std::system(cmd.c_str());
  return rc == 0 ? std::string() : test::readFile(log);
}

} // namespace

TEST_CASE("a target that matches the reference passes every case, with each output's metrics") {
  Attempt ref = attempt("qemu_ref", kPass);
  TargetReport r = evaluate(attempt("nucleo_0", kPass), &ref, nullptr);
  CHECK(r.outcome == Outcome::pass);
  CHECK(r.failure == FailureClass::none);
  REQUIRE(r.cases.size() == 2);
  for (const auto& c : r.cases) CHECK(c.outcome == Outcome::pass);
  REQUIRE(r.cases[0].outputs.size() == 1);
  const Comparison& m = r.cases[0].outputs[0].comparison;
  CHECK(m.actual_pcc == 1.0);
  CHECK(m.allclose);
  CHECK(m.max == 0.0);
  CHECK(r.end_status == 0);
}

TEST_CASE("an output below its threshold fails its case as a test failure, with the metrics in the message") {
  Attempt ref = attempt("qemu_ref", kPass);
  Attempt bad = attempt("nucleo_0", replaced(kPass, "-1 -0.875 -0.5 0.125", "0.125 -0.5 -0.875 -1"));
  TargetReport r = evaluate(bad, &ref, nullptr);
  CHECK(r.outcome == Outcome::fail);
  CHECK(r.failure == FailureClass::test);
  const CaseReport* sq = caseOf(r, "square");
  REQUIRE(sq);
  CHECK(sq->outcome == Outcome::fail);
  CHECK(sq->message.rfind("square.y: ", 0) == 0);
  CHECK(sq->message.find("PCC ") != std::string::npos);
  CHECK(caseOf(r, "ramp")->outcome == Outcome::pass);
  // A looser threshold for that output passes it.
  TargetReport loose = evaluate(bad, &ref, [](std::string_view, std::string_view c, std::string_view, Dtype) {
    Thresholds t;
    if (c == "square") t.expected_pcc = -1.0;
    return t;
  });
  CHECK(loose.outcome == Outcome::pass);
}

TEST_CASE("the firmware's FAIL, a hang, a bad end status and a missing output are test failures") {
  Attempt ref = attempt("qemu_ref", kPass);
  TargetReport failed = evaluate(attempt("t", replaced(kPass, "TEST ramp PASS", "TEST ramp FAIL expected 3 got 4")), &ref, nullptr);
  CHECK(failed.failure == FailureClass::test);
  CHECK(caseOf(failed, "ramp")->message == "FAIL: expected 3 got 4");

  TargetReport hung = evaluate(attempt("t", "HWFARM BEGIN suite=selftest\nHWFARM TEST square PASS\n", true), &ref, nullptr);
  CHECK(hung.outcome == Outcome::fail);
  CHECK(hung.failure == FailureClass::test);
  CHECK(hung.reason == "BEGIN but no END before the deadline (the firmware hung)");
  CHECK(caseOf(hung, "ramp")->message == "no TEST record for ramp (the reference has one)");

  TargetReport status = evaluate(attempt("t", replaced(kPass, "status=0", "status=2")), &ref, nullptr);
  CHECK(status.failure == FailureClass::test);
  CHECK(status.reason == "the firmware ended with status 2");

  TargetReport missing = evaluate(attempt("t", replaced(kPass, "HWFARM OUTPUT ramp.y i32 4 0 1 2 3\n", "")), &ref, nullptr);
  CHECK(caseOf(missing, "ramp")->outcome == Outcome::fail);
  CHECK(caseOf(missing, "ramp")->message == "ramp.y: output missing (the reference has it)");
}

TEST_CASE("an image that hangs on the reference too is the firmware's failure, not the lab's") {
  std::string hang = "HWFARM BEGIN suite=selftest\nHWFARM TEST square PASS\nHWFARM OUTPUT square.y f32 4 -1 -0.875 -0.5 0.125\n";
  Attempt ref = attempt("qemu_ref", hang, true);
  TargetReport r = evaluate(attempt("t", hang, true), &ref, nullptr);
  CHECK(r.failure == FailureClass::test);
  CHECK(r.reason == "BEGIN but no END before the deadline (the firmware hung)");
  REQUIRE(caseOf(r, "square"));
  CHECK(caseOf(r, "square")->outcome == Outcome::pass); // its output was compared, and matches
  REQUIRE(caseOf(r, "square")->outputs.size() == 1);
}

TEST_CASE("no console output, a failed flash, a corrupt record and a failed reference are infrastructure") {
  Attempt ref = attempt("qemu_ref", kPass);
  TargetReport silent = evaluate(attempt("t", "", true), &ref, nullptr);
  CHECK(silent.outcome == Outcome::error);
  CHECK(silent.failure == FailureClass::infrastructure);
  CHECK(silent.reason == "no console output before the deadline (the reference printed its records)");
  REQUIRE(caseOf(silent, "ramp"));
  CHECK(caseOf(silent, "ramp")->outcome == Outcome::error); // a case the reference has: not run
  CHECK(caseOf(silent, "ramp")->message ==
        "not run: no console output before the deadline (the reference printed its records)");

  Attempt flash = attempt("t", "");
  Evidence e;
  e.exit_code = 3;
  e.tool_output = "Error: target not halted";
  flash.status = Status::infrastructure(Code::io_error, "flash of nucleo-0 failed: openocd exited with status 3", e);
  TargetReport flashed = evaluate(flash, nullptr, nullptr);
  CHECK(flashed.outcome == Outcome::error);
  CHECK(flashed.failure == FailureClass::infrastructure);
  REQUIRE(flashed.evidence.exit_code);
  CHECK(*flashed.evidence.exit_code == 3);
  REQUIRE(flashed.cases.size() == 1);
  CHECK(flashed.cases[0].name == "(run)");
  CHECK(flashed.cases[0].outcome == Outcome::error);

  // (An OUTPUT record: in version 1 without CRCs so far, a TEST record's
  // suffix that does not match may be the end of its message.)
  char crc[16];
  const std::string square = "OUTPUT square.y f32 4 -1 -0.875 -0.5 0.125";
  std::snprintf(crc, sizeof crc, " *%08x", crc32("HWFARM " + square) ^ 1u);
  TargetReport corrupt = evaluate(attempt("t", replaced(kPass, square, square + crc)), &ref, nullptr);
  CHECK(corrupt.failure == FailureClass::infrastructure);
  CHECK(caseOf(corrupt, "square")->outcome == Outcome::error);

  Attempt broken_ref = attempt("qemu_ref", "");
  broken_ref.status = Status::infrastructure(Code::unavailable, "the simulator crashed");
  TargetReport no_ref = evaluate(attempt("t", kPass), &broken_ref, nullptr);
  CHECK(no_ref.failure == FailureClass::infrastructure);
  CHECK(no_ref.reason == "the reference qemu_ref failed: the simulator crashed");
  CHECK(caseOf(no_ref, "square")->outcome == Outcome::error);
}

TEST_CASE("junit.xml has one suite per target, failures, errors and skips, and is valid for Jenkins") {
  Attempt ref = attempt("qemu_ref", kPass);
  std::vector<TargetReport> reports;
  reports.push_back(evaluate(attempt("nucleo_0", kPass), &ref, nullptr));
  reports.push_back(evaluate(attempt("nucleo_1", replaced(kPass, "TEST ramp PASS", "TEST ramp SKIP no timer")), &ref, nullptr));
  Attempt garbage = attempt("nucleo_2", std::string("\x01\xff<&>\"\n") + replaced(kPass, "TEST ramp PASS", "TEST ramp FAIL <&\"x\">"));
  reports.push_back(evaluate(garbage, &ref, nullptr));
  Attempt flash = attempt("sim_a", "");
  flash.status = Status::infrastructure(Code::timeout, "flash timed out after 60 s");
  reports.push_back(evaluate(flash, &ref, nullptr));
  reports.push_back(evaluate(ref, nullptr, nullptr));
  std::string xml = junitXml("run-7", reports);
  CHECK(schemaErrors(xml).empty());
  INFO(xml);
  CHECK(xml.find("<testsuites name=\"run-7\" tests=\"10\" failures=\"1\" errors=\"2\" time=\"0.21") !=
        std::string::npos);
  CHECK(xml.find("<testsuite name=\"nucleo_1\" tests=\"2\" failures=\"0\" errors=\"0\" skipped=\"1\" time=\"0.042\">") !=
        std::string::npos);
  CHECK(xml.find("<skipped message=\"no timer\"/>") != std::string::npos);
  CHECK(xml.find("<failure type=\"test\" message=\"FAIL: &lt;&amp;&quot;x&quot;&gt;\">") != std::string::npos);
  CHECK(xml.find("<error type=\"infrastructure\" message=\"not run: flash timed out after 60 s\">") !=
        std::string::npos);
  CHECK(xml.find("<testcase classname=\"pass\" name=\"square\" time=\"0.021\"/>") != std::string::npos);
  CHECK(xml.find("\\x01\\xff&lt;&amp;&gt;") != std::string::npos); // the trace's garbage, made safe
  CHECK(xml.find("<property name=\"board\" value=\"nucleo_0-board\"/>") != std::string::npos);
  // The check can fail: a suite without its counts is refused.
  std::string broken = replaced(xml, " failures=\"0\" errors=\"0\" skipped=\"1\"", "");
  CHECK_FALSE(schemaErrors(broken).empty());
  CHECK_FALSE(schemaErrors(replaced(xml, "time=\"0.042\"", "time=\"0.0421\"")).empty());
}

namespace {

// A console of `n` cases, case0 .. case<n-1>: those whose number `fails`
// says fail ("FAIL boom"), every other one passes.
std::string manyCases(size_t n, const std::function<bool(size_t)>& fails) {
  std::string out = "HWFARM BEGIN suite=many\n";
  for (size_t i = 0; i < n; ++i)
    out += "HWFARM TEST case" + std::to_string(i) + (fails(i) ? " FAIL boom\n" : " PASS\n");
  return out + "HWFARM END status=0\n";
}

} // namespace

TEST_CASE("the record keeps 100 cases of an attempt, failing ones first, and counts all of them") {
  // Given an attempt of 5,000 cases whose last 150 fail (the firmware's
  // way, judged without a reference),
  TargetReport report = evaluate(attempt("nucleo_0", manyCases(5000, [](size_t i) { return i >= 4850; })), nullptr,
                                 nullptr);
  REQUIRE(report.cases.size() == 5000);
  // when the record keeps it,
  Judgement j = judgementOf(report, false);
  // then its verdict is the report's, from every case,
  CHECK(j.outcome == Outcome::fail);
  CHECK(j.failure == FailureClass::test);
  // it lists the first 100 failing cases, in their order,
  REQUIRE(j.cases.size() == kKeptCases);
  CHECK(j.cases.front().name == "case4850");
  CHECK(j.cases.back().name == "case4949");
  // and counts all 5,000, saying 4,900 were left out.
  CHECK(j.counts == CaseCounts{5000, 4850, 150, 0, 0, 4900});
  // Read back from its JSON, the counts are the same; a record that lists
  // every case and has no counts (an older hwfarmd's) gets them from its
  // cases.
  Record r;
  r.state = State::failed;
  r.attempts.push_back({"pass", "nucleo_0", "nucleo-0", false, Phase::done});
  r.attempts.back().judgement = j;
  Result<Record> back = Record::fromJson(r.toJson());
  REQUIRE(back.ok());
  CHECK(back->attempts[0].judgement->counts == j.counts);
  CHECK(back->attempts[0].judgement->cases.size() == kKeptCases);
  std::string older = r.toJson();
  older.replace(older.find(",\"counts\""), older.find("}", older.find(",\"counts\"")) + 1 - older.find(",\"counts\""), "");
  older = replaced(older, ",\"cases_left_out\":4900", "");
  Result<Record> old = Record::fromJson(older);
  REQUIRE(old.ok());
  CHECK(old->attempts[0].judgement->counts == CaseCounts{100, 0, 100, 0, 0, 0});
}

TEST_CASE("a kept case lists 20 of its outputs, failing ones first, and counts the rest") {
  // Given a case of 500 outputs, of which o300 .. o309 differ from the
  // reference's,
  auto console = [](bool drifted) {
    std::string out = "HWFARM BEGIN suite=many\nHWFARM TEST t PASS\n";
    for (size_t i = 0; i < 500; ++i)
      out += "HWFARM OUTPUT t.o" + std::to_string(i) + " i32 1 " +
             std::to_string(drifted && i >= 300 && i < 310 ? 7 : 1) + "\n";
    return out + "HWFARM END status=0\n";
  };
  Attempt ref = attempt("qemu_ref", console(false));
  TargetReport report = evaluate(attempt("nucleo_0", console(true)), &ref, nullptr);
  REQUIRE(report.cases.size() == 1);
  REQUIRE(report.cases[0].outputs.size() == 500);
  // when the record keeps it,
  Judgement j = judgementOf(report, false);
  // then the case fails on every output that differs,
  CHECK(j.outcome == Outcome::fail);
  REQUIRE(j.cases.size() == 1);
  // and lists the ten that fail and the first ten others, in their order,
  const CaseVerdict& c = j.cases[0];
  REQUIRE(c.outputs.size() == kKeptOutputs);
  CHECK(c.outputs_left_out == 480);
  std::vector<std::string> keys;
  for (const auto& o : c.outputs) keys.push_back(o.key);
  CHECK(keys.front() == "t.o0");
  CHECK(keys[9] == "t.o9");
  CHECK(keys[10] == "t.o300");
  CHECK(keys.back() == "t.o309");
  for (size_t i = 10; i < 20; ++i) CHECK(c.outputs[i].verdict == Verdict::fail);
  // (the count is read back from the record's JSON, absent when 0)
  Record r;
  r.state = State::failed;
  r.attempts.push_back({"pass", "nucleo_0", "nucleo-0", false, Phase::done});
  r.attempts.back().judgement = j;
  std::string text = r.toJson();
  CHECK(text.find("\"outputs_left_out\":480") != std::string::npos);
  Result<Record> back = Record::fromJson(text);
  REQUIRE(back.ok());
  CHECK(back->attempts[0].judgement->cases[0].outputs_left_out == 480);
  CHECK(back->attempts[0].judgement->cases[0].outputs.size() == kKeptOutputs);
  // A case of at most 20 outputs lists them all.
  Judgement small = judgementOf(evaluate(attempt("nucleo_0", kPass), nullptr, nullptr), false);
  for (const auto& kept : small.cases) CHECK(kept.outputs_left_out == 0);
  CHECK(Record{}.toJson().find("outputs_left_out") == std::string::npos);
}

TEST_CASE("an attempt of at most 100 cases keeps them all, and a long message is cut at a UTF-8 boundary") {
  TargetReport report = evaluate(attempt("nucleo_0", manyCases(100, [](size_t i) { return i == 99; })), nullptr, nullptr);
  Judgement j = judgementOf(report, false);
  REQUIRE(j.cases.size() == 100);
  CHECK(j.cases.front().name == "case0"); // in their order: nothing was chosen
  CHECK(j.counts == CaseCounts{100, 99, 1, 0, 0, 0});
  // A message of 2,000 bytes keeps its first 1,024, never half a character.
  std::string message = std::string(1023, 'x') + "\xc3\xa9" + std::string(975, 'y');
  CHECK(keptMessage(message) == std::string(1023, 'x') + " [... 977 more bytes]");
  CHECK(keptMessage("short") == "short");
}

TEST_CASE("junit.xml lists 100 cases per image and one case that counts the rest, failing when one of them failed") {
  // Given an image whose 1,000 cases pass but for the last, and one whose
  // 300 cases all pass,
  Attempt late = attempt("nucleo_0", manyCases(1000, [](size_t i) { return i == 999; }));
  Attempt fine = attempt("nucleo_1", manyCases(300, [](size_t) { return false; }));
  std::vector<TargetReport> reports{evaluate(late, nullptr, nullptr), evaluate(fine, nullptr, nullptr)};
  // when junit.xml is written,
  std::string xml = junitXml("run-8", reports);
  INFO(xml.substr(0, 2000));
  // then it is valid for Jenkins,
  CHECK(schemaErrors(xml).empty());
  // the failing case is listed and the 900 left out are counted
  // by a passing case, as they all passed;
  CHECK(xml.find("<testsuite name=\"nucleo_0\" tests=\"101\" failures=\"1\" errors=\"0\" skipped=\"0\"") !=
        std::string::npos);
  CHECK(xml.find("name=\"case999\" time=\"0.000\">\n      <failure type=\"test\" message=\"FAIL: boom\">") !=
        std::string::npos);
  CHECK(xml.find("<testcase classname=\"pass\" name=\"(900 more cases)\" time=\"0.000\"/>") != std::string::npos);
  // the all-passing image's left-out cases pass too.
  CHECK(xml.find("<testsuite name=\"nucleo_1\" tests=\"101\" failures=\"0\"") != std::string::npos);
  CHECK(xml.find("name=\"(200 more cases)\" time=\"0.000\"/>") != std::string::npos);
  // An image of 150 failing cases: 50 of them left out fail their line.
  std::vector<TargetReport> failing{evaluate(attempt("n", manyCases(150, [](size_t) { return true; })), nullptr, nullptr)};
  std::string failed = junitXml("run-9", failing);
  CHECK(schemaErrors(failed).empty());
  CHECK(failed.find("tests=\"101\" failures=\"101\"") != std::string::npos);
  CHECK(failed.find("name=\"(50 more cases)\" time=\"0.000\">\n      <failure type=\"test\" message=\"50 more cases, "
                    "not listed: 50 failed, 0 erred, 0 skipped, 0 passed (of 150 cases;") != std::string::npos);
}

TEST_CASE("golden_results.json has ttrt's fields per output, keyed by image when a run has several") {
  Attempt ref = attempt("qemu_ref", kPass);
  TargetReport r = evaluate(attempt("nucleo_0", kPass), &ref, nullptr);
  boost::json::value v = boost::json::parse(goldenResultsJson({&r}, false));
  const auto& sq = v.at("square.y").as_object();
  for (const char* field : {"expected_pcc", "actual_pcc", "atol", "rtol", "allclose", "max", "mean_absolute_error",
                            "root_mean_square_error", "cosine_similarity", "count", "dtype", "verdict", "reason"})
    CHECK(sq.contains(field));
  CHECK(sq.at("actual_pcc").to_number<double>() == 1.0);
  CHECK(sq.at("expected_pcc").to_number<double>() == 0.99);
  CHECK(sq.at("allclose").as_bool());
  CHECK(sq.at("count").to_number<int>() == 4);
  CHECK(sq.at("dtype").as_string() == "f32");
  CHECK(sq.at("verdict").as_string() == "pass");
  CHECK(v.at("ramp.y").at("dtype").as_string() == "i32");
  boost::json::value keyed = boost::json::parse(goldenResultsJson({&r}, true));
  CHECK(keyed.as_object().contains("pass/square.y"));
  CHECK(goldenResultsJson({}, false) == "{}\n");
}

TEST_CASE("xmlSafe keeps valid UTF-8 and escapes every byte XML 1.0 refuses") {
  CHECK(xmlSafe("caf\xc3\xa9 \xe2\x9c\x93\t\n") == "caf\xc3\xa9 \xe2\x9c\x93\t\n");
  CHECK(xmlSafe(std::string("a\0b", 3)) == "a\\x00b");
  CHECK(xmlSafe("\xff\xc3") == "\\xff\\xc3");
  CHECK(xmlSafe("\xed\xa0\x80") == "\\xed\\xa0\\x80"); // a surrogate
  CHECK(xmlSafe("\xc0\xaf") == "\\xc0\\xaf");          // an overlong '/'
  CHECK(xmlSafe("\x7f") == "\\x7f");
}

TEST_CASE("threshold rules apply from the least specific to the most, each setting what it names") {
  std::vector<ThresholdRule> rules(4);
  rules[0].expected_pcc = 0.9;                     // every output
  rules[1].case_name = "conv";                     // a case
  rules[1].atol = 1e-3;
  rules[2].case_name = "conv";                     // an output of it: more specific, wins
  rules[2].output = "y";
  rules[2].expected_pcc = 0.5;
  rules[3].image = "other";                        // another image: never selected here
  rules[3].ignore = true;
  Thresholds y = resolveThresholds(rules, "img", "conv", "y");
  CHECK(y.expected_pcc == 0.5);
  CHECK(y.atol == 1e-3);
  CHECK(y.rtol == 1e-5); // the default: no rule names it
  CHECK_FALSE(y.ignore);
  Thresholds z = resolveThresholds(rules, "img", "conv", "z");
  CHECK(z.expected_pcc == 0.9);
  CHECK(z.atol == 1e-3);
  CHECK(resolveThresholds(rules, "img", "pool", "y").atol == 1e-8);
  CHECK(resolveThresholds(rules, "other", "pool", "y").ignore);
}

TEST_CASE("an ignored output is not compared, and one the target lacks is not missed") {
  Attempt ref = attempt("qemu_ref", kPass);
  Attempt bad = attempt("t", replaced(replaced(kPass, "-1 -0.875 -0.5 0.125", "0.125 -0.5 -0.875 -1"),
                                       "HWFARM OUTPUT ramp.y i32 4 0 1 2 3\n", ""));
  std::vector<ThresholdRule> rules(1);
  rules[0].ignore = true;
  TargetReport r = evaluate(bad, &ref, [&](std::string_view i, std::string_view c, std::string_view o, Dtype d) {
    return resolveThresholds(rules, i, c, o, d);
  });
  CHECK(r.outcome == Outcome::pass);
  CHECK(caseOf(r, "square")->outputs.empty());
}

TEST_CASE("a simulator's own end: a lockup or a reset is the firmware's with its evidence, anything else stays as it was") {
  Evidence by_exit;
  by_exit.exit_code = 0;
  Status lockup = run::simulatorEnd(Status::infrastructure(Code::unavailable, "QEMU exited"),
                                    "Lockup: CPU is locked up", false, by_exit);
  CHECK(lockup.failureClass() == FailureClass::test);
  CHECK(lockup.message() == "the firmware locked up the CPU (QEMU: Lockup: CPU is locked up)");
  CHECK(lockup.evidence().exit_code == 0);
  Status reset = run::simulatorEnd(Status::infrastructure(Code::unavailable, "QEMU exited"), "", true, by_exit);
  CHECK(reset.failureClass() == FailureClass::test);
  CHECK(reset.message() == "the firmware reset the simulator before its END record");
  Status crashed = run::simulatorEnd(Status::infrastructure(Code::unavailable, "QEMU was killed by signal 9"), "",
                                     false, by_exit);
  CHECK(crashed.isInfrastructure());
  CHECK(crashed.message() == "QEMU was killed by signal 9");
  CHECK(run::simulatorEnd(Status::success(), "", false, {}).ok());
}
