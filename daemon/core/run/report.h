// A run's verdicts and their reports, pure: what each target's console said
// (parsed), held against the reference's, gives per case pass, fail, skip
// or error, a failure class with evidence per target, and the junit.xml and
// golden_results.json texts (docs/runs.md).
//
// Classification (DESIGN.md, failure classes):
//   infrastructure  the attempt failed (flash tool, board lost, simulator
//                   crash: its Status), no console output at all before the
//                   deadline, a corrupt record (CRC), the reference failed
//   test            a FAIL record, an output below its threshold or missing,
//                   a malformed record, BEGIN without END before the
//                   deadline (a hang), END with a status other than 0
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "daemon/core/run/compare.h"
#include "daemon/core/run/protocol.h"

namespace hwfarm::run {

// One image on one target (a board, or a simulator), as the run service
// saw it.
struct Attempt {
  std::string image;    // artifact name of the image
  std::string target;   // artifact name of the target ("nucleo_0", "qemu_ref")
  std::string board;    // the board or simulator it ran on
  Status status;        // the attempt's own failure (flash, board lost, simulator crash), with evidence
  ParseResult parsed;   // what its console said
  bool timed_out = false; // the deadline passed before END
  double seconds = 0;
  std::string trace_tail; // the console's last lines
};

// Per case, in JUnit's words.
enum class Outcome { pass, fail, skip, error };
std::string_view outcomeName(Outcome o); // "pass", "fail", "skip", "error"

struct OutputResult {
  std::string key; // "<case>.<output>"
  Comparison comparison;
};

struct CaseReport {
  std::string name;
  Outcome outcome = Outcome::pass;
  std::string message; // why it failed or erred; the skip message
  std::vector<OutputResult> outputs;
};

struct TargetReport {
  std::string image, target, board;
  Outcome outcome = Outcome::pass; // pass, fail (test) or error (infrastructure)
  FailureClass failure = FailureClass::none;
  std::string reason;              // the first cause, for a one-line verdict
  Evidence evidence;
  std::vector<CaseReport> cases;
  std::optional<int> end_status;
  int protocol_version = 1;     // of its console's records
  std::string record_count;     // "verified" (END counted them, all arrived), "mismatch", "unverified"
  double seconds = 0;
  std::string trace_tail;
};

// The thresholds of one output (from the manifest: suite, image, case or
// output level).
using ThresholdsFor =
    std::function<Thresholds(std::string_view image, std::string_view case_name, std::string_view output)>;

// Holds `target` against `reference` (nullptr: none, PASS/FAIL only).
TargetReport evaluate(const Attempt& target, const Attempt* reference, const ThresholdsFor& thresholds);

// junit.xml: one <testsuite> per target (reports of one target, one per
// image, share it), one <testcase> per case with classname = image.
// FAIL and accuracy failures are <failure>, infrastructure problems
// <error>, SKIP <skipped>; <system-out> holds the trace's tail. Valid
// against Jenkins' junit-10.xsd (tests/junit-10-contract.xsd).
std::string junitXml(std::string_view run_name, const std::vector<TargetReport>& reports);

// golden_results__<target>.json: ttrt's flat shape, one object per output
// keyed "<case>.<output>", or "<image>/<case>.<output>" with `by_image`,
// with count, dtype, verdict and reason added. NaN is written as null.
std::string goldenResultsJson(const std::vector<const TargetReport*>& reports, bool by_image);

// One output's fields in golden_results files, without braces: ttrt's
// (expected_pcc ... cosine_similarity), then count, dtype, verdict, reason.
std::string goldenFieldsJson(const Comparison& comparison);

// `text` made safe for XML 1.0: valid UTF-8 stays, every other byte and
// every control character but tab, LF and CR becomes "\xNN".
std::string xmlSafe(std::string_view text);

} // namespace hwfarm::run
