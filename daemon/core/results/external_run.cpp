#include "daemon/core/results/external_run.h"

#include <algorithm>

#include "daemon/core/run/case_summary.h"

namespace hwfarm::results {
namespace {

bool contains(const std::string& text, const std::string& part) {
  return part.empty() || text.find(part) != std::string::npos;
}

// Whether `part` is in the path of one of the traceback's location lines,
// "PATH:LINE: ..." at a line's start as pytest writes them. Only these: the
// traceback's other lines (source lines, indented or marked '>'; the
// exception's message, marked "E ") carry text the code under test chose.
bool inLocation(const std::string& detail, const std::string& part) {
  if (part.empty()) return true;
  for (size_t start = 0; start < detail.size();) {
    size_t end = detail.find('\n', start);
    if (end == std::string::npos) end = detail.size();
    std::string_view line(detail.data() + start, end - start);
    start = end + 1;
    if (line.empty() || line[0] == ' ' || line[0] == '\t' || line[0] == '>' || line.substr(0, 2) == "E ") continue;
    // PATH (no space) ":" digits ":" (then a space or the line's end)
    size_t colon = line.find(':');
    while (colon != std::string_view::npos) {
      size_t digits = colon + 1;
      while (digits < line.size() && line[digits] >= '0' && line[digits] <= '9') ++digits;
      if (digits > colon + 1 && digits < line.size() && line[digits] == ':' &&
          (digits + 1 == line.size() || line[digits + 1] == ' '))
        break;
      colon = line.find(':', colon + 1);
    }
    if (colon == std::string_view::npos) continue;
    std::string_view path = line.substr(0, colon);
    if (path.find(' ') != std::string_view::npos) continue;
    if (path.find(part) != std::string_view::npos) return true;
  }
  return false;
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
  // Every text of a rule is held against that one error: its type, its
  // message, its own traceback's locations.
  const std::string& type = error ? c.type : c.error_type;
  const std::string& message = error ? c.message : c.error_message;
  const std::string& detail = error ? c.detail : c.error_detail;
  for (const auto& r : rules) {
    if (r.error.empty() && r.type.empty() && r.message.empty() && r.detail.empty()) continue;
    if (!r.error.empty() && !contains(type, r.error) && !contains(message, r.error)) continue;
    if (contains(type, r.type) && contains(message, r.message) && inLocation(detail, r.detail)) return &r;
  }
  return nullptr;
}

void ExternalJudge::add(const std::string& path, const HarnessResults& results) {
  if (std::find(formats_.begin(), formats_.end(), results.format) == formats_.end()) formats_.push_back(results.format);
  files_ += (files_.empty() ? "" : " ") + path;
  total_ += results.total();
  passed_ += results.passed;
  failed_ += results.failed;
  errors_ += results.errors;
  skipped_ += results.skipped;
  size_t bad_seen = 0;
  for (const auto& c : results.cases) {
    seconds_ += c.seconds;
    const InfraRule* rule = infrastructureRule(c, rules_);
    std::string name = caseName(results, c);
    std::string message = caseMessage(c);
    bool bad = c.status == CaseStatus::failed || c.status == CaseStatus::error;
    if (bad) ++bad_seen;
    if (rule) {
      ++lab_errors_;
      if (first_lab_.empty()) {
        first_lab_ = name + ": an error the lab's by rule \"" + rule->name + "\": " + message;
        lab_evidence_.tool_output = c.status == CaseStatus::error ? c.detail : c.error_detail;
        lab_evidence_.console = c.output;
      }
    } else if (c.status == CaseStatus::error) {
      ++test_failures_;
      if (first_test_.empty()) first_test_ = name + ": an error no [[results.infrastructure]] rule matches: " + message;
    } else if (c.status == CaseStatus::failed) {
      ++test_failures_;
      if (first_test_.empty()) first_test_ = name + " failed: " + message;
    }
    // Kept as the record keeps a firmware's cases (keptCases): the failing
    // and erring ones first, in order; the others while room is left.
    std::vector<Kept>& into = bad ? bad_ : good_;
    if (into.size() < run::kKeptCases)
      into.push_back({order_, run::CaseVerdict{name, outcomeOf(c.status), run::keptMessage(message), {}, 0,
                                               rule ? rule->name : ""}});
    ++order_;
  }
  // Failures and errors read but not kept (past the parser's bound) carry no rule: the firmware's.
  if (results.errors + results.failed > bad_seen) {
    test_failures_ += results.errors + results.failed - bad_seen;
    if (first_test_.empty())
      first_test_ = std::to_string(results.errors + results.failed - bad_seen) + " failure(s) past the cases read";
  }
}

run::Record ExternalJudge::record(const ExternalRun& in) const {
  run::Record r;
  r.id = in.id;
  r.lease_id = in.lease_id;
  r.kind = run::Kind::external;
  r.created_ms = r.ended_ms = in.created_ms;
  r.reference = run::ReferenceKind::none;
  r.suite = in.name;
  r.commit = in.commit;
  r.artifacts = in.artifacts;
  for (const auto& f : formats_) r.harness += (r.harness.empty() ? "" : "+") + f;
  r.images.push_back({in.name, files_, "", ""});
  for (const auto& b : in.boards) r.targets.push_back({b, b, ""});

  run::Judgement j;
  std::vector<Kept> kept = bad_;
  for (const auto& k : good_)
    if (kept.size() < run::kKeptCases) kept.push_back(k);
  std::sort(kept.begin(), kept.end(), [](const Kept& a, const Kept& b) { return a.order < b.order; });
  for (const auto& k : kept) j.cases.push_back(k.verdict);
  j.counts = {total_, passed_, failed_, skipped_, errors_, total_ - kept.size()};
  size_t test_failures = test_failures_;
  std::string first_test = first_test_;
  if (total_ == 0) {
    ++test_failures;
    first_test = "the results have no test case";
  }
  if (test_failures > 0) {
    j.outcome = run::Outcome::fail;
    j.failure = FailureClass::test;
    j.reason = first_test;
    if (lab_errors_ > 0)
      j.reason += " (and " + std::to_string(lab_errors_) + " error(s) the lab's, first: " + first_lab_ + ")";
  } else if (lab_errors_ > 0) {
    j.outcome = run::Outcome::error;
    j.failure = FailureClass::infrastructure;
    j.reason = lab_errors_ == 1 ? first_lab_ : first_lab_ + " (and " + std::to_string(lab_errors_ - 1) + " more)";
    j.evidence = lab_evidence_;
  }
  run::AttemptEntry a;
  a.image = in.name;
  a.target = in.board.empty() ? "harness" : in.board;
  a.board = in.board;
  a.phase = run::Phase::done;
  a.seconds = seconds_;
  a.judgement = std::move(j);
  r.attempts.push_back(std::move(a));
  r.judge();
  r.state = r.verdict();
  r.reason = r.attempts.front().judgement->reason;
  return r;
}

run::Record externalRecord(const ExternalRun& in, const std::vector<InfraRule>& rules) {
  ExternalJudge judge(rules);
  for (const auto& [path, results] : in.results) judge.add(path, results);
  return judge.record(in);
}

} // namespace hwfarm::results
