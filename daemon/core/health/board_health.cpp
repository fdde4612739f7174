#include "daemon/core/health/board_health.h"

#include <algorithm>
#include <utility>

#include "daemon/core/health/format.h"

namespace hwfarm::health {

const char* toString(Step s) {
  switch (s) {
    case Step::check: return "check";
    case Step::power_cycle: return "power_cycle";
    case Step::port_reset: return "port_reset";
    case Step::reenumerate: return "reenumerate";
  }
  return "?";
}

const char* toString(Trigger t) {
  switch (t) {
    case Trigger::first: return "first";
    case Trigger::periodic: return "periodic";
    case Trigger::lease_end: return "lease_end";
    case Trigger::infra_failure: return "infra_failure";
    case Trigger::operator_request: return "operator_request";
    case Trigger::resume: return "resume";
    case Trigger::retry: return "retry";
  }
  return "?";
}

const char* toString(HealthState s) {
  switch (s) {
    case HealthState::unknown: return "unknown";
    case HealthState::healthy: return "healthy";
    case HealthState::failing: return "failing";
    case HealthState::quarantined: return "quarantined";
  }
  return "?";
}

bool CheckRecord::passed() const { return !steps.empty() && steps.back().step == Step::check && steps.back().ok; }

std::string CheckRecord::evidence() const {
  if (passed()) return "";
  for (auto it = steps.rbegin(); it != steps.rend(); ++it)
    if (!it->ok && !it->skipped) return it->detail;
  return steps.empty() ? "no steps recorded" : "";
}

namespace {

// FNV-1a, then splitmix64's finalizer so that names differing in their
// last character differ in the high bits too. Stable across builds and
// platforms, unlike std::hash.
uint64_t nameHash(const std::string& text) {
  uint64_t h = 14695981039346656037ull;
  for (unsigned char c : text) {
    h ^= c;
    h *= 1099511628211ull;
  }
  h = (h ^ (h >> 30)) * 0xbf58476d1ce4e5b9ull;
  h = (h ^ (h >> 27)) * 0x94d049bb133111ebull;
  return h ^ (h >> 31);
}

} // namespace

BoardHealth::BoardHealth(std::string board, HealthOptions options, BoardHealthState state)
    : board_(std::move(board)), options_(options), s_(std::move(state)) {
  // u in [0, 1) from the top 53 bits; offset in [-jitter, +jitter) * interval.
  const double u = static_cast<double>(nameHash(board_) >> 11) / static_cast<double>(1ull << 53);
  jitter_ms_ = static_cast<int64_t>((2 * u - 1) * options_.jitter * static_cast<double>(options_.interval_ms));
  // A check under way when the state was saved was lost with the process.
  if (s_.running) {
    s_.running = false;
    request(Trigger::first, s_.last_event_ms);
  }
  if (s_.health == HealthState::unknown && !s_.pending) request(Trigger::first, s_.last_event_ms);
}

int64_t BoardHealth::seen(int64_t now_ms) {
  s_.last_event_ms = std::max(s_.last_event_ms, now_ms);
  return s_.last_event_ms;
}

void BoardHealth::request(Trigger trigger, int64_t now_ms) {
  // An earlier request stands (its time is earlier); an operator's wins
  // the label, as it may run in maintenance.
  if (!s_.pending || trigger == Trigger::operator_request) {
    if (!s_.pending) s_.pending_ms = now_ms;
    s_.pending = trigger;
  }
}

void BoardHealth::forgiveAfterProbation(int64_t now_ms) {
  if (s_.health == HealthState::healthy && s_.backoff_ms > 0 && now_ms - s_.released_ms >= options_.probation_ms)
    s_.backoff_ms = 0;
}

void BoardHealth::onLeased(int64_t now_ms) {
  seen(now_ms);
  s_.leased = true;
}

void BoardHealth::onLeaseEnded(int64_t now_ms) {
  const int64_t t = seen(now_ms);
  s_.leased = false;
  request(Trigger::lease_end, t);
}

void BoardHealth::onReleased(int64_t now_ms) {
  seen(now_ms);
  s_.leased = false;
}

void BoardHealth::requestCheck(int64_t now_ms, Trigger trigger) {
  const int64_t t = seen(now_ms);
  s_.leased = false;
  request(trigger, t);
}

void BoardHealth::onInfraFailure(int64_t now_ms) { request(Trigger::infra_failure, seen(now_ms)); }

void BoardHealth::onOperatorRequest(int64_t now_ms) { request(Trigger::operator_request, seen(now_ms)); }

void BoardHealth::onMaintenance(int64_t now_ms, std::string reason) {
  seen(now_ms);
  s_.maintenance = true;
  s_.pending.reset();
  s_.reason = "maintenance: " + reason;
}

void BoardHealth::onResume(int64_t now_ms) {
  const int64_t t = seen(now_ms);
  if (s_.maintenance) {
    s_.maintenance = false;
    s_.reason = "resumed from maintenance, check due";
    request(Trigger::resume, t);
  } else if (s_.health == HealthState::quarantined) {
    s_.health = HealthState::healthy;
    s_.failed_ladders = 0;
    s_.released_ms = t;
    s_.reason = "resumed from quarantine by an operator (on probation)";
  }
}

void BoardHealth::onCheckStarted(int64_t now_ms) {
  seen(now_ms);
  s_.running = true;
}

// The state machine's transitions: every change of s_.health is here (and
// in onResume, the operator's way out of quarantine).
std::optional<HealthChange> BoardHealth::onCheckFinished(CheckRecord record, bool correlated) {
  const int64_t t = seen(record.ended_ms);
  const HealthState from = s_.health;
  const bool passed = record.passed();
  const std::string evidence = record.evidence();
  s_.running = false;
  s_.pending.reset();
  s_.last_check_ms = t;
  s_.history.push_back(std::move(record));
  while (s_.history.size() > options_.history) s_.history.pop_front();
  forgiveAfterProbation(t);

  if (passed) {
    s_.failed_ladders = 0;
    s_.health = HealthState::healthy;
    if (from == HealthState::quarantined) {
      s_.released_ms = t;
      s_.reason = "passed a retry in quarantine (on probation for " + formatSpan(options_.probation_ms) + ")";
    } else {
      s_.reason = "";
    }
  } else if (from == HealthState::quarantined) {
    s_.backoff_ms = std::min(s_.backoff_ms * 2, options_.backoff_max_ms);
    s_.reason = "quarantined: retry failed (" + evidence + "), next in " + formatSpan(s_.backoff_ms);
  } else if (s_.backoff_ms > 0) {
    // Released from quarantine and failed again: back at once, doubled.
    s_.backoff_ms = std::min(s_.backoff_ms * 2, options_.backoff_max_ms);
    s_.health = HealthState::quarantined;
    s_.quarantined_ms = t;
    s_.reason = "quarantined again after leaving quarantine (" + evidence + "), next retry in " +
                formatSpan(s_.backoff_ms);
  } else if (correlated) {
    s_.health = HealthState::failing;
    s_.reason = "failing with its hub or host (" + evidence + "), not counted toward quarantine";
  } else if (++s_.failed_ladders >= options_.quarantine_after) {
    s_.backoff_ms = std::min(options_.backoff_initial_ms, options_.backoff_max_ms);
    s_.health = HealthState::quarantined;
    s_.quarantined_ms = t;
    s_.reason = "quarantined after " + std::to_string(s_.failed_ladders) + " failed recovery ladders (" + evidence +
                "), next retry in " + formatSpan(s_.backoff_ms);
  } else {
    s_.health = HealthState::failing;
    s_.reason = "failed recovery ladder " + std::to_string(s_.failed_ladders) + " of " +
                std::to_string(options_.quarantine_after) + " (" + evidence + ")";
  }
  // Same state: no change, except a failed retry in quarantine (its
  // backoff doubled, worth an event).
  if (s_.health == from && (passed || from != HealthState::quarantined)) return std::nullopt;
  return HealthChange{from, s_.health, s_.reason};
}

std::optional<int64_t> BoardHealth::nextCheckMs() const {
  if (s_.leased || s_.running) return std::nullopt;
  if (s_.maintenance && s_.pending != Trigger::operator_request) return std::nullopt;
  if (s_.pending) return s_.pending_ms;
  switch (s_.health) {
    case HealthState::unknown: return s_.last_check_ms;
    case HealthState::healthy: return s_.last_check_ms + options_.interval_ms + jitter_ms_;
    case HealthState::failing: return s_.last_check_ms + options_.retry_ms;
    case HealthState::quarantined: return s_.last_check_ms + s_.backoff_ms;
  }
  return std::nullopt;
}

Trigger BoardHealth::nextTrigger() const {
  if (s_.pending) return *s_.pending;
  switch (s_.health) {
    case HealthState::unknown: return Trigger::first;
    case HealthState::healthy: return Trigger::periodic;
    case HealthState::failing:
    case HealthState::quarantined: return Trigger::retry;
  }
  return Trigger::periodic;
}

lease::BoardState BoardHealth::boardState() const {
  if (s_.leased) return lease::BoardState::leased;
  if (s_.maintenance) return lease::BoardState::maintenance;
  if (s_.health == HealthState::quarantined) return lease::BoardState::quarantined;
  if (s_.health == HealthState::healthy && !s_.running && !s_.pending) return lease::BoardState::available;
  return lease::BoardState::recovering;
}

} // namespace hwfarm::health
