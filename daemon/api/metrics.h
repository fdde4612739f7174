// GET /metrics: Prometheus text exposition format 0.0.4.
#pragma once

#include <map>
#include <string>

#include "daemon/api/agent_state.h"
#include "daemon/services/lease_service.h"
#include "daemon/services/run_service.h"

namespace hwfarm::api {

// `runs` may be null (no run service): its families are left out.
std::string renderMetrics(const AgentState& state, const LeaseService& leases,
                          const std::map<int, uint64_t>& http_responses, const RunService* runs = nullptr);

} // namespace hwfarm::api
