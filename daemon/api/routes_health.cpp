// GET /v1/healthz: what the daemon serves and how its config got there.
#include <unistd.h>

#include "daemon/api/routes.h"
#include "daemon/services/disk_room.h"

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
  // The room the state dir's writers leave the database (docs/operations.md,
  // "Disk space"): below half of it, no new lease or run is taken.
  uint64_t reserve = static_cast<uint64_t>(state_.config->limits.disk_reserve_bytes);
  Result<uint64_t> free = freeBytes(state_.config->agent.state_dir);
  Status room = roomForWork(state_.config->agent.state_dir, free, reserve);
  json::object disk{{"dir", state_.config->agent.state_dir},
                    {"free_bytes", free ? json::value(*free) : json::value(nullptr)},
                    {"reserve_bytes", reserve},
                    {"ok", room.ok()}};
  if (!room.ok()) disk["reason"] = room.message();
  body["disk"] = std::move(disk);
  c.respond(ok(body));
}

} // namespace hwfarm::api
