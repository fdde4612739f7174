// GET /v1/healthz: what the daemon serves and how its config got there.
#include <unistd.h>

#include "daemon/api/routes.h"

namespace hwfarm::api {

void Handlers::healthz(Call& c) {
  const auto& cs = state_.config_status;
  json::array errors;
  for (const auto& e : cs.last_reload_errors) errors.emplace_back(e);
  json::array restart_needed;
  for (const auto& n : cs.last_reload_restart_needed) restart_needed.emplace_back(n);
  json::object body{
      {"status", "ok"},
      {"agent", state_.config->agent.name},
      {"version", state_.version},
      {"pid", static_cast<int64_t>(::getpid())},
      {"registered_tier", state_.config->agent.tier},
      {"effective_tier", state_.effective_tier},
      {"tier_since", tierSince(state_.tier_since_ms)},
      {"tier_reason", state_.tier_reason},
      {"started_at", rfc3339(state_.started_at_ms)},
      {"config",
       json::object{{"generation", cs.generation},
                    {"source", cs.source},
                    {"sha256", cs.sha256},
                    {"loaded_at", rfc3339(cs.loaded_at_ms)},
                    {"workers", state_.config->workers.size()},
                    {"boards", state_.config->boardCount()},
                    {"last_reload",
                     json::object{{"at", cs.last_reload_at_ms ? json::value(rfc3339(cs.last_reload_at_ms)) : json::value(nullptr)},
                                  {"ok", cs.last_reload_ok},
                                  {"errors", errors},
                                  {"restart_needed", restart_needed}}}}},
  };
  c.respond(ok(body));
}

} // namespace hwfarm::api
