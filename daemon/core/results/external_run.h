// A test harness's results published on a lease (POST /v1/leases/{id}/results,
// docs/harness-results.md) as a run record of kind external, and the rules
// that tell the lab's failures from the firmware's in them. Pure.
//
// Blame needs evidence (DESIGN.md, failure classes): a harness's failure
// (JUnit <failure>, twister "failed") is the firmware's. Only an error
// (JUnit <error>: pytest's error in a fixture, setup, teardown or
// collection; twister's "error") may be the lab's, and only when an
// operator's rule ([[results.infrastructure]]) matches it; the record names
// the rule. An unmatched error is a test error. One failure is the lab's
// too: one whose teardown erred by a rule (pytest: the test's read failed
// because the board vanished, and the board fixture's teardown says so). The run's class follows the
// record's rule: test when any case failed or erred the firmware's way,
// else infrastructure when any error matched a rule.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "daemon/core/results/harness_results.h"
#include "daemon/core/run/record.h"

namespace hwfarm::results {

// Matches an error whose type, message and detail (traceback) each contain
// the rule's text for it, and whose type or message contains `error`; a
// text left empty matches anything, and a rule has at least one.
// Case-sensitive substrings.
struct InfraRule {
  std::string name;
  std::string error; // in the type or the message
  std::string type, message, detail;
};

// The rules used when the config names none ([results] default_rules):
// pyserial's SerialException, a board fixture's TimeoutError at setup, a
// failed `west flash` (as a command line or an argv), pytest-twister-
// harness's and twister's flash errors, twister's serial device errors.
std::vector<InfraRule> defaultInfraRules();

// The first rule that makes error `c` (or the teardown error of failed
// case `c`) the lab's, or nullptr: always nullptr for any other case.
const InfraRule* infrastructureRule(const HarnessCase& c, const std::vector<InfraRule>& rules);

// What the daemon knows of a publish.
struct ExternalRun {
  std::string id;
  std::string lease_id;
  int64_t created_ms = 0; // the publish
  std::string name;       // the run's name (its one "image"), e.g. "pytest"
  std::string commit;
  std::vector<std::string> boards; // the lease's boards
  std::string board;               // the board the harness ran on, or "" (not known: several boards)
  // Each results file (its path in the run, "results/...") and its cases.
  std::vector<std::pair<std::string, HarnessResults>> results;
  std::vector<std::string> artifacts; // every file of the run but summary.json, sorted
};

// Judges a publish's results files one at a time, keeping only what the
// record needs (counts, the first reasons, at most kKeptCases cases of
// each kind), so a publish of many large files holds one file's cases at
// a time.
class ExternalJudge {
 public:
  explicit ExternalJudge(std::vector<InfraRule> rules) : rules_(std::move(rules)) {}
  // Results file `path` ("results/...") and its cases.
  void add(const std::string& path, const HarnessResults& results);
  // The record of `in` (its `results` are not read: those add()ed are).
  run::Record record(const ExternalRun& in) const;

 private:
  struct Kept {
    size_t order; // among every case added
    run::CaseVerdict verdict;
  };
  std::vector<InfraRule> rules_;
  std::vector<std::string> formats_;
  std::string files_;
  size_t total_ = 0, passed_ = 0, failed_ = 0, errors_ = 0, skipped_ = 0;
  size_t test_failures_ = 0, lab_errors_ = 0, order_ = 0;
  double seconds_ = 0;
  std::string first_test_, first_lab_;
  Evidence lab_evidence_;
  std::vector<Kept> bad_, good_; // failing or erring cases kept, the others kept
};

// Its record: ended at created_ms, one attempt (the harness on `board`)
// whose judgement has the cases (kKeptCases of them, failing and erring
// ones first; each error the lab's names its rule), exact counts, the
// failure class and reason by the rules above. Zero cases is a test
// failure ("no test case"), as for hwfarm's own runs.
run::Record externalRecord(const ExternalRun& in, const std::vector<InfraRule>& rules);

} // namespace hwfarm::results
