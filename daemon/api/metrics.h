// GET /metrics: Prometheus text exposition format 0.0.4.
#pragma once

#include <map>
#include <string>

#include "daemon/api/agent_state.h"
#include "daemon/services/lease_service.h"
#include "daemon/services/run_service.h"
#include "daemon/services/sla_service.h"
#include "daemon/services/upload_service.h"

namespace hwfarm::api {

// `runs`, `sla` and `uploads` may be null (no such service): their families
// are left out (the tiers then come from `state`). `sla`'s standing is taken
// at the time it made its decisions up to (SlaService::nowMs).
std::string renderMetrics(const AgentState& state, const LeaseService& leases,
                          const std::map<int, uint64_t>& http_responses, const RunService* runs = nullptr,
                          const SlaService* sla = nullptr, const UploadService* uploads = nullptr);

} // namespace hwfarm::api
