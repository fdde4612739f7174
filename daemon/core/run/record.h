// A run's record (docs/runs.md, "The record"), typed: what GET
// /v1/runs/{id}, the event stream, summary.json and the database show. The
// plan (plan.h) keeps it; the routes, the event stream, the SLA and the
// uploads read it. JSON is its text at those edges only: toJson() and
// fromJson(), nowhere else.
//
// Its rules live here, each in one place: the run's failure class is test
// when any judged attempt failed the firmware's way (a test failure is never
// hidden by another target's infrastructure failure, which stays in its
// attempt's judgement and still counts for the SLA), else infrastructure
// when any failed the lab's way; a superseded attempt counts through its
// retry and the reference's own verdict never (judge(), which keeps `failure`);
// the state a run that ran to its end gets follows from it (verdict()); a
// run cut short by a restart is interrupted (interrupt()).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "daemon/core/run/case_summary.h"
#include "daemon/core/run/compare.h"
#include "daemon/core/run/report.h"

namespace hwfarm::run {

enum class State { running, passed, failed, error, cancelled, interrupted };
std::string_view stateName(State s); // "running", "passed", ...
std::optional<State> stateFromName(std::string_view name);

// shard: each image once, on the first free target; each: every image on
// every target.
enum class Mode { shard, each };
std::string_view modeName(Mode m);

// What a run's targets are held against: a QEMU simulator of the board
// type, recorded (golden) outputs, or nothing (PASS/FAIL only).
enum class ReferenceKind { qemu, golden, none };
std::string_view referenceName(ReferenceKind r);

// An attempt's phase, which the plan moves forward and never back.
enum class Phase { waiting, flashing, running, finishing, done };
std::string_view phaseName(Phase p);

struct ImageEntry {
  std::string name;            // the artifact name ("hwfarm_pass")
  std::string file;            // as the client named it
  std::string reference_image; // the stored name of what the reference runs instead, or ""
  std::string golden;          // the stored name of its golden outputs, or ""
};

struct TargetEntry {
  std::string board;    // the board, or "qemu <machine>" for the simulator target
  std::string name;     // the artifact name; a swapped-in board shares its predecessor's
  std::string replaces; // a swapped-in board: the board it replaced, else ""
};

// What made a run: hwfarm ran its images (the plan), or a test harness
// ran on the lease and its results were published (core/results).
enum class Kind { hwfarm, external };
std::string_view kindName(Kind k); // "hwfarm", "external"

struct OutputVerdict {
  std::string key; // "<case>.<output>"
  Verdict verdict = Verdict::pass;
  double actual_pcc = 0; // NaN when undefined
};

struct CaseVerdict {
  std::string name;
  Outcome outcome = Outcome::pass;
  std::string message;
  std::vector<OutputVerdict> outputs; // those kept (keptOutputs, case_summary.h)
  size_t outputs_left_out = 0;        // of the case's outputs, not listed
  // A harness's error: the [[results.infrastructure]] rule that made it
  // the lab's (its evidence), or "" (a test error).
  std::string rule;
};

// A target's verdict against the reference, or (cases, evidence and end
// status left out) the reference's own.
struct Judgement {
  Outcome outcome = Outcome::pass;
  FailureClass failure = FailureClass::none;
  std::string reason;
  Evidence evidence;
  std::optional<int> end_status;
  // Its cases, bounded (case_summary.h): at most kKeptCases, failing ones
  // first, each message cut at kKeptMessageBytes; `counts` are of all of
  // them and say how many were left out.
  std::vector<CaseVerdict> cases;
  CaseCounts counts;
  // Which result protocol version its console spoke, and whether END's
  // record count was checked: "verified", "mismatch" or "unverified"
  // (report.h). Empty for an attempt that has no report of its own.
  int protocol_version = 1;
  std::string record_count;
  // A target's infrastructure failure that is its reference's (the
  // simulator failed, the target's own steps did not): not its board's.
  bool reference_failed = false;
};
// What the record keeps of a report: for a target its verdict, evidence,
// counts and its cases within the bound; the verdict alone for the
// reference's own.
Judgement judgementOf(const TargetReport& report, bool reference);

// Where an attempt's time went, in milliseconds; -1 for a step it did not
// take (docs/runs.md, "Timings").
struct AttemptTimings {
  int64_t wait_ms = -1;       // made until it began: a simulator waiting for its slot
  int64_t flash_ms = -1;      // a board's flash
  int64_t start_ms = -1;      // a simulator's sandbox and QEMU, until its console is up
  int64_t first_byte_ms = -1; // from its start (a board powered, a simulator spawned) to its console's first line
  int64_t end_ms = -1;        // from its start to its END record
  int64_t drain_ms = -1;      // from END to its end: the console read for records after END
  bool operator==(const AttemptTimings&) const = default;
};

struct AttemptEntry {
  std::string image;  // artifact names
  std::string target;
  std::string board;  // the board, "qemu <machine>" or "golden"
  bool reference = false;
  Phase phase = Phase::waiting;
  double seconds = 0;          // once done
  std::string retry_of_board;  // a retry: the board of the attempt it retries
  bool retried = false;        // superseded by its retry: kept, never counted
  std::string not_retried;     // why its infrastructure failure was not retried
  // Not done when the run's cancel was accepted: what it shows is the
  // cancel's doing, never counted (not in the run's failure class, not for
  // the SLA).
  bool cancelled = false;
  std::optional<AttemptTimings> timings; // once done
  std::optional<Judgement> judgement;
};

struct Record {
  std::string id;
  std::string lease_id;
  Kind kind = Kind::hwfarm;
  // An external run: its harness's format ("junit", "twister", or both
  // joined by '+') and the results files as given (under results/).
  std::string harness;
  State state = State::running;
  int64_t created_ms = 0;
  int64_t ended_ms = 0; // 0 until the run ends
  Mode mode = Mode::shard;
  ReferenceKind reference = ReferenceKind::qemu;
  int64_t deadline_ms = 0;
  std::string suite;  // "" for none
  std::string commit; // "" for none
  std::vector<ImageEntry> images;
  std::vector<TargetEntry> targets;
  std::vector<AttemptEntry> attempts;
  FailureClass failure = FailureClass::none; // the run's failure class (judge())
  std::string reason; // why it ended as it did (a cancel, a restart, artifacts not written)
  // A cancel was accepted: the run ends cancelled (it says running until
  // its attempts have stopped and its files are written).
  bool cancelling = false;
  // From its start until every attempt was done (its files written and its
  // record stored come after), in milliseconds; -1 until then.
  int64_t attempts_ms = -1;
  // The run's files under its directory, summary.json last; shown once the
  // run has ended.
  std::vector<std::string> artifacts;

  // Sets `failure` from the judged target attempts that count (not a
  // superseded one nor one a cancel cut short, never the reference's own): test if any failed the
  // firmware's way, else infrastructure if any failed the lab's way. Run it
  // when a judgement changes.
  void judge();
  // The state of a run that ran to its end, from `failure`: failed (test),
  // error (infrastructure only) or passed.
  State verdict() const;
  // Attempts done, for the progress.
  size_t doneCount() const;
  // A run found running when hwfarmd starts was cut short: interrupted at
  // `now_ms`, an infrastructure failure, with the reason.
  void interrupt(int64_t now_ms);

  // The record's JSON (docs/runs.md). Text from outside (names, messages,
  // console lines) is made XML-safe (xmlSafe), so junit.xml and the record
  // say the same.
  std::string toJson() const;
  // Attempt `index` as its event carries it: without its cases and evidence.
  std::string attemptEventJson(size_t index) const;
  // A record toJson() wrote (or an older hwfarmd's summary.json, which may
  // lack members: they keep their defaults). Code::invalid_argument naming
  // the member when the text is not such a record.
  static Result<Record> fromJson(std::string_view text);
};

} // namespace hwfarm::run
