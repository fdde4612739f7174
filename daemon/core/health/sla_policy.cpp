#include "daemon/core/health/sla_policy.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <utility>

#include "daemon/core/health/format.h"

namespace hwfarm::health {

const char* toString(Transition::Kind k) {
  switch (k) {
    case Transition::Kind::demoted: return "demoted";
    case Transition::Kind::promoted: return "promoted";
    case Transition::Kind::pinned: return "pinned";
    case Transition::Kind::unpinned: return "unpinned";
  }
  return "?";
}

namespace {

constexpr int kSuspended = 4;

int64_t hoursMs(double h) { return static_cast<int64_t>(std::llround(h * 3600'000.0)); }

std::string percent(double ratio) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.0f%%", ratio * 100);
  return buf;
}

std::string listedWithAnd(const std::vector<std::string>& names) {
  std::string out;
  for (size_t i = 0; i < names.size(); ++i) out += (i == 0 ? "" : i + 1 == names.size() ? " and " : ", ") + names[i];
  return out;
}

} // namespace

SlaPolicy::SlaPolicy(SlaOptions options, std::optional<SlaState> state)
    : options_(std::move(options)), book_(options_.boards, options_.correlation_window_ms) {
  if (state) {
    s_ = std::move(*state);
    book_.restore(s_.incidents, s_.next_incident_id);
    s_.incidents.clear();
  } else {
    s_.policy_tier = options_.registered_tier;
    s_.effective_reason = "registered " + tierName(options_.registered_tier);
  }
}

const TierRule& SlaPolicy::rule(int tier) const { return options_.tiers[std::clamp(tier, 1, 3) - 1]; }
int64_t SlaPolicy::windowMs(int tier) const { return hoursMs(rule(tier).resolution_window_h); }

SlaState SlaPolicy::state() const {
  SlaState out = s_;
  out.incidents = book_.open();
  out.next_incident_id = book_.nextId();
  return out;
}

RatioStanding SlaPolicy::ratioAt(int64_t t) const {
  const TierRule& r = rule(s_.policy_tier);
  RatioStanding out;
  out.max = r.failure_ratio_max;
  out.min_runs = r.ratio_min_runs;
  out.window_ms = hoursMs(r.ratio_window_h);
  // Hysteresis: runs before the last transition never count again, so one
  // burst demotes once and old failures cannot undo a promotion.
  out.from_ms = std::max(t - out.window_ms, s_.last_transition_ms);
  for (auto it = s_.runs.rbegin(); it != s_.runs.rend(); ++it) {
    if (it->at_ms <= out.from_ms) break;
    if (it->at_ms > t) continue;
    if (options_.ratio_max_runs > 0 && out.runs == options_.ratio_max_runs) break;
    ++out.runs;
    out.infra_failures += it->infra ? 1 : 0;
  }
  out.ratio = out.runs ? static_cast<double>(out.infra_failures) / static_cast<double>(out.runs) : 0;
  return out;
}

std::optional<int64_t> SlaPolicy::nextDecisionAfter(int64_t t) const {
  std::optional<int64_t> next;
  auto consider = [&](int64_t at) {
    if (at > t && (!next || at < *next)) next = at;
  };
  if (s_.policy_tier < kSuspended) {
    for (const auto& inc : book_.open()) consider(inc.opened_ms + windowMs(s_.policy_tier));
    // An old run leaving the window can raise the ratio (a success drops
    // out): each such time is a decision point.
    const int64_t window = hoursMs(rule(s_.policy_tier).ratio_window_h);
    for (const auto& run : s_.runs)
      if (run.at_ms > s_.last_transition_ms) consider(run.at_ms + window);
  }
  if (s_.policy_tier > options_.registered_tier && book_.open().empty())
    consider(s_.healthy_since_ms + hoursMs(rule(s_.policy_tier).promote_after_h));
  return next;
}

std::optional<int64_t> SlaPolicy::nextDecisionMs() const { return nextDecisionAfter(s_.now_ms); }

void SlaPolicy::record(Transition tr, std::vector<Transition>& out) {
  s_.transitions.push_back(tr);
  while (s_.transitions.size() > options_.transitions_kept) s_.transitions.pop_front();
  out.push_back(std::move(tr));
}

void SlaPolicy::transition(int64_t t, Transition::Kind kind, int to, const std::string& why,
                           std::vector<Transition>& out) {
  Transition tr;
  tr.at_ms = t;
  tr.kind = kind;
  tr.from = s_.policy_tier;
  tr.to = to;
  tr.reason = std::string(toString(kind)) + " to " + tierName(to) + " at " + formatUtcMinute(t) + ": " + why;
  s_.policy_tier = to;
  s_.last_transition_ms = t;
  s_.healthy_since_ms = std::max(s_.healthy_since_ms, t);
  tr.effective = effectiveTier();
  if (s_.pinned) {
    tr.reason += " (pinned to " + tierName(*s_.pinned) + ": the effective tier stays)";
  } else {
    s_.effective_since_ms = t;
    s_.effective_reason = tr.reason;
  }
  record(std::move(tr), out);
}

// Every policy decision at time t, in order: an incident past its window,
// then the ratio (each demotes one tier), then the healthy period
// (promotes one tier; the period restarts, so one tier at a time).
void SlaPolicy::decideAt(int64_t t, std::vector<Transition>& out) {
  for (int guard = 0; guard < kSuspended; ++guard) {
    if (s_.policy_tier >= kSuspended) break;
    const int64_t window = windowMs(s_.policy_tier);
    const Incident* late = nullptr;
    for (const auto& inc : book_.open())
      if (t - inc.opened_ms >= window && (!late || inc.opened_ms < late->opened_ms)) late = &inc;
    if (late) {
      transition(t, Transition::Kind::demoted, s_.policy_tier + 1,
                 "infrastructure failure on " + late->describe() + " unresolved for " + formatSpan(window), out);
      continue;
    }
    const RatioStanding ratio = ratioAt(t);
    if (ratio.runs >= ratio.min_runs && ratio.ratio > ratio.max) {
      transition(t, Transition::Kind::demoted, s_.policy_tier + 1,
                 "infrastructure failures in " + std::to_string(ratio.infra_failures) + " of " +
                     std::to_string(ratio.runs) + " runs (" + percent(ratio.ratio) + ") over " +
                     formatSpan(ratio.window_ms) + ", above " + percent(ratio.max),
                 out);
      continue;
    }
    break;
  }
  if (s_.policy_tier > options_.registered_tier && book_.open().empty()) {
    const int64_t period = hoursMs(rule(s_.policy_tier).promote_after_h);
    if (t - s_.healthy_since_ms >= period)
      transition(t, Transition::Kind::promoted, s_.policy_tier - 1,
                 "healthy for " + formatSpan(period) + " (no infrastructure failure, every board's checks green)",
                 out);
  }
}

void SlaPolicy::prune(int64_t t) {
  int64_t longest = 0;
  for (const auto& r : options_.tiers) longest = std::max(longest, hoursMs(r.ratio_window_h));
  while (!s_.runs.empty() && s_.runs.front().at_ms <= t - longest) s_.runs.pop_front();
}

std::vector<Transition> SlaPolicy::advanceTo(int64_t now_ms) {
  std::vector<Transition> out;
  // A fresh agent's history starts now: its registered tier takes effect.
  if (s_.now_ms == 0 && s_.effective_since_ms == 0) s_.effective_since_ms = now_ms;
  for (auto next = nextDecisionAfter(s_.now_ms); next && *next <= now_ms; next = nextDecisionAfter(s_.now_ms)) {
    s_.now_ms = *next;
    decideAt(s_.now_ms, out);
  }
  s_.now_ms = std::max(s_.now_ms, now_ms);
  prune(s_.now_ms);
  return out;
}

void SlaPolicy::failure(int64_t at_ms, const std::string& board, const std::string& hub, const std::string& detail) {
  book_.onFailure(at_ms, board, hub, detail);
  s_.healthy_since_ms = std::max(s_.healthy_since_ms, at_ms);
}

void SlaPolicy::resolved(int64_t at_ms, const std::string& board) {
  if (book_.onResolved(board)) s_.healthy_since_ms = std::max(s_.healthy_since_ms, at_ms);
}

std::vector<Transition> SlaPolicy::onInfraFailure(int64_t at_ms, const std::string& board, const std::string& hub,
                                                  const std::string& detail) {
  auto out = advanceTo(at_ms);
  failure(s_.now_ms, board, hub, detail);
  decideAt(s_.now_ms, out);
  return out;
}

std::vector<Transition> SlaPolicy::onRun(int64_t at_ms, const std::string& board, const std::string& hub,
                                         RunResult result, const std::string& detail, bool resolves) {
  auto out = advanceTo(at_ms);
  s_.runs.push_back(RunSample{s_.now_ms, result == RunResult::infra_failure || result == RunResult::reference_failure});
  if (result == RunResult::infra_failure) {
    failure(s_.now_ms, board, hub, detail);
  } else {
    if (resolves) resolved(s_.now_ms, board);
    if (result == RunResult::reference_failure) s_.healthy_since_ms = std::max(s_.healthy_since_ms, s_.now_ms);
  }
  decideAt(s_.now_ms, out);
  return out;
}

std::vector<Transition> SlaPolicy::onCheck(int64_t at_ms, const std::string& board, const std::string& hub,
                                           bool passed, const std::string& detail) {
  auto out = advanceTo(at_ms);
  if (passed)
    resolved(s_.now_ms, board);
  else
    failure(s_.now_ms, board, hub, "health check: " + detail);
  decideAt(s_.now_ms, out);
  return out;
}

Result<Transition> SlaPolicy::pin(int64_t at_ms, int tier, const std::string& who, const std::string& reason) {
  if (tier < 1 || tier > 3) return Status::error(Code::invalid_argument, "tier must be 1, 2 or 3");
  if (tier < options_.registered_tier)
    return Status::error(Code::invalid_argument, "cannot pin tier " + std::to_string(tier) +
                                                     ", above the registered tier " +
                                                     std::to_string(options_.registered_tier));
  std::vector<Transition> out;
  advanceTo(at_ms);
  Transition tr;
  tr.at_ms = s_.now_ms;
  tr.kind = Transition::Kind::pinned;
  tr.from = effectiveTier();
  tr.to = tier;
  tr.effective = tier;
  tr.reason = "pinned to " + tierName(tier) + " at " + formatUtcMinute(s_.now_ms) + " by " + who + ": " + reason;
  s_.pinned = tier;
  s_.effective_since_ms = s_.now_ms;
  s_.effective_reason = tr.reason;
  record(tr, out);
  return tr;
}

std::optional<Transition> SlaPolicy::unpin(int64_t at_ms, const std::string& who, const std::string& reason) {
  advanceTo(at_ms);
  if (!s_.pinned) return std::nullopt;
  std::vector<Transition> out;
  Transition tr;
  tr.at_ms = s_.now_ms;
  tr.kind = Transition::Kind::unpinned;
  tr.from = *s_.pinned;
  s_.pinned.reset();
  tr.to = tr.effective = s_.policy_tier;
  tr.reason = "unpinned at " + formatUtcMinute(s_.now_ms) + " by " + who + ": " + reason + "; serving " +
              tierName(s_.policy_tier) + " (policy)";
  s_.effective_since_ms = s_.now_ms;
  s_.effective_reason = tr.reason;
  record(tr, out);
  return tr;
}

Standing SlaPolicy::standing(int64_t now_ms) const {
  Standing st;
  st.registered = options_.registered_tier;
  st.policy = s_.policy_tier;
  st.effective = effectiveTier();
  st.pinned = s_.pinned;
  st.since_ms = s_.effective_since_ms;
  st.reason = s_.effective_reason;
  st.ratio = ratioAt(now_ms);
  const int64_t window = windowMs(s_.policy_tier);
  const IncidentStanding* first = nullptr;
  for (const auto& inc : book_.open())
    st.incidents.push_back(IncidentStanding{inc, now_ms - inc.opened_ms, window, inc.opened_ms + window});
  for (const auto& is : st.incidents)
    if (!first || is.demotes_at_ms < first->demotes_at_ms) first = &is;
  if (s_.policy_tier > options_.registered_tier && book_.open().empty())
    st.promotion_at_ms = s_.healthy_since_ms + hoursMs(rule(s_.policy_tier).promote_after_h);
  if (s_.pinned) {
    st.warning = s_.effective_reason;
    return st;
  }
  if (first && s_.policy_tier < kSuspended) {
    st.ms_to_demotion = std::max<int64_t>(0, first->demotes_at_ms - now_ms);
    const Incident& inc = first->incident;
    const bool one = inc.unresolved.size() == 1;
    std::string who = inc.scope == Scope::board ? listedWithAnd(inc.unresolved)
                                                : inc.subject() + " (" + listedWithAnd(inc.unresolved) + ")";
    const bool plural = inc.scope == Scope::board && !one;
    const std::string to = s_.policy_tier + 1 == kSuspended ? "suspended" : std::to_string(s_.policy_tier + 1);
    st.warning = "tier " + std::to_string(s_.policy_tier) + " → " + to + " in " + formatCountdown(*st.ms_to_demotion) +
                 " unless " + who + (plural ? " recover" : " recovers");
  }
  return st;
}

} // namespace hwfarm::health
