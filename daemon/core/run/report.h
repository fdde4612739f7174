// A run's verdicts and their reports, pure: what each target's console said
// (parsed), held against the reference's, gives per case pass, fail, skip
// or error, a failure class with evidence per target, and the junit.xml and
// golden_results.json texts (docs/runs.md).
//
// Classification (DESIGN.md, failure classes; docs/runs.md, "Who is to
// blame" has the whole table). Blame needs evidence: a failure is the lab's
// (infrastructure) only when the evidence points at the lab, that is the
// attempt's own failed step (flash tool, power switch, a board lost or its
// console closed mid-run, a simulator that crashed), or a console fault
// (silence, noise only, a corrupt record) that the reference simulator, run
// on the same image with a lossless console, did not show. Everything else
// is the firmware's (test): a FAIL record, an output below its threshold or
// missing, a malformed record, a hang, END with a status other than 0, no
// test case at all, a record after END, and any console fault the
// reference shows too (or that no simulator reference can clear).
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "daemon/core/run/compare.h"
#include "daemon/core/run/console_limits.h"
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
  // The console passed the most hwfarmd keeps of it before it ended: what
  // followed was never parsed (a simulator's; a board's console is parsed
  // whole and only its trace is cut).
  bool console_cut = false;
  bool golden = false; // a reference read from recorded outputs: it ran nothing
};

// Per case, in JUnit's words.
enum class Outcome { pass, fail, skip, error };
std::string_view outcomeName(Outcome o); // "pass", "fail", "skip", "error"

// The firmware's failure when a simulated core locked up (a board's
// simulator or the reference): `said` is what QEMU said, "Lockup: ...".
Status lockupFailure(const std::string& said, Evidence evidence = {});
// The firmware's failure when it reset a simulated core (a board's simulator
// or the reference) before its END record: simulators run with -no-reboot,
// so the reset stopped it mid-run.
Status resetFailure(Evidence evidence = {});
// How a simulator that ended on its own reads: a lockup (`lockup`, what QEMU
// said) or a reset (`reset`) is the firmware's, with `evidence`; else
// `otherwise` (the lab's when QEMU crashed or was killed, or a success).
Status simulatorEnd(Status otherwise, const std::string& lockup, bool reset, Evidence evidence);

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
  // The lab's failure is its reference simulator's, not the target's own
  // (the reference's failure is counted once, against no board).
  bool reference_failed = false;
  Evidence evidence;
  std::vector<CaseReport> cases;
  std::optional<int> end_status;
  int protocol_version = 1;     // of its console's records
  std::string record_count;     // "verified" (END counted them, all arrived), "mismatch", "unverified"
  double seconds = 0;
  std::string trace_tail;
};

// The thresholds of one output of `dtype` (from the manifest: suite, image,
// case or output level, over the dtype's defaults: thresholds.h). nullptr:
// the defaults.
using ThresholdsFor = std::function<Thresholds(std::string_view image, std::string_view case_name,
                                               std::string_view output, Dtype dtype)>;

// Holds `target` against `reference` (nullptr: none, PASS/FAIL only): its
// own verdict (judgeOwn), then the reference's rules: a reference that
// failed the lab's way compares nothing (infrastructure, unless the target
// failed the firmware's way on its own); one that fails its own tests lets
// no target pass ("the test fails on the simulator too"); one that did not
// complete while the target did is "reference incomplete" (not the
// target's failure, and not the lab's: no evidence points at it); every
// complete output and case of the reference must be on the target too.
// Every report that is not a pass has a failing or erring case (junit.xml
// agrees with the verdict).
TargetReport evaluate(const Attempt& target, const Attempt* reference, const ThresholdsFor& thresholds);

// What `attempt`'s own console and steps say, with `reference` (nullptr:
// none) as the witness that classes a console fault: the reference's own
// verdict, and a board's for its retry (only the lab's failures are
// retried). Never compares outputs.
TargetReport judgeOwn(const Attempt& attempt, const Attempt* reference);

// Turns `report`'s failure of the lab's into the firmware's, `why` added to
// its reason and to each erring case's message (junit.xml then shows
// failures, not errors): the same image failed the same way on another
// board. Nothing else changes.
void blameFirmware(TargetReport& report, const std::string& why);

// junit.xml: one <testsuite> per target (reports of one target, one per
// image, share it), one <testcase> per case with classname = image.
// FAIL and accuracy failures are <failure>, infrastructure problems
// <error>, SKIP <skipped>; <system-out> holds the trace's tail. Valid
// against Jenkins' junit-10.xsd (tests/junit-10-contract.xsd). Bounded as
// the record is (case_summary.h): per report the cases it keeps, then one
// "(N more cases)" testcase counting the rest by outcome, failing when one
// of them failed (erring when one erred), so the file agrees with the
// verdict; the attributes count the testcases written.
std::string junitXml(std::string_view run_name, const std::vector<TargetReport>& reports);

// golden_results__<target>.json: ttrt's flat shape, one object per output
// keyed "<case>.<output>", or "<image>/<case>.<output>" with `by_image`,
// with count, dtype, verdict and reason added. NaN is written as null.
std::string goldenResultsJson(const std::vector<const TargetReport*>& reports, bool by_image);

// One output's fields in golden_results files, without braces: ttrt's
// (expected_pcc ... cosine_similarity), then count, dtype, verdict, reason.
std::string goldenFieldsJson(const Comparison& comparison);

// `text` made safe for XML 1.0 and for a terminal that shows it: valid UTF-8
// stays, every other byte and every control character but tab, LF and the CR
// of a CRLF becomes "\xNN" (escapeControls, common/shown_text.h).
std::string xmlSafe(std::string_view text);

} // namespace hwfarm::run
