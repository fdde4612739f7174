#include "daemon/core/results/external_run.h"

#include <algorithm>

#include "daemon/core/run/case_summary.h"

namespace hwfarm::results {
namespace {

bool contains(const std::string& text, const std::string& part) {
  return part.empty() || text.find(part) != std::string::npos;
}

run::Outcome outcomeOf(CaseStatus s) {
  switch (s) {
    case CaseStatus::passed: return run::Outcome::pass;
    case CaseStatus::failed: return run::Outcome::fail;
    case CaseStatus::error: return run::Outcome::error;
    case CaseStatus::skipped: return run::Outcome::skip;
  }
  return run::Outcome::error;
}

// A case's name as the record shows it: JUnit's class and name
// ("tests.test_board.test_banner"), twister's case identifier.
std::string caseName(const HarnessResults& r, const HarnessCase& c) {
  if (r.format == "junit" && !c.classname.empty()) return c.classname + "." + c.name;
  return c.name;
}

// Its message: "TYPE: message" when the type says more.
std::string caseMessage(const HarnessCase& c) {
  std::string m = c.message;
  if (!c.type.empty() && m.find(c.type) == std::string::npos) m = m.empty() ? c.type : c.type + ": " + m;
  if (!c.error_message.empty()) m += " (and an error: " + c.error_message + ")";
  return m;
}

} // namespace

std::vector<InfraRule> defaultInfraRules() {
  return {
      {"serial port lost", "SerialException", "", "", ""},
      {"board fixture timed out at setup", "", "", "failed on setup with \"TimeoutError", ""},
      {"west flash failed", "", "", "west flash", ""},
      {"west flash failed", "", "", "'west', 'flash'", ""}, // (a CalledProcessError of an argv)
      {"twister harness could not flash", "", "", "Could not flash device", ""},
      {"twister flash error", "", "", "Flash error", ""},
      {"twister serial device error", "", "", "Serial Device Error", ""},
  };
}

const InfraRule* infrastructureRule(const HarnessCase& c, const std::vector<InfraRule>& rules) {
  // An error; or a failure whose teardown erred (pytest: the board fixture
  // found the board gone after the test's read failed): that error decides.
  bool error = c.status == CaseStatus::error;
  if (!error && !(c.status == CaseStatus::failed && (!c.error_type.empty() || !c.error_message.empty())))
    return nullptr;
  const std::string& type = error ? c.type : c.error_type;
  const std::string& message = error ? c.message : c.error_message;
  for (const auto& r : rules) {
    if (r.error.empty() && r.type.empty() && r.message.empty() && r.detail.empty()) continue;
    if (!r.error.empty() && !contains(type, r.error) && !contains(message, r.error)) continue;
    if (contains(type, r.type) && contains(message, r.message) && contains(c.detail, r.detail)) return &r;
  }
  return nullptr;
}

run::Record externalRecord(const ExternalRun& in, const std::vector<InfraRule>& rules) {
  run::Record r;
  r.id = in.id;
  r.lease_id = in.lease_id;
  r.kind = run::Kind::external;
  r.created_ms = r.ended_ms = in.created_ms;
  r.reference = run::ReferenceKind::none;
  r.suite = in.name;
  r.commit = in.commit;
  r.artifacts = in.artifacts;
  std::vector<std::string> formats;
  std::string files;
  for (const auto& [path, results] : in.results) {
    if (std::find(formats.begin(), formats.end(), results.format) == formats.end()) formats.push_back(results.format);
    files += (files.empty() ? "" : " ") + path;
  }
  for (const auto& f : formats) r.harness += (r.harness.empty() ? "" : "+") + f;
  r.images.push_back({in.name, files, "", ""});
  for (const auto& b : in.boards) r.targets.push_back({b, b, ""});

  // Every case, judged; those kept are chosen like a firmware's.
  std::vector<run::CaseReport> reports;
  std::vector<std::string> case_rules;
  run::Judgement j;
  double seconds = 0;
  size_t test_failures = 0, lab_errors = 0, total = 0;
  std::string first_test, first_lab;
  Evidence lab_evidence;
  for (const auto& [path, results] : in.results) {
    total += results.total();
    for (const auto& c : results.cases) {
      seconds += c.seconds;
      const InfraRule* rule = infrastructureRule(c, rules);
      std::string name = caseName(results, c);
      std::string message = caseMessage(c);
      if (rule) {
        ++lab_errors;
        if (first_lab.empty()) {
          first_lab = name + ": an error the lab's by rule \"" + rule->name + "\": " + message;
          lab_evidence.tool_output = c.detail;
          lab_evidence.console = c.output;
        }
      } else if (c.status == CaseStatus::error) {
        ++test_failures;
        if (first_test.empty()) first_test = name + ": an error no [[results.infrastructure]] rule matches: " + message;
      } else if (c.status == CaseStatus::failed) {
        ++test_failures;
        if (first_test.empty()) first_test = name + " failed: " + message;
      }
      reports.push_back({name, outcomeOf(c.status), message, {}});
      case_rules.push_back(rule ? rule->name : "");
    }
    // Failures and errors read but not kept (past the parser's bound) carry no rule: the firmware's.
    size_t kept_bad = static_cast<size_t>(std::count_if(results.cases.begin(), results.cases.end(), [](const HarnessCase& c) {
      return c.status == CaseStatus::error || c.status == CaseStatus::failed;
    }));
    if (results.errors + results.failed > kept_bad) {
      test_failures += results.errors + results.failed - kept_bad;
      if (first_test.empty())
        first_test = std::to_string(results.errors + results.failed - kept_bad) + " failure(s) past the cases read";
    }
  }
  std::vector<size_t> kept = run::keptCases(reports);
  for (size_t i : kept) {
    run::CaseVerdict cv{reports[i].name, reports[i].outcome, run::keptMessage(reports[i].message), {}, 0, case_rules[i]};
    j.cases.push_back(std::move(cv));
  }
  size_t passed = 0, failed = 0, errors = 0, skipped = 0;
  for (const auto& [path, results] : in.results) {
    passed += results.passed;
    failed += results.failed;
    errors += results.errors;
    skipped += results.skipped;
  }
  j.counts = {total, passed, failed, skipped, errors, total - kept.size()};
  if (total == 0) {
    ++test_failures;
    first_test = "the results have no test case";
  }
  if (test_failures > 0) {
    j.outcome = run::Outcome::fail;
    j.failure = FailureClass::test;
    j.reason = first_test;
    if (lab_errors > 0)
      j.reason += " (and " + std::to_string(lab_errors) + " error(s) the lab's, first: " + first_lab + ")";
  } else if (lab_errors > 0) {
    j.outcome = run::Outcome::error;
    j.failure = FailureClass::infrastructure;
    j.reason = lab_errors == 1 ? first_lab : first_lab + " (and " + std::to_string(lab_errors - 1) + " more)";
    j.evidence = std::move(lab_evidence);
  }
  run::AttemptEntry a;
  a.image = in.name;
  a.target = in.board.empty() ? "harness" : in.board;
  a.board = in.board;
  a.phase = run::Phase::done;
  a.seconds = seconds;
  a.judgement = std::move(j);
  r.attempts.push_back(std::move(a));
  r.judge();
  r.state = r.verdict();
  r.reason = r.attempts.front().judgement->reason;
  return r;
}

} // namespace hwfarm::results
