// The tier SLA routes: GET /v1/sla, GET /v1/tier, POST /v1/tier/pin and
// /v1/tier/unpin (docs/api.md "Tier SLA").
#include "daemon/api/routes.h"

namespace hwfarm::api {
namespace {

json::value timeOrNull(std::optional<int64_t> ms) { return ms ? json::value(rfc3339(*ms)) : json::value(nullptr); }

json::value secondsOrNull(std::optional<int64_t> ms) {
  return ms ? json::value(static_cast<double>(*ms) / 1000.0) : json::value(nullptr);
}

json::array stringArray(const std::vector<std::string>& v) {
  json::array out;
  for (const auto& s : v) out.emplace_back(s);
  return out;
}

json::object transitionJson(const health::Transition& t) {
  return {{"at", rfc3339(t.at_ms)}, {"kind", health::toString(t.kind)}, {"from", t.from},
          {"to", t.to},             {"effective", t.effective},          {"reason", t.reason}};
}

json::value pinJson(const std::optional<SlaPin>& pin) {
  if (!pin) return nullptr;
  return json::object{{"tier", pin->tier}, {"by", pin->by}, {"reason", pin->reason}, {"at", rfc3339(pin->at_ms)}};
}

bool noSla(Call& c, const SlaService* sla) {
  if (sla) return false;
  c.respond(jsonError(503, "no_sla", "this daemon runs without the SLA service"));
  return true;
}

} // namespace

void Handlers::sla(Call& c) {
  if (noSla(c, sla_)) return;
  health::Standing st = sla_->standing();
  int64_t now = sla_->nowMs();
  json::array incidents;
  for (const auto& is : st.incidents) {
    const health::Incident& i = is.incident;
    incidents.push_back(json::object{{"id", i.id},
                                     {"scope", health::toString(i.scope)},
                                     {"subject", i.subject()},
                                     {"description", i.describe()},
                                     {"hub", i.hub},
                                     {"boards", stringArray(i.boards)},
                                     {"unresolved", stringArray(i.unresolved)},
                                     {"detail", i.detail},
                                     {"opened", rfc3339(i.opened_ms)},
                                     {"last_failure", rfc3339(i.last_failure_ms)},
                                     {"age_s", static_cast<double>(is.age_ms) / 1000.0},
                                     {"window_s", static_cast<double>(is.window_ms) / 1000.0},
                                     {"demotes_at", rfc3339(is.demotes_at_ms)}});
  }
  const health::RatioStanding& r = st.ratio;
  json::object ratio{{"runs", r.runs},         {"infra_failures", r.infra_failures},
                     {"ratio", r.ratio},       {"max", r.max},
                     {"min_runs", r.min_runs}, {"window_s", static_cast<double>(r.window_ms) / 1000.0},
                     {"from", rfc3339(r.from_ms)}};
  std::optional<int64_t> demotion_at;
  if (st.ms_to_demotion) demotion_at = now + *st.ms_to_demotion;
  json::object body{{"now", rfc3339(now)},
                    {"registered_tier", st.registered},
                    {"effective_tier", st.effective},
                    {"policy_tier", st.policy},
                    {"pinned_tier", st.pinned ? json::value(*st.pinned) : json::value(nullptr)},
                    {"since", tierSince(st.since_ms)},
                    {"reason", st.reason},
                    {"incidents", incidents},
                    {"ratio", ratio},
                    {"seconds_to_demotion", secondsOrNull(st.ms_to_demotion)},
                    {"ms_to_demotion", st.ms_to_demotion ? json::value(*st.ms_to_demotion) : json::value(nullptr)},
                    {"demotion_at", timeOrNull(demotion_at)},
                    {"promotion_at", timeOrNull(st.promotion_at_ms)},
                    {"warning", st.warning}};
  c.respond(ok(body));
}

namespace {

json::object tierJson(SlaService& sla) {
  sla.tick(); // decisions due now first
  const health::SlaPolicy& p = sla.policy();
  json::array transitions; // newest first
  for (auto it = p.transitions().rbegin(); it != p.transitions().rend(); ++it) transitions.push_back(transitionJson(*it));
  return {{"registered_tier", p.registeredTier()},
          {"effective_tier", p.effectiveTier()},
          {"policy_tier", p.policyTier()},
          {"pinned", pinJson(sla.pinRecord())},
          {"since", tierSince(p.effectiveSinceMs())},
          {"reason", p.effectiveReason()},
          {"transitions", transitions}};
}

// The answer to a pin or unpin once it is saved (or refused).
void answerPin(const Reply& respond, SlaService& sla, const Result<health::Transition>& r) {
  if (r.ok()) {
    json::object body = tierJson(sla);
    body["transition"] = transitionJson(*r);
    return respond(ok(body));
  }
  // The exceptions: a pin the configuration holds, and no pin to undo.
  switch (r.status().code()) {
    case Code::conflict: return respond(jsonError(409, "pinned_by_config", r.status().message()));
    case Code::not_found: return respond(jsonError(409, "not_pinned", r.status().message()));
    default: return respond(errorResponse(r.status()));
  }
}

// The completion of a pin or unpin: answers `respond` (answerPin).
SlaService::PinDone pinAnswer(const Reply& respond, SlaService& sla) {
  return [respond, &sla](const Result<health::Transition>& r) { answerPin(respond, sla, r); };
}

} // namespace

void Handlers::tier(Call& c) {
  if (noSla(c, sla_)) return;
  c.respond(ok(tierJson(*sla_)));
}

void Handlers::pinTier(Call& c) {
  if (noSla(c, sla_)) return;
  Result<PinRequest> pin = parsePin(c.request.body);
  if (!pin) return c.respond(errorResponse(pin.status()));
  sla_->pin(pin->tier, c.principal->name, pin->reason, pinAnswer(c.respond, *sla_));
}

void Handlers::unpinTier(Call& c) {
  if (noSla(c, sla_)) return;
  Result<std::string> reason = parseReason(c.request.body);
  if (!reason) return c.respond(errorResponse(reason.status()));
  sla_->unpin(c.principal->name, reason->empty() ? "no reason given" : *reason, pinAnswer(c.respond, *sla_));
}

} // namespace hwfarm::api
