#include "daemon/core/run/report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <set>
#include <unordered_map>
#include <unordered_set>

#include "common/shown_text.h"
#include "daemon/core/run/case_summary.h"
#include "daemon/core/run/json_text.h"
#include "daemon/core/run/thresholds.h"

namespace hwfarm::run {
namespace {

// `s` escaped for XML: as element text, or (`attribute`) inside "...",
// where quotes and line ends must be character references too.
std::string xmlEscaped(std::string_view s, bool attribute) {
  std::string out;
  for (char c : xmlSafe(s)) {
    if (c == '&') out += "&amp;";
    else if (c == '<') out += "&lt;";
    else if (c == '>') out += "&gt;";
    else if (attribute && c == '"') out += "&quot;";
    else if (attribute && (c == '\n' || c == '\r' || c == '\t')) out += "&#" + std::to_string(int(c)) + ";";
    else out += c;
  }
  return out;
}

std::string xmlAttr(std::string_view s) { return xmlEscaped(s, true); }
std::string xmlText(std::string_view s) { return xmlEscaped(s, false); }

// Seconds with at most 3 decimals (junit-10.xsd's time).
std::string seconds3(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3f", std::isfinite(s) && s > 0 ? s : 0.0);
  return buf;
}

// "PCC 0.5012 < 0.99, max error 1.2, ..." for a failed output.
std::string metricsLine(const Comparison& c) {
  char buf[256];
  std::snprintf(buf, sizeof buf, "PCC %.6g (expected >= %.6g), allclose %s (atol %.3g, rtol %.3g), max error %.6g, MAE %.6g, "
                "RMSE %.6g, cosine %.6g",
                c.actual_pcc, c.expected_pcc, c.allclose ? "true" : "false", c.atol, c.rtol, c.max,
                c.mean_absolute_error, c.root_mean_square_error, c.cosine_similarity);
  return buf;
}

struct Builder {
  TargetReport report;
  std::map<std::string, size_t> index; // case name -> report.cases
  CaseReport& caseNamed(const std::string& name) {
    auto [it, fresh] = index.try_emplace(name, report.cases.size());
    if (fresh) report.cases.push_back({name, Outcome::pass, "", {}});
    return report.cases[it->second];
  }
  // A case's first problem is its message; a worse outcome replaces a milder one.
  void mark(CaseReport& c, Outcome o, const std::string& why) {
    auto rank = [](Outcome x) { return x == Outcome::error ? 3 : x == Outcome::fail ? 2 : x == Outcome::skip ? 1 : 0; };
    if (rank(o) > rank(c.outcome)) {
      c.outcome = o;
      c.message = why;
    } else if (rank(o) == rank(c.outcome) && o != Outcome::pass) {
      c.message += "; " + why;
    }
  }
  void fail(FailureClass f, const std::string& why, Evidence evidence = {}) {
    // Infrastructure outranks test: the target's class is the worst seen.
    if (report.failure == FailureClass::infrastructure) return;
    if (report.failure == FailureClass::test && f != FailureClass::infrastructure) return;
    report.failure = f;
    report.reason = why;
    report.outcome = f == FailureClass::infrastructure ? Outcome::error : Outcome::fail;
    if (!evidence.empty()) report.evidence = std::move(evidence);
  }
};

} // namespace

Status lockupFailure(const std::string& said, Evidence evidence) {
  return Status::testFailure("the firmware locked up the CPU (QEMU: " + said + ")", std::move(evidence));
}

Status resetFailure(Evidence evidence) {
  return Status::testFailure("the firmware reset the simulator before its END record", std::move(evidence));
}

Status simulatorEnd(Status otherwise, const std::string& lockup, bool reset, Evidence evidence) {
  if (!lockup.empty()) return lockupFailure(lockup, std::move(evidence)); // a real core locks up the same way
  if (reset) return resetFailure(std::move(evidence));                   // it reset the core
  return otherwise;
}

std::string_view outcomeName(Outcome o) {
  switch (o) {
    case Outcome::pass: return "pass";
    case Outcome::fail: return "fail";
    case Outcome::skip: return "skip";
    case Outcome::error: return "error";
  }
  return "?";
}

std::string xmlSafe(std::string_view text) { return escapeControls(text); }

namespace {

// The reference is a witness of a console fault when it is a simulator that
// ran the image (a golden file ran nothing) and did not fail itself.
const Attempt* witnessOf(const Attempt* ref) {
  return ref && !ref->golden && ref->status.ok() && !ref->console_cut ? ref : nullptr;
}

// Any result record at all (BEGIN, TEST, OUTPUT, END, a corrupt one).
bool printedRecords(const ParseResult& p) { return p.records > 0; }

// "no console output" or "no result records: 12 lines of other output".
std::string silenceOf(const ParseResult& p) {
  if (p.lines == 0) return "no console output";
  return "no result records (no BEGIN): " + std::to_string(p.lines) + (p.lines == 1 ? " line" : " lines") +
         " of other output";
}

std::string cutReason() {
  return "its console passed " + std::to_string(kMaxConsoleMiB) + " MiB (the most a console may print) and was cut";
}

// The attempt's own steps and how its console ended.
void ownEvidence(Builder& b, const Attempt& t, const Attempt* reference, const Attempt* witness) {
  const ParseResult& p = t.parsed;
  std::string deadline = t.timed_out ? " before the deadline" : "";
  if (!t.status.ok()) {
    FailureClass f = t.status.failureClass() == FailureClass::test ? FailureClass::test : FailureClass::infrastructure;
    return b.fail(f, t.status.message(), t.status.evidence());
  }
  if (t.console_cut && !p.ended) {
    // Past any valid record stream: the lab's, unless the reference's
    // console of the same image was cut too.
    if (reference && reference->console_cut) return b.fail(FailureClass::test, cutReason() + ", on the reference too");
    return b.fail(FailureClass::infrastructure, cutReason());
  }
  if (!printedRecords(p)) {
    // Silence or noise: a console line or baud rate fault when the
    // reference printed its records, the firmware's when it did not.
    std::string why = silenceOf(p) + deadline;
    if (witness && printedRecords(witness->parsed))
      return b.fail(FailureClass::infrastructure, why + " (the reference printed its records)");
    if (witness) return b.fail(FailureClass::test, why + " (the reference printed none either)");
    return b.fail(FailureClass::test, why);
  }
  if (!p.ended) {
    if (p.suite)
      return b.fail(FailureClass::test, t.timed_out ? "BEGIN but no END before the deadline (the firmware hung)"
                                                    : "BEGIN but no END before the console closed");
    return b.fail(FailureClass::test, "no BEGIN record" + deadline);
  }
}

// Problems a console's way to hwfarmd can cause (a serial line's noise, a
// lost byte); every other kind is what the firmware printed.
bool transportDamage(ProblemKind k) {
  return k == ProblemKind::crc_mismatch || k == ProblemKind::crc_missing || k == ProblemKind::damaged_line ||
         k == ProblemKind::count_mismatch;
}

bool hasTransportDamage(const ParseResult& p) {
  return std::any_of(p.problems.begin(), p.problems.end(), [](const Problem& pr) { return transportDamage(pr.kind); });
}

// The firmware's own verdicts and what the parser found wrong in them.
void firmwareVerdicts(Builder& b, const ParseResult& p, const Attempt* witness) {
  for (const auto& c : p.cases) {
    CaseReport& cr = b.caseNamed(c.name);
    if (c.result == CaseResult::fail) {
      std::string why = c.message.empty() ? "FAIL" : "FAIL: " + c.message;
      b.mark(cr, Outcome::fail, why);
      b.fail(FailureClass::test, c.name + ": " + why);
    }
    if (c.result == CaseResult::skip) b.mark(cr, Outcome::skip, c.message.empty() ? "SKIP" : c.message);
  }
  // A record damaged or lost on the way (a CRC mismatch, a damaged tag, a
  // count that does not match) is the lab's only when the reference's
  // lossless console carried the same image's records whole.
  bool witness_clean = witness && witness->parsed.ended && !hasTransportDamage(witness->parsed);
  for (const auto& pr : p.problems) {
    bool damage = transportDamage(pr.kind);
    bool infra = damage && witness_clean;
    std::string why = pr.message;
    if (damage && witness && !infra) why += " (the reference shows damaged records too: the firmware's)";
    std::string name = pr.case_name.empty() ? "(protocol)" : pr.case_name;
    b.mark(b.caseNamed(name), infra ? Outcome::error : Outcome::fail, why);
    b.fail(infra ? FailureClass::infrastructure : FailureClass::test, why);
  }
  if (p.ended && p.end_status && *p.end_status != 0)
    b.fail(FailureClass::test, "the firmware ended with status " + std::to_string(*p.end_status));
  if (p.ended && !p.end_status && p.suite) b.fail(FailureClass::test, "END without a status");
  if (p.ended && p.cases.empty()) b.fail(FailureClass::test, "no test case ran");
}

// A reference that failed the lab's way: its simulator, or its console cut.
std::optional<std::string> referenceBroken(const Attempt& ref) {
  // (a reference whose firmware locked its CPU up failed the firmware's way)
  if (!ref.status.ok() && ref.status.failureClass() != FailureClass::test) return ref.status.message();
  if (ref.console_cut && !ref.parsed.ended) return cutReason();
  return std::nullopt;
}

// A console's cases and outputs by name: findCase() and findOutput() are
// linear, and a loop over another console's 10,000 cases would make them
// 10^8 steps on the event loop.
class Names {
 public:
  explicit Names(const ParseResult& p) {
    for (const auto& c : p.cases) cases_.insert(c.name);
    for (const auto& o : p.outputs) outputs_.emplace(pairKey(o.case_name, o.name), &o); // the first of a name
  }
  bool hasCase(const std::string& name) const { return cases_.count(name) > 0; }
  // As ParseResult::findOutput.
  const Output* output(const std::string& case_name, const std::string& name) const {
    auto it = outputs_.find(pairKey(case_name, name));
    return it == outputs_.end() ? nullptr : it->second;
  }

 private:
  static std::string pairKey(const std::string& case_name, const std::string& name) {
    return case_name + '\0' + name;
  }
  std::unordered_set<std::string> cases_;
  std::unordered_map<std::string, const Output*> outputs_;
};

void compareOutputs(Builder& b, const Attempt& t, const Attempt& ref, const ThresholdsFor& thresholds,
                    bool ref_complete) {
  Names in_ref(ref.parsed);
  for (const auto& o : t.parsed.outputs) {
    CaseReport& cr = b.caseNamed(o.case_name);
    if (!o.complete()) continue; // already a problem of its case
    Thresholds th = thresholds ? thresholds(t.image, o.case_name, o.name, o.dtype) : defaultThresholds(o.dtype);
    if (th.ignore) continue; // a thresholds rule says this output is not compared
    const Output* ro = in_ref.output(o.case_name, o.name);
    if (!ro || !ro->complete()) {
      if (!ref_complete) {
        b.mark(cr, Outcome::fail, o.key() + ": not compared: the reference did not complete");
        continue;
      }
      std::string why = o.key() + ": the reference has no complete output of that name";
      b.mark(cr, Outcome::fail, why);
      b.fail(FailureClass::test, why);
      continue;
    }
    Comparison c = compare(Values(o.dtype, o.values), Values(ro->dtype, ro->values), th);
    if (c.verdict == Verdict::fail) {
      std::string why = o.key() + ": " + c.reason + " (" + metricsLine(c) + ")";
      b.mark(cr, Outcome::fail, why);
      b.fail(FailureClass::test, why);
    }
    cr.outputs.push_back({o.key(), std::move(c)});
  }
}

// What the reference produced and the target did not.
void missingOnTarget(Builder& b, const Attempt& t, const Attempt& ref, const ThresholdsFor& thresholds) {
  const ParseResult& p = t.parsed;
  TargetReport& r = b.report;
  Names in_target(p), in_ref(ref.parsed);
  for (const auto& ro : ref.parsed.outputs) {
    if (!ro.complete() || in_target.output(ro.case_name, ro.name)) continue;
    Dtype d = ro.dtype;
    if ((thresholds ? thresholds(t.image, ro.case_name, ro.name, d) : defaultThresholds(d)).ignore) continue;
    // A case the reference ran and the target did not is reported below.
    if (in_ref.hasCase(ro.case_name) && !in_target.hasCase(ro.case_name) && !b.index.count(ro.case_name)) continue;
    if (r.failure == FailureClass::infrastructure) {
      b.mark(b.caseNamed(ro.case_name), Outcome::error, ro.key() + ": not run: " + r.reason);
      continue;
    }
    std::string why = ro.key() + ": output missing (the reference has it)";
    b.mark(b.caseNamed(ro.case_name), Outcome::fail, why);
    b.fail(FailureClass::test, why);
  }
  // Cases the reference ran and the target did not: not run, when the
  // target failed the lab's way; else the firmware's failure.
  for (const auto& rc : ref.parsed.cases) {
    if (in_target.hasCase(rc.name) || b.index.count(rc.name)) continue;
    if (r.failure == FailureClass::infrastructure) {
      b.mark(b.caseNamed(rc.name), Outcome::error, "not run: " + r.reason);
      continue;
    }
    std::string why = "no TEST record for " + rc.name + " (the reference has one)";
    b.mark(b.caseNamed(rc.name), Outcome::fail, why);
    b.fail(FailureClass::test, why);
  }
}

void againstReference(Builder& b, const Attempt& t, const Attempt& ref, const ThresholdsFor& thresholds) {
  TargetReport& r = b.report;
  std::string prefix = "the reference " + ref.target;
  if (std::optional<std::string> broken = referenceBroken(ref)) {
    // Nothing to compare with. The lab's failure, unless the target failed
    // the firmware's way on its own (a test failure is never hidden).
    std::string why = prefix + " failed: " + *broken;
    if (r.failure == FailureClass::none) {
      b.fail(FailureClass::infrastructure, why);
      r.reference_failed = true;
    }
    for (const auto& o : t.parsed.outputs)
      if (o.complete()) b.mark(b.caseNamed(o.case_name), Outcome::error, o.key() + ": not compared: " + why);
    return;
  }
  TargetReport own = judgeOwn(ref, nullptr);
  bool ref_complete = ref.parsed.ended;
  if (!ref_complete && t.parsed.ended && t.status.ok()) {
    // The target completed and the reference did not: not the target's
    // failure, and no evidence points at the lab.
    b.fail(FailureClass::test, "reference incomplete: " + prefix + ": " + own.reason + "; the target completed");
  } else if (ref_complete && own.failure != FailureClass::none) {
    // No target passes against a reference that fails its own tests.
    std::string why = prefix + " fails its own tests: " + own.reason + " (the test fails on the simulator too)";
    b.fail(FailureClass::test, why);
    // Its failing cases fail on the target too (a case failing on its own says why already).
    for (const auto& rc : own.cases) {
      if (rc.outcome != Outcome::fail && rc.outcome != Outcome::error) continue;
      CaseReport& c = b.caseNamed(rc.name);
      if (c.outcome != Outcome::fail && c.outcome != Outcome::error)
        b.mark(c, Outcome::fail, "on the reference: " + rc.message);
    }
  }
  compareOutputs(b, t, ref, thresholds, ref_complete);
  if (ref_complete) missingOnTarget(b, t, ref, thresholds);
}

} // namespace

void blameFirmware(TargetReport& report, const std::string& why) {
  if (report.failure != FailureClass::infrastructure) return;
  report.failure = FailureClass::test;
  report.outcome = Outcome::fail;
  report.reason += why;
  for (auto& c : report.cases)
    if (c.outcome == Outcome::error) {
      c.outcome = Outcome::fail;
      c.message += why;
    }
}

TargetReport judgeOwn(const Attempt& t, const Attempt* reference) {
  Builder b;
  TargetReport& r = b.report;
  r.image = t.image;
  r.target = t.target;
  r.board = t.board;
  r.seconds = t.seconds;
  r.trace_tail = t.trace_tail;
  r.end_status = t.parsed.end_status;
  r.protocol_version = t.parsed.version;
  r.record_count = t.parsed.countVerified() ? "verified" : t.parsed.countMismatch() ? "mismatch" : "unverified";
  const Attempt* witness = witnessOf(reference);
  ownEvidence(b, t, reference, witness);
  firmwareVerdicts(b, t.parsed, witness);
  return std::move(b.report);
}

TargetReport evaluate(const Attempt& t, const Attempt* ref, const ThresholdsFor& thresholds) {
  Builder b;
  b.report = judgeOwn(t, ref);
  TargetReport& r = b.report;
  for (size_t i = 0; i < r.cases.size(); ++i) b.index[r.cases[i].name] = i;
  if (ref) againstReference(b, t, *ref, thresholds);
  // A target that did not pass has a failing or erring case, so junit.xml's
  // counts agree with the verdict: a hang after a passing case included.
  bool shown = std::any_of(r.cases.begin(), r.cases.end(), [](const CaseReport& c) {
    return c.outcome == Outcome::fail || c.outcome == Outcome::error;
  });
  if (r.outcome != Outcome::pass && !shown)
    b.mark(b.caseNamed("(run)"), r.failure == FailureClass::infrastructure ? Outcome::error : Outcome::fail, r.reason);
  // An infrastructure failure of the whole attempt errs every case that
  // passed: its result cannot be trusted.
  if (!t.status.ok())
    for (auto& c : r.cases)
      if (c.outcome == Outcome::pass) b.mark(c, Outcome::error, "not trusted: " + t.status.message());
  return r;
}

namespace {

// The testcase that stands for the cases junit.xml does not list (all
// but those `kept`): it fails (or errs) when one of them did, so the file
// agrees with the verdict, and its message counts them by outcome.
CaseReport leftOutCase(const TargetReport& r, const std::vector<size_t>& kept) {
  std::vector<CaseReport> listed;
  for (size_t i : kept) listed.push_back({"", r.cases[i].outcome, "", {}});
  CaseCounts all = countCases(r.cases, kept.size()), shown = countCases(listed, kept.size());
  size_t failed = all.failed - shown.failed, errors = all.errors - shown.errors, skipped = all.skipped - shown.skipped,
         passed = all.passed - shown.passed;
  std::string what = std::to_string(all.left_out) + " more cases, not listed: " + std::to_string(failed) + " failed, " +
                     std::to_string(errors) + " erred, " + std::to_string(skipped) + " skipped, " +
                     std::to_string(passed) + " passed (of " + std::to_string(all.cases) +
                     " cases; those listed are the failing ones first; the trace has every record)";
  Outcome outcome = errors    ? Outcome::error
                    : failed  ? Outcome::fail
                    : passed  ? Outcome::pass
                              : Outcome::skip;
  return {"(" + std::to_string(all.left_out) + " more cases)", outcome, what, {}};
}

} // namespace

std::string junitXml(std::string_view run_name, const std::vector<TargetReport>& reports) {
  // One suite per target, in the order targets first appear.
  std::vector<std::string> order;
  std::map<std::string, std::vector<const TargetReport*>> by_target;
  for (const auto& r : reports) {
    if (!by_target.count(r.target)) order.push_back(r.target);
    by_target[r.target].push_back(&r);
  }
  size_t all_tests = 0, all_failures = 0, all_errors = 0;
  double all_time = 0;
  std::string suites;
  for (const auto& target : order) {
    size_t tests = 0, failures = 0, errors = 0, skipped = 0;
    double time = 0;
    std::string cases, out;
    std::string board;
    for (const TargetReport* r : by_target[target]) {
      time += r->seconds;
      if (board.empty()) board = r->board;
      std::vector<size_t> kept = keptCases(r->cases);
      std::vector<CaseReport> shown;
      for (size_t i : kept) shown.push_back({r->cases[i].name, r->cases[i].outcome, keptMessage(r->cases[i].message), {}});
      if (kept.size() < r->cases.size()) shown.push_back(leftOutCase(*r, kept));
      for (const auto& c : shown) {
        ++tests;
        cases += "    <testcase classname=\"" + xmlAttr(r->image) + "\" name=\"" + xmlAttr(c.name) + "\" time=\"" +
                 seconds3(r->cases.empty() ? 0 : r->seconds / static_cast<double>(r->cases.size())) + "\"";
        switch (c.outcome) {
          case Outcome::pass: cases += "/>\n"; continue;
          case Outcome::fail:
            ++failures;
            cases += ">\n      <failure type=\"test\" message=\"" + xmlAttr(c.message) + "\">" + xmlText(c.message) +
                     "</failure>\n";
            break;
          case Outcome::error:
            ++errors;
            cases += ">\n      <error type=\"infrastructure\" message=\"" + xmlAttr(c.message) + "\">" +
                     xmlText(c.message) + (r->evidence.tool_output.empty() ? "" : "\n" + xmlText(r->evidence.tool_output)) +
                     "</error>\n";
            break;
          case Outcome::skip:
            ++skipped;
            cases += ">\n      <skipped message=\"" + xmlAttr(c.message) + "\"/>\n";
            break;
        }
        cases += "    </testcase>\n";
      }
      if (!r->trace_tail.empty()) out += (by_target[target].size() > 1 ? "== " + r->image + "\n" : "") + r->trace_tail;
    }
    all_tests += tests;
    all_failures += failures;
    all_errors += errors;
    all_time += time;
    suites += "  <testsuite name=\"" + xmlAttr(target) + "\" tests=\"" + std::to_string(tests) + "\" failures=\"" +
              std::to_string(failures) + "\" errors=\"" + std::to_string(errors) + "\" skipped=\"" +
              std::to_string(skipped) + "\" time=\"" + seconds3(time) + "\">\n";
    suites += "    <properties>\n      <property name=\"board\" value=\"" + xmlAttr(board) + "\"/>\n    </properties>\n";
    suites += cases;
    if (!out.empty()) suites += "    <system-out>" + xmlText(out) + "</system-out>\n";
    suites += "  </testsuite>\n";
  }
  return "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites name=\"" + xmlAttr(run_name) + "\" tests=\"" +
         std::to_string(all_tests) + "\" failures=\"" + std::to_string(all_failures) + "\" errors=\"" +
         std::to_string(all_errors) + "\" time=\"" + seconds3(all_time) + "\">\n" + suites + "</testsuites>\n";
}

std::string goldenFieldsJson(const Comparison& m) {
  std::string out = "\"expected_pcc\": " + jsonNumber(m.expected_pcc);
  out += ", \"actual_pcc\": " + jsonNumber(m.actual_pcc);
  out += ", \"atol\": " + jsonNumber(m.atol);
  out += ", \"rtol\": " + jsonNumber(m.rtol);
  out += std::string(", \"allclose\": ") + (m.allclose ? "true" : "false");
  out += ", \"max\": " + jsonNumber(m.max);
  out += ", \"mean_absolute_error\": " + jsonNumber(m.mean_absolute_error);
  out += ", \"root_mean_square_error\": " + jsonNumber(m.root_mean_square_error);
  out += ", \"cosine_similarity\": " + jsonNumber(m.cosine_similarity);
  out += ", \"count\": " + std::to_string(m.count);
  out += ", \"dtype\": " + jsonString(dtypeName(m.dtype));
  out += ", \"verdict\": " + jsonString(verdictName(m.verdict));
  out += ", \"reason\": " + jsonString(m.reason);
  return out;
}

std::string goldenResultsJson(const std::vector<const TargetReport*>& reports, bool by_image) {
  std::string out = "{";
  bool first = true;
  for (const TargetReport* r : reports) {
    for (const auto& c : r->cases) {
      for (const auto& o : c.outputs) {
        out += first ? "\n" : ",\n";
        first = false;
        out += "  " + jsonString(by_image ? r->image + "/" + o.key : o.key) + ": {" + goldenFieldsJson(o.comparison) + "}";
      }
    }
  }
  return out + (first ? "}\n" : "\n}\n");
}

} // namespace hwfarm::run
