#include "daemon/core/run/record.h"

namespace hwfarm::run {

std::string_view stateName(State s) {
  switch (s) {
    case State::running: return "running";
    case State::passed: return "passed";
    case State::failed: return "failed";
    case State::error: return "error";
    case State::cancelled: return "cancelled";
    case State::interrupted: return "interrupted";
  }
  return "?";
}

std::optional<State> stateFromName(std::string_view name) {
  for (State s : {State::running, State::passed, State::failed, State::error, State::cancelled, State::interrupted})
    if (stateName(s) == name) return s;
  return std::nullopt;
}

std::string_view modeName(Mode m) { return m == Mode::shard ? "shard" : "each"; }

std::string_view kindName(Kind k) { return k == Kind::external ? "external" : "hwfarm"; }

std::string_view referenceName(ReferenceKind r) {
  switch (r) {
    case ReferenceKind::qemu: return "qemu";
    case ReferenceKind::golden: return "golden";
    case ReferenceKind::none: return "none";
  }
  return "?";
}

std::string_view phaseName(Phase p) {
  switch (p) {
    case Phase::waiting: return "waiting";
    case Phase::flashing: return "flashing";
    case Phase::running: return "running";
    case Phase::finishing: return "finishing";
    case Phase::done: return "done";
  }
  return "?";
}

Judgement judgementOf(const TargetReport& report, bool reference) {
  Judgement j;
  j.outcome = report.outcome;
  j.failure = report.failure;
  j.reason = report.reason;
  j.protocol_version = report.protocol_version;
  j.record_count = report.record_count;
  if (reference) return j;
  j.reference_failed = report.reference_failed;
  j.evidence = report.evidence;
  j.end_status = report.end_status;
  std::vector<size_t> kept = keptCases(report.cases);
  j.counts = countCases(report.cases, kept.size());
  for (size_t i : kept) {
    const CaseReport& c = report.cases[i];
    CaseVerdict cv{c.name, c.outcome, keptMessage(c.message), {}, 0};
    std::vector<size_t> outputs = keptOutputs(c.outputs);
    for (size_t k : outputs) {
      const OutputResult& o = c.outputs[k];
      cv.outputs.push_back({o.key, o.comparison.verdict, o.comparison.actual_pcc});
    }
    cv.outputs_left_out = c.outputs.size() - outputs.size();
    j.cases.push_back(std::move(cv));
  }
  return j;
}

void Record::judge() {
  failure = FailureClass::none;
  for (const auto& a : attempts) {
    if (a.reference || a.retried || a.cancelled || !a.judgement) continue;
    if (a.judgement->failure == FailureClass::test) {
      failure = FailureClass::test; // never hidden by another attempt's infrastructure failure
      return;
    }
    if (a.judgement->failure == FailureClass::infrastructure) failure = FailureClass::infrastructure;
  }
}

State Record::verdict() const {
  switch (failure) {
    case FailureClass::infrastructure: return State::error;
    case FailureClass::test: return State::failed;
    case FailureClass::none: return State::passed;
  }
  return State::error;
}

size_t Record::doneCount() const {
  size_t n = 0;
  for (const auto& a : attempts) n += a.phase == Phase::done;
  return n;
}

void Record::interrupt(int64_t now_ms) {
  state = State::interrupted;
  ended_ms = now_ms;
  failure = FailureClass::infrastructure;
  reason = "hwfarmd stopped during the run (restarted or killed); the run did not finish";
}

} // namespace hwfarm::run
