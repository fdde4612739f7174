#include "daemon/core/run/plan.h"

#include <algorithm>

#include "daemon/core/run/naming.h"

namespace hwfarm::run {
namespace {

constexpr size_t kTraceTailLines = 40; // in junit.xml's <system-out>

std::string tailLines(const std::string& text, size_t lines) {
  size_t pos = text.size();
  for (size_t n = 0; pos > 0 && n <= lines;) {
    pos = text.rfind('\n', pos - 1);
    if (pos == std::string::npos) return text;
    ++n;
    if (n > lines) return text.substr(pos + 1);
  }
  return text;
}

std::string baseName(const std::string& path) {
  size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

std::string seconds(int64_t ms) {
  std::string s = std::to_string(ms / 1000);
  if (ms % 1000) s += "." + std::to_string(ms % 1000 / 100);
  return s + " s";
}

double secondsSince(Clock::SteadyTime start, Now now) {
  return std::chrono::duration<double>(now.steady - start).count();
}

} // namespace

Plan::Plan(Spec spec, Resolved targets, std::string id, std::string lease_id, Now now)
    : spec_(std::move(spec)),
      targets_(std::move(targets.targets)),
      sim_label_(std::move(targets.sim_label)),
      reference_name_(std::move(targets.reference)) {
  Record& r = record_;
  r.id = std::move(id);
  r.lease_id = std::move(lease_id);
  r.created_ms = now.wall_ms;
  r.mode = spec_.mode;
  r.reference = spec_.reference;
  r.deadline_ms = spec_.deadline_ms;
  r.suite = spec_.suite;
  r.commit = spec_.commit;
  std::vector<std::string> files;
  for (const auto& img : spec_.images) files.push_back(img.name);
  std::vector<std::string> names = imageNames(files);
  for (size_t i = 0; i < spec_.images.size(); ++i) {
    const ImageSpec& img = spec_.images[i];
    r.images.push_back({names[i], img.name, img.reference_path.empty() ? "" : baseName(img.reference_path),
                        img.golden_path.empty() ? "" : baseName(img.golden_path)});
  }
  for (const auto& t : targets_) r.targets.push_back({t.simulator() ? sim_label_ : t.board, t.name, ""});
  per_target_.resize(targets_.size());
  reference_of_.assign(spec_.images.size(), kReference);
  image_written_.assign(spec_.images.size(), false);
  image_begun_.assign(spec_.images.size(), false);
  for (size_t i = 0; i < spec_.images.size(); ++i) {
    if (spec_.mode == Mode::shard) shard_queue_.push_back(i);
    else
      for (auto& q : per_target_) q.push_back(i);
  }
}

Steps Plan::step(const Event& event, Now now) {
  Steps out;
  std::visit([&](const auto& e) { on(e, now, out); }, event);
  out.attempts.assign(touched_.begin(), touched_.end());
  touched_.clear();
  return out;
}

AttemptEntry& Plan::touch(size_t i) {
  touched_.insert(i);
  return record_.attempts[i];
}

// --- the attempts ---------------------------------------------------------------

size_t Plan::addAttempt(size_t image, size_t target) {
  bool reference = target == kReference;
  AttemptEntry e;
  e.image = record_.images[image].name;
  e.reference = reference;
  if (reference) {
    e.target = reference_name_;
    e.board = spec_.reference == ReferenceKind::golden ? "golden" : sim_label_;
  } else {
    e.target = targets_[target].name;
    e.board = targets_[target].simulator() ? sim_label_ : targets_[target].board;
  }
  if (!reference) image_begun_[image] = true;
  Work w;
  w.image = image;
  w.target = target;
  w.result.image = e.image;
  w.result.target = e.target;
  w.result.board = e.board;
  record_.attempts.push_back(std::move(e));
  work_.push_back(std::move(w));
  touched_.insert(work_.size() - 1);
  return work_.size() - 1;
}

void Plan::on(const Started&, Now now, Steps& out) {
  if (stage_ != Stage::starting) return;
  stage_ = Stage::running;
  begun_ = now.steady;
  // References first (they run on their own simulators), then every target.
  startReferences(now, out);
  for (size_t t = 0; t < targets_.size(); ++t) nextOn(t, now, out);
  out.changed = true;
  finishIfDone(now, out);
}

// The reference of every image a target began, and of the next images
// until kReferencesAhead of those no target began yet have one: their
// results wait in memory for their images' targets. Past the memory bound
// none starts ahead.
void Plan::startReferences(Now now, Steps& out) {
  if (spec_.reference == ReferenceKind::none || stopping()) return;
  size_t ahead = 0;
  for (size_t image = 0; image < spec_.images.size(); ++image)
    if (reference_of_[image] != kReference && !image_begun_[image]) ++ahead;
  bool over = spec_.max_run_memory_bytes && held_bytes_ > spec_.max_run_memory_bytes;
  for (size_t image = 0; image < spec_.images.size(); ++image) {
    if (reference_of_[image] != kReference) continue;
    if (!image_begun_[image]) {
      if (over || ahead >= kReferencesAhead) continue;
      ++ahead;
    }
    startReference(image, now, out);
  }
}

void Plan::startReference(size_t image, Now now, Steps& out) {
  size_t i = addAttempt(image, kReference);
  reference_of_[image] = i;
  Work& w = work_[i];
  w.started = w.created = now.steady;
  const ImageSpec& img = spec_.images[image];
  if (spec_.reference == ReferenceKind::golden) {
    touch(i).phase = Phase::running;
    out.commands.push_back(ReadGolden{i, img.golden_path});
    return;
  }
  // The reference runs the image's reference_image when it has one.
  simulate(i, img.reference_path.empty() ? img.path : img.reference_path, now, out);
}

Status Plan::simulatorTimeOut(const std::string& what) const {
  return Status::testFailure(what + ": the run's simulator time ran out (runs.max_simulator_s, " +
                             seconds(spec_.max_simulator_ms) + ", its references and simulator targets together)");
}

// A simulator for attempt `i`, unless the run's simulator time ran out:
// then the attempt ends unrun, the run's failure.
void Plan::simulate(size_t i, std::string path, Now now, Steps& out) {
  if (spec_.max_simulator_ms <= 0 || simulator_used_ms_ < spec_.max_simulator_ms) {
    out.commands.push_back(Simulate{i, std::move(path), std::chrono::milliseconds(spec_.deadline_ms),
                                     std::chrono::milliseconds(spec_.drain_ms)});
    return;
  }
  Work& w = work_[i];
  w.result.status = simulatorTimeOut("not run");
  size_t target = w.target;
  attemptDone(i, now, out);
  if (target != kReference) targetFree(i, now, out);
}

void Plan::nextOn(size_t t, Now now, Steps& out) {
  if (stopping()) return;
  std::optional<size_t> image;
  std::optional<size_t> retry_of;
  if (auto it = retry_on_.find(t); it != retry_on_.end()) {
    retry_of = it->second;
    image = work_[it->second].image;
    retry_on_.erase(it);
  } else {
    std::deque<size_t>& queue = spec_.mode == Mode::shard ? shard_queue_ : per_target_[t];
    if (!queue.empty()) {
      if (!mayStart(queue.front())) {
        paused_.insert(t);
        return finishIfDone(now, out); // (it may be stuck)
      }
      image = queue.front();
      queue.pop_front();
    }
  }
  if (!image) return;
  size_t i = addAttempt(*image, t);
  if (reference_of_[*image] == kReference) startReferences(now, out); // (its own, and one more ahead)
  Work& w = work_[i];
  w.retry_of = retry_of;
  if (retry_of) touch(i).retry_of_board = record_.attempts[*retry_of].board;
  w.started = w.created = now.steady;
  out.changed = true;
  const Target& target = targets_[t];
  const std::string& path = spec_.images[*image].path;
  if (target.simulator()) return simulate(i, path, now, out);
  w.boot.emplace(target.kind);
  touch(i).phase = Phase::flashing;
  out.commands.push_back(Watch{i, target.board});
  w.boot->start();
  out.commands.push_back(Flash{i, target.board, path});
}

void Plan::enterRunning(size_t i, Now now, Steps& out, std::optional<int64_t> deadline_ms) {
  work_[i].running_at = now.steady;
  touch(i).phase = Phase::running;
  out.changed = true;
  out.commands.push_back(
      ArmDeadline{i, now.steady + std::chrono::milliseconds(deadline_ms.value_or(spec_.deadline_ms))});
}

void Plan::on(const Flashed& e, Now now, Steps& out) {
  Work& w = work_.at(e.attempt);
  if (!w.boot || w.boot->stage() != Boot::Stage::flashing) return;
  w.flashed_at = now.steady;
  w.flash_log = e.log;
  if (stage_ == Stage::cancelling) return endBoot(e.attempt, cancelStatus(), now, out);
  std::optional<BootStep> next = w.boot->flashed(e.status);
  if (w.boot->stage() == Boot::Stage::failed) return endBoot(e.attempt, w.boot->failure(), now, out);
  if (w.boot->running()) enterRunning(e.attempt, now, out);
  if (next) out.commands.push_back(Power{e.attempt, targets_[w.target].board, next->power});
  // An unswitched board's firmware may have ended while it was flashed.
  if (w.boot->running() && w.parser.ended()) drain(e.attempt, now, out);
}

void Plan::on(const Powered& e, Now now, Steps& out) {
  Work& w = work_.at(e.attempt);
  if (!w.boot || record_.attempts[e.attempt].phase >= Phase::finishing) return;
  if (w.boot->stage() == Boot::Stage::stopping && stage_ == Stage::cancelling)
    return endBoot(e.attempt, cancelStatus(), now, out);
  bool was_running = w.boot->running();
  std::optional<BootStep> next = w.boot->powered(e.status);
  if (w.boot->stage() == Boot::Stage::failed) {
    work_[e.attempt].result.status = w.boot->failure();
    return endBoardRun(e.attempt, "", now, out);
  }
  if (!was_running && w.boot->running()) enterRunning(e.attempt, now, out);
  if (next) out.commands.push_back(Power{e.attempt, targets_[w.target].board, next->power});
}

void Plan::on(const ConsoleLine& e, Now now, Steps& out) {
  Work& w = work_.at(e.attempt);
  if (!w.boot || !w.boot->listening() || record_.attempts[e.attempt].phase >= Phase::finishing) return;
  if (w.console.size() + e.text.size() + 1 > kMaxConsoleBytes) {
    w.truncated = true;
  } else {
    w.console += e.text;
    w.console += '\n';
  }
  w.parser.line(e.line()); // cut lines stay cut: never a record
  if (!w.first_line_at) w.first_line_at = now.steady;
  if (w.parser.ended() && !w.end_at) w.end_at = now.steady;
  if (w.parser.ended() && w.boot->running() && !w.drain_until) drain(e.attempt, now, out);
}

// After END the console is read a little longer: a record printed after it
// (an early END hiding a failure) fails the attempt.
void Plan::drain(size_t i, Now now, Steps& out) {
  Work& w = work_[i];
  if (spec_.drain_ms <= 0) return endBoardRun(i, "", now, out);
  w.drain_until = now.steady + std::chrono::milliseconds(spec_.drain_ms);
  out.commands.push_back(CancelDeadline{i});
  out.commands.push_back(ArmDeadline{i, *w.drain_until});
}

// How a console that closed before END reads, ahead of why it closed.
std::string Plan::closedBeforeEnd(const Work& w) {
  return w.console.empty() ? "the console closed before any output: "
                           : "the console closed mid-run (BEGIN but no END): ";
}

void Plan::on(const ConsoleClosed& e, Now now, Steps& out) {
  Work& w = work_.at(e.attempt);
  if (!w.boot || !w.boot->running() || record_.attempts[e.attempt].phase != Phase::running) return;
  // Closed after its END (in the drain window): the run is complete, unless
  // its simulator crashed then (what the window was to read never came:
  // the lab's).
  if (w.drain_until) {
    if (e.end.isInfrastructure() && w.result.status.ok())
      w.result.status = Status::infrastructure(e.end.code(), "after END, in the drain window: " + e.end.message(),
                                               e.end.evidence());
    return endBoardRun(e.attempt, "", now, out);
  }
  if (!e.end.ok() && w.result.status.ok())
    w.result.status = e.end.isInfrastructure()
                          ? Status::infrastructure(e.end.code(), closedBeforeEnd(w) + e.end.message(), e.end.evidence())
                          : e.end;
  endBoardRun(e.attempt, e.reason, now, out);
}

void Plan::on(const DeadlinePassed& e, Now now, Steps& out) {
  Work& w = work_.at(e.attempt);
  if (record_.attempts[e.attempt].phase != Phase::running || w.result.timed_out) return;
  if (w.drain_until) return endBoardRun(e.attempt, "", now, out);
  w.result.timed_out = true;
  // A simulator stops and reports what it printed; a board ends here.
  if (!w.boot) return out.commands.push_back(StopSimulator{e.attempt});
  endBoardRun(e.attempt, "", now, out);
}

void Plan::endBoardRun(size_t i, const std::string& closed, Now now, Steps& out) {
  Work& w = work_[i];
  touch(i).phase = Phase::finishing;
  out.commands.push_back(Unwatch{i});
  out.commands.push_back(CancelDeadline{i});
  // A board's console closing before END is the lab's (a USB hub reset, the
  // board unplugged): the firmware cannot close it. Retried.
  if (!closed.empty() && !w.parser.ended() && w.result.status.ok())
    w.result.status = Status::infrastructure(Code::unavailable, closedBeforeEnd(w) + closed);
  w.result.seconds = secondsSince(w.started, now);
  bool timed_out = w.result.timed_out;
  attemptDone(i, now, out);
  // A board still running after its deadline is powered off before its
  // next image (a board that ended its run is stopped by the board
  // service, in order with its next operation).
  if (timed_out) return out.commands.push_back(PowerOff{i, targets_[w.target].board});
  targetFree(i, now, out);
}

void Plan::endBoot(size_t i, Status status, Now now, Steps& out) {
  Work& w = work_[i];
  w.result.status = std::move(status);
  w.result.seconds = secondsSince(w.started, now);
  out.commands.push_back(Unwatch{i});
  attemptDone(i, now, out);
  targetFree(i, now, out);
}

void Plan::on(const PoweredOff& e, Now now, Steps& out) { targetFree(e.attempt, now, out); }

void Plan::on(const SimulatorStarted& e, Now now, Steps& out) {
  if (record_.attempts.at(e.attempt).phase != Phase::waiting) return;
  Work& w = work_[e.attempt];
  w.started = now.steady;
  // Its deadline, or less: what is left of the run's simulator time once
  // the running simulators' grants are set aside (so the run's simulators
  // never run longer together than max_simulator_ms).
  int64_t deadline = spec_.deadline_ms;
  if (spec_.max_simulator_ms > 0) {
    int64_t left = spec_.max_simulator_ms - simulator_used_ms_ - simulator_granted_ms_;
    w.granted_ms = std::clamp<int64_t>(left, 0, deadline);
    simulator_granted_ms_ += w.granted_ms;
    deadline = w.granted_ms;
  }
  enterRunning(e.attempt, now, out, deadline);
}

void Plan::on(const SimulatorEnded& e, Now now, Steps& out) {
  Work& w = work_.at(e.attempt);
  if (record_.attempts[e.attempt].phase >= Phase::finishing) return;
  out.commands.push_back(CancelDeadline{e.attempt});
  int64_t granted = std::exchange(w.granted_ms, 0);
  simulator_granted_ms_ -= granted;
  // (on the plan's clock, from its start to its end as the plan saw them:
  // a simulator stopped at its grant ran at least that)
  auto ran_ms = std::chrono::duration_cast<std::chrono::milliseconds>(now.steady - w.started).count();
  simulator_used_ms_ += ran_ms;
  w.result.status = e.status;
  // Stopped because the run's simulator time ran out, not at its deadline.
  bool cut_short = spec_.max_simulator_ms > 0 && granted < spec_.deadline_ms;
  if (w.result.timed_out && cut_short && e.status.ok())
    w.result.status = simulatorTimeOut(granted == 0 ? "stopped as it started" : "stopped after " + seconds(ran_ms));
  w.parser.feed(e.console);
  w.console = e.console;
  w.truncated = e.truncated;
  w.result.timed_out = w.result.timed_out || e.timed_out;
  w.result.seconds = e.seconds;
  // (as its runner measured them, from its spawn; its wait on the plan's clock)
  auto ms = [](double s) { return s < 0 ? int64_t{-1} : static_cast<int64_t>(s * 1000 + 0.5); };
  w.timings.wait_ms = std::chrono::duration_cast<std::chrono::milliseconds>(w.started - w.created).count();
  w.timings.start_ms = ms(e.connected_s);
  w.timings.first_byte_ms = ms(e.first_byte_s);
  w.timings.end_ms = ms(e.end_s);
  w.timings.drain_ms = e.end_s < 0 ? -1 : ms(std::max(0.0, e.seconds - e.end_s));
  attemptDone(e.attempt, now, out);
  if (w.target != kReference) targetFree(e.attempt, now, out);
}

void Plan::on(const GoldenRead& e, Now now, Steps& out) {
  Work& w = work_.at(e.attempt);
  if (record_.attempts[e.attempt].phase != Phase::running) return;
  w.result.status = e.status;
  w.parser.feed(e.text);
  w.console = e.text;
  w.result.seconds = secondsSince(w.started, now);
  attemptDone(e.attempt, now, out);
}

// The attempt's verdict: its own at once for the reference and for a
// retry's decision; against the reference once that is done.
void Plan::attemptDone(size_t i, Now now, Steps& out) {
  Work& w = work_[i];
  AttemptEntry& entry = touch(i);
  w.parser.finish();
  w.result.parsed = std::move(w.parser).take();
  w.held = w.console.size() + w.flash_log.size();
  for (const auto& o : w.result.parsed.outputs) w.held += o.values.size() * sizeof(double);
  held_bytes_ += w.held;
  w.result.trace_tail = tailLines(w.console, kTraceTailLines);
  if (w.truncated) w.result.trace_tail += "\n[console cut at " + std::to_string(kMaxConsoleMiB) + " MiB]\n";
  // A board's console is parsed whole (only its trace is cut); a
  // simulator's was cut before it was parsed.
  w.result.console_cut = w.truncated && !w.boot;
  w.result.golden = w.target == kReference && spec_.reference == ReferenceKind::golden;
  entry.phase = Phase::done;
  entry.seconds = w.result.seconds;
  entry.timings = timingsOf(w, now);
  out.changed = true;
  bool board = w.boot.has_value();
  if (w.target == kReference) entry.judgement = judgementOf(judgeOwn(w.result, nullptr), true);
  // A board target that failed the lab's way is retried once on another
  // board (targetFree), unless the run is stopping. Whether it was the
  // lab's may take its reference's evidence (a silent console is the
  // firmware's when the simulator printed nothing either).
  if (board && !w.retry_of && spec_.retry && !stopping()) {
    bool reference_pending = spec_.reference == ReferenceKind::qemu && !referenceOf(w.image);
    if (reference_pending && judgeOwn(w.result, nullptr).failure != FailureClass::none) w.retry = Retry::undecided;
    else decideRetry(i);
  }
  judgeReady();
  settleRetries(now, out);
  finishIfDone(now, out);
}

const Attempt* Plan::referenceOf(size_t image) const {
  size_t r = reference_of_[image];
  if (r == kReference || record_.attempts[r].phase != Phase::done) return nullptr;
  return &work_[r].result;
}

void Plan::decideRetry(size_t i) {
  Work& w = work_[i];
  TargetReport own = judgeOwn(w.result, referenceOf(w.image));
  w.retry = own.failure == FailureClass::infrastructure && !firmware_.count(own.reason) ? Retry::wanted : Retry::none;
  w.retry_reason = own.reason;
  // One board per failed board: a board swapped in is not swapped out in
  // turn (a run of bad images would drain the pool board by board).
  auto in = swapped_in_.find(w.target);
  if (w.retry != Retry::wanted || in == swapped_in_.end()) return;
  w.retry = Retry::none;
  touch(i).not_retried = targets_[w.target].board + " was swapped in for " + in->second +
                                    " in this run: a run swaps one board per failed board";
}

void Plan::settleRetries(Now now, Steps& out) {
  for (size_t i = 0; i < work_.size(); ++i) {
    Work& w = work_[i];
    if (w.retry != Retry::undecided || !referenceOf(w.image)) continue;
    decideRetry(i);
    if (w.free) targetFree(i, now, out);
  }
}

void Plan::targetFree(size_t i, Now now, Steps& out) {
  Work& w = work_[i];
  w.free = true;
  if (w.retry == Retry::undecided) return; // settleRetries goes on
  if (w.retry != Retry::wanted) return nextOn(w.target, now, out);
  w.retry = Retry::swapping;
  out.commands.push_back(SwapBoard{i, targets_[w.target].board, "run " + record_.id + ": " + w.retry_reason});
}

void Plan::on(const Swapped& e, Now now, Steps& out) {
  Work& w = work_.at(e.attempt);
  if (w.retry != Retry::swapping) return;
  out.changed = true;
  if (!e.board.ok() || stopping()) {
    w.retry = Retry::none;
    if (!e.board.ok()) {
      touch(e.attempt).not_retried = e.board.status().message();
      nextOn(w.target, now, out); // without a swap the board stays in the run
    }
    return finishIfDone(now, out);
  }
  w.retry = Retry::superseded;
  touch(e.attempt).retried = true;
  record_.judge(); // its failure counts through its retry now
  size_t old = w.target;
  Target fresh = *e.board;
  fresh.name = targets_[old].name;
  targets_.push_back(fresh);
  record_.targets.push_back({fresh.board, fresh.name, targets_[old].board});
  size_t t = targets_.size() - 1;
  swapped_in_[t] = targets_[old].board;
  per_target_.push_back(std::exchange(per_target_[old], {}));
  retry_on_[t] = e.attempt;
  nextOn(t, now, out);
}

// Targets are judged once their image's reference is done.
void Plan::judgeReady() {
  const auto thresholds = [this](std::string_view i, std::string_view c, std::string_view o, Dtype d) {
    return resolveThresholds(spec_.thresholds, i, c, o, d);
  };
  for (size_t i = 0; i < work_.size(); ++i) {
    Work& w = work_[i];
    if (w.target == kReference || w.report || record_.attempts[i].phase != Phase::done) continue;
    const Attempt* reference = nullptr;
    if (spec_.reference != ReferenceKind::none) {
      reference = referenceOf(w.image);
      if (!reference) continue;
    }
    w.report = evaluate(w.result, reference, thresholds);
    if (w.retry_of) sameOnTwoBoards(i);
    if (auto known = firmware_.find(w.report->reason); known != firmware_.end() && w.boot && w.result.status.ok() &&
        w.report->failure == FailureClass::infrastructure && !w.report->reference_failed)
      blameFirmware(*w.report, known->second);
    touch(i).judgement = judgementOf(*w.report, false);
  }
  record_.judge();
}

// Blame needs evidence (DESIGN.md): what a console showed on one board (its
// silence, noise, damaged records) that the image repeats word for word on
// another is the image's.
void Plan::sameOnTwoBoards(size_t retry) {
  size_t first = *work_[retry].retry_of;
  if (!work_[first].report) return;
  TargetReport& a = *work_[first].report;
  TargetReport& b = *work_[retry].report;
  // (a failed step of the lab's own, a flasher or a power switch, stays the lab's)
  if (a.failure != FailureClass::infrastructure || b.failure != FailureClass::infrastructure ||
      a.reference_failed || b.reference_failed || a.reason != b.reason || !work_[first].result.status.ok() ||
      !work_[retry].result.status.ok())
    return;
  std::string why = " (on " + a.board + " and on " + b.board +
                    " alike: the same image failed the same way on two boards, the firmware's failure)";
  firmware_.emplace(a.reason, " (as " + a.image + " did on " + a.board + " and on " + b.board +
                                  ": the firmware's failure)");
  blameFirmware(a, why);
  blameFirmware(b, why);
  touch(first).judgement = judgementOf(a, false);
  touch(retry).judgement = judgementOf(b, false);
}

// --- cancel and the end ------------------------------------------------------------

Status Plan::cancelStatus() const { return Status::error(Code::unavailable, "cancelled: " + record_.reason); }

CancelAnswer Plan::cancelIn(Stage stage) {
  switch (stage) {
    case Stage::starting:
    case Stage::running: return CancelAnswer::accepted;
    case Stage::cancelling: return CancelAnswer::already;
    case Stage::writing:
    case Stage::storing:
    case Stage::over: return CancelAnswer::ended;
  }
  return CancelAnswer::ended;
}

std::optional<State> Plan::decided() const {
  if (cancelAnswer() != CancelAnswer::ended) return std::nullopt;
  return final_;
}

// What ended before the cancel stands (and counts); what had not ended is
// cut short by it and counts for nothing.
void Plan::on(const CancelRequested& e, Now now, Steps& out) {
  if (cancelAnswer() != CancelAnswer::accepted) return;
  stage_ = Stage::cancelling;
  record_.reason = e.reason;
  record_.cancelling = true;
  out.changed = true;
  for (size_t i = 0; i < work_.size(); ++i) {
    Work& w = work_[i];
    if (w.retry == Retry::wanted || w.retry == Retry::undecided) w.retry = Retry::none;
    Phase phase = record_.attempts[i].phase;
    if (phase != Phase::done) touch(i).cancelled = true;
    if (!w.boot) {
      // Simulators stop; a golden reference is only being read.
      bool simulator = w.target != kReference || spec_.reference == ReferenceKind::qemu;
      if (simulator && phase < Phase::finishing) out.commands.push_back(StopSimulator{i});
      continue;
    }
    // Flashing boards end when their flasher does; no firmware keeps running.
    if (phase != Phase::running) continue;
    w.result.status = cancelStatus();
    touch(i).phase = Phase::finishing;
    out.commands.push_back(Unwatch{i});
    out.commands.push_back(CancelDeadline{i});
    out.commands.push_back(PowerOff{i, targets_[w.target].board});
    attemptDone(i, now, out);
  }
  finishIfDone(now, out);
}

bool Plan::allDone() const {
  for (size_t i = 0; i < work_.size(); ++i)
    if (record_.attempts[i].phase != Phase::done || work_[i].retry == Retry::wanted ||
        work_[i].retry == Retry::swapping || work_[i].retry == Retry::undecided)
      return false;
  if (stage_ == Stage::cancelling) return true;
  if (!shard_queue_.empty() || !retry_on_.empty()) return false;
  return std::all_of(per_target_.begin(), per_target_.end(), [](const auto& q) { return q.empty(); });
}

void Plan::finishIfDone(Now now, Steps& out) {
  writeSettled(now, out);
  endIfStuck(out);
  if ((stage_ == Stage::running || stage_ == Stage::cancelling) && allDone()) finish(now, out);
}

// --- memory ---------------------------------------------------------------------

bool Plan::imageSettled(size_t image) const {
  if (image_written_[image]) return false;
  if (spec_.reference != ReferenceKind::none && !referenceOf(image)) return false;
  if (std::find(shard_queue_.begin(), shard_queue_.end(), image) != shard_queue_.end()) return false;
  for (const auto& q : per_target_)
    if (std::find(q.begin(), q.end(), image) != q.end()) return false;
  for (const auto& [t, a] : retry_on_)
    if (work_[a].image == image) return false;
  bool any = false;
  for (size_t i = 0; i < work_.size(); ++i) {
    const Work& w = work_[i];
    if (w.image != image || w.target == kReference) continue;
    any = true;
    if (record_.attempts[i].phase != Phase::done || !w.report) return false;
    if (w.retry != Retry::none && w.retry != Retry::superseded) return false;
  }
  return any;
}

AttemptOutput Plan::outputOf(size_t i) const {
  const Work& w = work_[i];
  return {record_.attempts[i].image, record_.attempts[i].target, w.boot.has_value(), w.retry == Retry::superseded,
          &w.console, &w.flash_log, &w.result.parsed, w.report ? &*w.report : nullptr};
}

void Plan::writeSettled(Now now, Steps& out) {
  // (a run that ends now writes everything at once)
  if (stage_ != Stage::running || allDone()) return;
  std::set<size_t> images;
  for (size_t i : touched_) images.insert(work_[i].image);
  for (size_t image : images)
    if (!deferring_ && imageSettled(image)) writeImage(image, out);
  if (spec_.max_run_memory_bytes && held_bytes_ > spec_.max_run_memory_bytes) return;
  startReferences(now, out);
  for (size_t t : std::exchange(paused_, {})) nextOn(t, now, out);
}

// An image's attempt files, within the quota's early share: the last
// eighth is kept for what the end writes (junit.xml first: withinQuota).
void Plan::writeImage(size_t image, Steps& out) {
  std::vector<size_t> of;
  std::vector<AttemptOutput> outputs;
  for (size_t i = 0; i < work_.size(); ++i)
    if (work_[i].image == image) {
      of.push_back(i);
      outputs.push_back(outputOf(i));
    }
  std::vector<ArtifactFile> files = attemptFiles(outputs);
  uint64_t bytes = 0;
  for (const auto& f : files) bytes += f.bytes.size();
  if (uint64_t quota = spec_.max_artifact_bytes; quota > 0) {
    uint64_t share = quota - std::max<uint64_t>(1, quota / 8);
    if (early_bytes_ + bytes > share) {
      deferring_ = true; // the rest is sorted out at the end, junit.xml first
      return;
    }
  }
  image_written_[image] = true;
  early_bytes_ += bytes;
  for (const auto& f : files) early_paths_.push_back(f.path);
  // Its memory moves into the write: it counts until the write is done.
  uint64_t held = 0;
  for (size_t i : of) {
    Work& w = work_[i];
    w.console = std::string();
    w.flash_log = std::string();
    for (auto& o : w.result.parsed.outputs) std::vector<double>().swap(o.values);
    held += std::exchange(w.held, 0);
    w.written = true;
  }
  writing_.push_back(held);
  out.commands.push_back(WriteFiles{std::move(files), true});
}

bool Plan::mayStart(size_t image) const {
  if (!spec_.max_run_memory_bytes || held_bytes_ <= spec_.max_run_memory_bytes) return true;
  // An image whose reference is done (its results held) or that another
  // target began: running it lets it be judged and written.
  size_t r = reference_of_[image];
  if (r != kReference && record_.attempts[r].phase == Phase::done) return true;
  return spec_.mode != Mode::shard && image_begun_[image];
}

bool Plan::anyInFlight() const {
  if (!writing_.empty()) return true; // (a write frees memory when done)
  std::vector<bool> freeing(targets_.size(), false); // its last attempt ended, its next not asked for yet
  for (size_t i = 0; i < work_.size(); ++i) {
    const Work& w = work_[i];
    if (record_.attempts[i].phase != Phase::done || w.retry == Retry::wanted || w.retry == Retry::swapping ||
        w.retry == Retry::undecided)
      return true;
    if (w.target != kReference) freeing[w.target] = !w.free;
  }
  for (size_t t = 0; t < targets_.size(); ++t)
    if (freeing[t] && !paused_.count(t)) return true;
  return false;
}

void Plan::endIfStuck(Steps& out) {
  if (stage_ != Stage::running || paused_.empty() || anyInFlight()) return;
  out_of_memory_ = true;
  stage_ = Stage::cancelling; // (nothing runs: it finishes at once)
  record_.reason = memoryReason();
  out.changed = true;
  paused_.clear();
}

std::string Plan::memoryReason() const {
  std::string out = "it holds " + std::to_string(held_bytes_) +
                    " bytes of consoles, flash logs and outputs not written yet, past runs.max_run_memory_bytes (" +
                    std::to_string(spec_.max_run_memory_bytes) + " bytes), and nothing it runs can free them";
  if (deferring_)
    out += ": its files come near " + spec_.artifact_quota + " (" + std::to_string(spec_.max_artifact_bytes) +
           " bytes), so the rest wait for its end";
  return out + "; its images not started did not run";
}

// The record says "running" until the artifacts are written and the final
// record stored: a client that sees the run ended finds every file in place.
AttemptTimings Plan::timingsOf(const Work& w, Now now) const {
  if (!w.boot) return w.timings; // a simulator's (or nothing: golden outputs)
  auto ms = [](Clock::SteadyTime from, Clock::SteadyTime to) {
    return std::max<int64_t>(0, std::chrono::duration_cast<std::chrono::milliseconds>(to - from).count());
  };
  AttemptTimings t;
  if (w.flashed_at) t.flash_ms = ms(w.created, *w.flashed_at);
  bool ran = w.running_at != Clock::SteadyTime{};
  // (a board the flasher resets may print before it counts as running)
  if (ran && w.first_line_at) t.first_byte_ms = ms(w.running_at, *w.first_line_at);
  if (ran && w.end_at) t.end_ms = ms(w.running_at, *w.end_at);
  if (w.end_at) t.drain_ms = ms(*w.end_at, now.steady);
  return t;
}

void Plan::finish(Now now, Steps& out) {
  final_ = out_of_memory_ ? State::error : stage_ == Stage::cancelling ? State::cancelled : record_.verdict();
  // Its own outputs outgrew what it may hold: not the lab's failure.
  if (out_of_memory_ && record_.failure == FailureClass::none) record_.failure = FailureClass::test;
  stage_ = Stage::writing;
  record_.ended_ms = now.wall_ms;
  if (begun_ != Clock::SteadyTime{})
    record_.attempts_ms = std::chrono::duration_cast<std::chrono::milliseconds>(now.steady - begun_).count();
  // The attempt files not written early, then the run's own.
  std::vector<AttemptOutput> outputs;
  std::vector<const TargetReport*> reports;
  for (size_t i = 0; i < work_.size(); ++i) {
    const Work& w = work_[i];
    if (!w.written) outputs.push_back(outputOf(i));
    if (w.report && w.retry != Retry::superseded) reports.push_back(&*w.report);
  }
  std::vector<std::string> names; // the targets' names in order, each once: their device ids
  for (const auto& t : targets_)
    if (std::find(names.begin(), names.end(), t.name) == names.end()) names.push_back(t.name);
  std::vector<ArtifactFile> all = attemptFiles(outputs);
  for (auto& f : summaryFiles(spec_.suite.empty() ? record_.id : spec_.suite, reports, names, spec_.images.size() > 1))
    all.push_back(std::move(f));
  // (early writes stay within the quota's share: what is left of it is at least 1 byte)
  uint64_t quota = spec_.max_artifact_bytes;
  Kept kept = withinQuota(std::move(all), quota ? quota - early_bytes_ : 0);
  if (!kept.left_out.empty() && final_ != State::cancelled && !out_of_memory_) {
    // The run's own outputs are too big: not the lab's failure, and no
    // verdict stands on files that were not kept.
    final_ = State::error;
    record_.reason = quotaReason(kept, quota, spec_.artifact_quota, early_paths_.size(), early_bytes_);
    if (record_.failure == FailureClass::none) record_.failure = FailureClass::test;
  }
  std::vector<ArtifactFile> files = std::move(kept.files);
  for (const auto& f : files) record_.artifacts.push_back(f.path);
  for (const auto& path : early_paths_) record_.artifacts.push_back(path);
  record_.artifacts.push_back("summary.json");
  files.push_back({"summary.json", finalRecord().toJson()});
  out.changed = true;
  out.commands.push_back(WriteFiles{std::move(files)});
}

Record Plan::finalRecord() const {
  Record r = record_;
  r.state = final_;
  return r;
}

void Plan::on(const ArtifactsWritten& e, Now now, Steps& out) {
  if (e.early) { // (before the last write's, which waits for it)
    if (!writing_.empty()) {
      held_bytes_ -= writing_.front();
      writing_.pop_front();
    }
    if (e.status.ok()) return finishIfDone(now, out); // (memory freed: paused targets may go on)
    if (early_failure_.empty()) early_failure_ = e.status.message();
    early_unwritten_.insert(early_unwritten_.end(), e.unwritten.begin(), e.unwritten.end());
    std::erase_if(early_paths_, [&](const std::string& path) {
      return std::find(e.unwritten.begin(), e.unwritten.end(), path) != e.unwritten.end();
    });
    return finishIfDone(now, out);
  }
  if (stage_ != Stage::writing) return;
  stage_ = Stage::storing;
  if (!e.status.ok() || !early_failure_.empty()) {
    final_ = State::error;
    record_.reason = "its artifacts could not be written: " + (e.status.ok() ? early_failure_ : e.status.message());
    std::vector<std::string> unwritten = e.unwritten;
    unwritten.insert(unwritten.end(), early_unwritten_.begin(), early_unwritten_.end());
    // The record lists only what a client finds.
    std::erase_if(record_.artifacts, [&](const std::string& path) {
      return std::find(unwritten.begin(), unwritten.end(), path) != unwritten.end();
    });
    // The daemon's own I/O failed: the lab's failure, whatever the attempts'.
    if (record_.failure == FailureClass::none) record_.failure = FailureClass::infrastructure;
    out.changed = true;
    out.commands.push_back(WriteFiles{{{"summary.json", finalRecord().toJson()}}});
  }
  out.commands.push_back(StoreRecord{finalRecord()});
}

void Plan::on(const RecordStored&, Now, Steps& out) {
  if (stage_ != Stage::storing) return;
  stage_ = Stage::over;
  record_.state = final_;
  out.changed = true;
  out.commands.push_back(Finished{infraFailures()});
}

std::vector<InfraFailure> Plan::infraFailures() const {
  std::vector<InfraFailure> out;
  for (size_t i = 0; i < work_.size(); ++i) {
    const Work& w = work_[i];
    if (record_.attempts[i].cancelled) continue; // the cancel's doing
    if (w.target == kReference && !w.result.status.ok())
      out.push_back({"", "run " + record_.id + ": reference simulator: " + w.result.status.message()});
    // (a target that failed only because its reference did is not its
    // board's failure: the reference's own entry counts it)
    if (w.report && w.report->failure == FailureClass::infrastructure && !w.report->reference_failed)
      out.push_back({w.boot ? targets_[w.target].board : "", "run " + record_.id + ": " + w.report->reason});
  }
  return out;
}

} // namespace hwfarm::run
