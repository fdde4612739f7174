// Two runs compared (the dashboard's compare view, e.g. the nightly against
// a pull request's run): which cases and outputs newly fail, are fixed,
// still fail, appeared or disappeared, and how each output's PCC moved.
// Pure: two digests in, the changes out.
//
// Cases and outputs are matched by image, target and name (an output by its
// "<case>.<output>" key). An infrastructure error says nothing about the
// firmware, so a case that erred in the newer run is "infrastructure",
// apart from the test results and never counted as newly failing or fixed
// (DESIGN.md: blame needs evidence).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace hwfarm::dashboard {

enum class CaseOutcome { pass, fail, skip, error };
std::string_view caseOutcomeName(CaseOutcome o);  // "pass", "fail", "skip", "error"
CaseOutcome caseOutcomeFromName(std::string_view name); // anything else: error

struct CaseRow {
  std::string image, target, name;
  CaseOutcome outcome = CaseOutcome::pass;
  std::string message;
};

struct OutputRow {
  std::string image, target, key;
  std::optional<double> actual_pcc; // none: undefined (NaN)
  bool pass = false;
};

// What a run's record says, per image, target and case (the reference's
// attempts left out).
struct RunDigest {
  std::string run;
  std::vector<CaseRow> cases;
  std::vector<OutputRow> outputs;
};

enum class Change {
  newly_failing,  // passing (or skipped, or erred) in the base, failing now
  fixed,          // failing in the base, passing now
  still_failing,
  passing,        // passing in both: unchanged
  skipped,        // skipped now
  infrastructure, // erred now: not a test result
  appeared,       // only in the newer run
  disappeared,    // only in the base
};
std::string_view changeName(Change c);

struct CaseChange {
  std::string image, target, name;
  Change change = Change::passing;
  std::optional<CaseOutcome> before, after;
  std::string message; // the newer run's (the base's for a disappeared case)
};

struct OutputChange {
  std::string image, target, key;
  Change change = Change::passing;
  std::optional<double> before_pcc, after_pcc, delta; // delta: after - before, both defined
  std::optional<bool> before_pass, after_pass;
};

struct RunDiff {
  std::string base, head;
  std::vector<CaseChange> cases;     // in the newer run's order, then the disappeared
  std::vector<OutputChange> outputs; // likewise
};

RunDiff diffRuns(const RunDigest& base, const RunDigest& head);

// {"base", "head", "counts": {"cases": {change: n}, "outputs": {...}},
//  "cases": [...], "outputs": [...]}: every change named by changeName,
// outcomes as "pass"/"fail"/"skip"/"error", an undefined PCC as null.
std::string runDiffJson(const RunDiff& diff);

} // namespace hwfarm::dashboard
