// A run as a plan (DESIGN.md, "One shape for every engine"; ninja's Plan):
// its spec and resolved targets in; step(event, now) -> commands out. Pure:
// the run service carries the commands out (flash, power, watch a console,
// start a simulator, arm a deadline, swap a board, write the artifacts,
// store the record) and feeds what happened back as events.
//
// Every decision of a run is made here, in one place: which image runs
// on which target and when (shard: the first free target takes the next
// image; each: every target runs every image), how a board boots (boot.h),
// when an attempt ends (END, its deadline, its console closing, a failed
// step), what is retried (a board target's infrastructure failure, once,
// on a board swapped into the lease; never on a board that was itself
// swapped in: no chain of swaps), whether a cancel is accepted and what it
// stops, and the verdict (the record's rules, record.h). A failure that a
// retry shows the same way on a second board is the firmware's. An attempt's phase is one enum
// (Phase); the run's own life is another (Stage, below).
//
// Attempts are numbered in the order they start (the record's order):
// references first, one per image, then the targets' as each takes its
// next image. Events name the attempt they concern; an event that no
// longer fits (a line after the attempt ended, a deadline after its END)
// changes nothing.
#pragma once

#include <chrono>
#include <cstddef>
#include <deque>
#include <map>
#include <set>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "common/console_line.h"
#include "common/status.h"
#include "daemon/core/clock.h"
#include "daemon/core/run/artifacts.h"
#include "daemon/core/run/boot.h"
#include "daemon/core/run/protocol.h"
#include "daemon/core/run/record.h"
#include "daemon/core/run/report.h"
#include "daemon/core/run/spec.h"
#include "daemon/core/run/targets.h"

namespace hwfarm::run {

// The time of an event: steady for deadlines and durations, wall (unix ms)
// for what the record shows.
struct Now {
  Clock::SteadyTime steady{};
  int64_t wall_ms = 0;
};

// --- Events: what happened, fed to step() ------------------------------------

struct Started {}; // the record is stored: the attempts begin
struct Flashed {
  size_t attempt;
  Status status;
  std::string log; // what the flasher printed
};
struct Powered {
  size_t attempt;
  Status status;
};
struct ConsoleLine {
  size_t attempt;
  std::string text; // as the console's line reader cut it (common/console_line.h), without its line end
  bool continued = false;                 // the tail of a longer line
  LineEnd end = LineEnd::newline;         // how it ended
  ::hwfarm::ConsoleLine line() const { return {text, continued, end}; }
};
struct ConsoleClosed {
  size_t attempt;
  std::string reason;
  // How a simulated board's QEMU ended: its firmware ended it (it locked
  // the guest CPU up, or reset it: a test failure, the firmware's before
  // its END and its way to end after it), or it crashed or was killed
  // from outside (an infrastructure failure, the lab's before END and
  // inside the drain window alike); ok when nothing is known.
  Status end = {};
};
struct DeadlinePassed {
  size_t attempt;
};
struct PoweredOff { // after a PowerOff
  size_t attempt;
};
struct SimulatorStarted {
  size_t attempt;
};
struct SimulatorEnded {
  size_t attempt;
  Status status;       // the simulator's own failure (did not start, crashed)
  std::string console; // what it printed, at most kMaxConsoleBytes
  bool truncated = false;
  bool timed_out = false;
  double seconds = 0;
  // When, in seconds from its spawn: its console connected, its first
  // byte, its END; -1 if never.
  double connected_s = -1, first_byte_s = -1, end_s = -1;
};
struct GoldenRead {
  size_t attempt;
  Status status; // why the golden outputs could not be read
  std::string text;
};
struct Swapped {
  size_t attempt;
  Result<Target> board; // the board swapped in (its name and kind), or why none was
};
struct CancelRequested {
  std::string reason;
};
struct ArtifactsWritten {
  Status status;
  std::vector<std::string> unwritten; // the paths that were not written (a full disk)
  bool early = false;                 // of a WriteFiles that was early
};
struct RecordStored {
  Status status;
};

using Event = std::variant<Started, Flashed, Powered, ConsoleLine, ConsoleClosed, DeadlinePassed, PoweredOff,
                           SimulatorStarted, SimulatorEnded, GoldenRead, Swapped, CancelRequested, ArtifactsWritten,
                           RecordStored>;

// --- Commands: what to do, returned by step() -----------------------------

struct Watch { // feed `board`'s console lines (ConsoleLine, ConsoleClosed) until Unwatch
  size_t attempt;
  std::string board;
};
struct Unwatch {
  size_t attempt;
};
struct Flash { // -> Flashed
  size_t attempt;
  std::string board;
  std::string image;
};
struct Power { // -> Powered
  size_t attempt;
  std::string board;
  PowerStep step;
};
struct PowerOff { // a board left running (deadline, cancel), once its work allows -> PoweredOff
  size_t attempt;
  std::string board;
};
struct Simulate { // a fresh simulator of the run's board type -> SimulatorStarted, SimulatorEnded
  size_t attempt;
  std::string image;
  std::chrono::milliseconds deadline; // the simulator's own bound, beside ArmDeadline's
  std::chrono::milliseconds drain;    // its console is read this long after END (or until it exits)
};
struct StopSimulator { // -> SimulatorEnded (soon)
  size_t attempt;
};
struct ReadGolden { // -> GoldenRead
  size_t attempt;
  std::string path;
};
struct ArmDeadline { // -> DeadlinePassed at `at`
  size_t attempt;
  Clock::SteadyTime at;
};
struct CancelDeadline {
  size_t attempt;
};
struct SwapBoard { // replace `board` in the lease with another of its type -> Swapped
  size_t attempt;
  std::string board;
  std::string reason;
};
struct WriteFiles { // into the run's directory, each atomically -> ArtifactsWritten
  std::vector<ArtifactFile> files;
  // An image's attempt files, written once it was judged (its memory is
  // released), while the run goes on; the last WriteFiles is not early.
  bool early = false;
};
struct StoreRecord { // the final record, to the database -> RecordStored
  Record record;
};
// An attempt that failed the lab's way (the SLA's input): its board, ""
// for a simulator.
struct InfraFailure {
  std::string board;
  std::string why;
};
struct Finished { // the run is over: its record says its final state
  // Of the attempts that ended before a cancel (a cancel causes none).
  std::vector<InfraFailure> infra;
};

using Command = std::variant<Watch, Unwatch, Flash, Power, PowerOff, Simulate, StopSimulator, ReadGolden,
                             ArmDeadline, CancelDeadline, SwapBoard, WriteFiles, StoreRecord, Finished>;

// What a cancel gets (Plan::cancelAnswer): accepted (the run stops and ends
// cancelled), already (a cancel was accepted before: it ends cancelled), or
// ended (its verdict was decided before the cancel came: refused, HTTP 409
// run_ended).
enum class CancelAnswer { accepted, already, ended };

struct Steps {
  std::vector<Command> commands; // in order
  bool changed = false;          // the record changed (its watchers want to know)
  std::vector<size_t> attempts;  // the attempts added or changed, ascending (the watchers tell only those)
};

class Plan {
 public:
  // A run `id` of `lease_id` created at `now`. REQUIRES: check(spec) is ok
  // and `targets` were resolved for it.
  Plan(Spec spec, Resolved targets, std::string id, std::string lease_id, Now now);

  Steps step(const Event& event, Now now);

  const Record& record() const { return record_; }
  bool over() const { return stage_ == Stage::over; }
  // What a CancelRequested stepped now gets, from the run's stage (the one
  // rule: step() follows it): accepted while it starts or runs, already
  // while it is cancelling, ended from the moment its verdict is decided
  // (its files being written, its record stored, over).
  CancelAnswer cancelAnswer() const { return cancelIn(stage_); }
  // The state the run ends in, once its verdict is decided (ended above);
  // nullopt before.
  std::optional<State> decided() const;

 private:
  // The run's life: starting (until its record is stored), running,
  // cancelling (its attempts stop), writing its artifacts, storing its
  // final record, over.
  enum class Stage { starting, running, cancelling, writing, storing, over };
  static CancelAnswer cancelIn(Stage stage);
  // An infrastructure failure of a board target: none, wanted (once the
  // board is free), swapping (the lease service replaces the board),
  // superseded (the retry runs on the board swapped in); undecided: the
  // board failed and its reference, which tells the lab's failure from the
  // firmware's, is not done yet.
  enum class Retry { none, undecided, wanted, swapping, superseded };
  static constexpr size_t kReference = SIZE_MAX; // an attempt's target: the reference

  // An attempt's working state, beside its entry in the record.
  struct Work {
    size_t image = 0;
    size_t target = kReference;
    std::optional<Boot> boot; // a board's
    Retry retry = Retry::none;
    std::optional<size_t> retry_of;
    std::string retry_reason; // the infrastructure failure a retry is for
    Attempt result;           // what its verdict is made of
    Parser parser;
    std::string console;
    bool truncated = false; // the console passed kMaxConsoleBytes
    std::string flash_log;
    Clock::SteadyTime started{};
    // For its timings (record.h): when it was made, its flash began, it
    // began running (a board powered, a simulator's console up), its
    // console's first line and its END came.
    Clock::SteadyTime created{}, running_at{};
    std::optional<Clock::SteadyTime> flashed_at, first_line_at, end_at;
    AttemptTimings timings; // a simulator's, as its runner measured them
    // A board's run after its END: until then, records that follow are
    // still read (and fail it: "record after END").
    std::optional<Clock::SteadyTime> drain_until;
    bool free = false; // its target was left free (targetFree)
    // A simulator's: the time granted from the run's simulator time
    // (Spec::max_simulator_ms) while it runs; less than the deadline, its
    // deadline is the run's time running out.
    int64_t granted_ms = 0;
    std::optional<TargetReport> report; // a target's, against the reference
    uint64_t held = 0;    // bytes of its console, flash log and values, once done and until written
    bool written = false; // its files were handed to an early WriteFiles (its memory released)
  };

  void on(const Started&, Now now, Steps& out);
  void on(const Flashed& e, Now now, Steps& out);
  void on(const Powered& e, Now now, Steps& out);
  void on(const ConsoleLine& e, Now now, Steps& out);
  void on(const ConsoleClosed& e, Now now, Steps& out);
  void on(const DeadlinePassed& e, Now now, Steps& out);
  void on(const PoweredOff& e, Now now, Steps& out);
  void on(const SimulatorStarted& e, Now now, Steps& out);
  void on(const SimulatorEnded& e, Now now, Steps& out);
  void on(const GoldenRead& e, Now now, Steps& out);
  void on(const Swapped& e, Now now, Steps& out);
  void on(const CancelRequested& e, Now now, Steps& out);
  void on(const ArtifactsWritten& e, Now now, Steps& out);
  void on(const RecordStored& e, Now now, Steps& out);

  // Where attempt `w`'s time went, as it ends `now` (record.h).
  AttemptTimings timingsOf(const Work& w, Now now) const;
  size_t addAttempt(size_t image, size_t target);
  // Attempt `i`'s entry, to change: the step's Steps::attempts names it.
  // Every change of an attempt's entry goes through it.
  AttemptEntry& touch(size_t i);
  static constexpr size_t kReferencesAhead = 8; // references started for images no target began
  void startReferences(Now now, Steps& out);
  void startReference(size_t image, Now now, Steps& out);
  // Gives target `t` its next image, if any is left: first the retry it
  // was swapped in for.
  void nextOn(size_t t, Now now, Steps& out);
  // Its deadline armed: spec_.deadline_ms unless told.
  void enterRunning(size_t i, Now now, Steps& out, std::optional<int64_t> deadline_ms = std::nullopt);
  void simulate(size_t i, std::string path, Now now, Steps& out);
  // A simulator attempt's failure when the run's simulator time ran out:
  // `what` ("not run", "stopped after 2 s"), then why.
  Status simulatorTimeOut(const std::string& what) const;
  // A board attempt's console run is over: END, its deadline, its console
  // closed (`closed`), or a failed step.
  void endBoardRun(size_t i, const std::string& closed, Now now, Steps& out);
  static std::string closedBeforeEnd(const Work& w);
  // A board attempt's END arrived: its console is read for the drain window.
  void drain(size_t i, Now now, Steps& out);
  // A board attempt that never ran (its flash failed, or the run was
  // cancelled while it flashed).
  void endBoot(size_t i, Status status, Now now, Steps& out);
  void attemptDone(size_t i, Now now, Steps& out);
  // Attempt `i` left its target free: the retry, or the target's next image.
  void targetFree(size_t i, Now now, Steps& out);
  // Whether board attempt `i` is retried, from its own verdict with its
  // image's reference (when it has one) as the witness.
  void decideRetry(size_t i);
  // A retry that failed the lab's way as its first attempt did: both are
  // the firmware's (the same image failed the same way on two boards).
  void sameOnTwoBoards(size_t retry);
  // Decides the retries that waited for a reference now done.
  void settleRetries(Now now, Steps& out);
  // The done reference attempt of `image`; nullptr: none (or not done).
  const Attempt* referenceOf(size_t image) const;
  void judgeReady();
  // --- memory: an image's files are written once it is settled ---
  // Every attempt of `image` is done and judged and none is to come.
  bool imageSettled(size_t image) const;
  // Writes the attempt files of the settled images among the attempts
  // touched this step, unless the quota says to wait for the end; then
  // the targets paused for memory go on while it allows.
  void writeSettled(Now now, Steps& out);
  void writeImage(size_t image, Steps& out);
  AttemptOutput outputOf(size_t i) const;
  // Past Spec::max_run_memory_bytes a target starts only an image another
  // began (it may settle it); `t` may start `image`.
  bool mayStart(size_t image) const;
  // Paused targets and nothing running that could free memory: the run
  // ends error (memoryReason()).
  void endIfStuck(Steps& out);
  bool anyInFlight() const;
  std::string memoryReason() const;
  bool allDone() const;
  void finishIfDone(Now now, Steps& out);
  void finish(Now now, Steps& out);
  Record finalRecord() const;
  std::vector<InfraFailure> infraFailures() const;
  bool stopping() const { return stage_ != Stage::running; }
  Status cancelStatus() const;

  Spec spec_;
  std::vector<Target> targets_; // in the record's order; swapped-in boards last
  std::string sim_label_;
  std::string reference_name_;
  Record record_;
  // By attempt. A deque: an attempt added while a handler holds another's
  // Work& (an attempt's end starts the next image) leaves that reference
  // valid, where a vector's growth would free it under the handler.
  std::deque<Work> work_;
  int64_t simulator_used_ms_ = 0;    // by the run's simulators that ended
  int64_t simulator_granted_ms_ = 0; // to those running (Work::granted_ms)
  std::vector<size_t> reference_of_; // by image: its reference attempt (kReference: none)
  std::deque<size_t> shard_queue_;   // images no target took yet (shard mode)
  std::vector<std::deque<size_t>> per_target_; // each mode: the images a target has left
  std::map<size_t, size_t> retry_on_; // target -> the attempt it retries first
  std::map<size_t, std::string> swapped_in_; // target -> the board it replaced (never swapped itself)
  // The lab's failures (their reasons) that an image showed the same way on
  // two boards: the firmware's, in any attempt of the run (never retried).
  // -> what its reason then says.
  std::map<std::string, std::string> firmware_;
  std::set<size_t> touched_; // by this step (touch())
  uint64_t held_bytes_ = 0;              // Work::held of the attempts not written
  Clock::SteadyTime begun_{}; // Started: the start of its attempts_ms
  std::vector<bool> image_written_;      // by image: its attempt files were written early
  std::vector<bool> image_begun_;        // by image: a target attempt of it was added
  std::vector<std::string> early_paths_; // the files written early (not those that failed)
  uint64_t early_bytes_ = 0;
  std::deque<uint64_t> writing_; // the memory of each early write not done yet (in held_bytes_)
  bool deferring_ = false;    // an image's files would pass the quota's early share: the rest wait for the end
  std::set<size_t> paused_;   // targets waiting for memory
  bool out_of_memory_ = false; // the run ends error: memoryReason()
  std::string early_failure_; // why an early write failed
  std::vector<std::string> early_unwritten_; // the paths it did not write
  Stage stage_ = Stage::starting;
  State final_ = State::running; // from finish() on
};

} // namespace hwfarm::run
