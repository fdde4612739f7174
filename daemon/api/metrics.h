// GET /metrics: Prometheus text exposition format 0.0.4.
#pragma once

#include <map>
#include <string>

#include "daemon/api/agent_state.h"
#include "daemon/services/lease_service.h"

namespace hwfarm::api {

std::string renderMetrics(const AgentState& state, const LeaseService& leases,
                          const std::map<int, uint64_t>& http_responses);

} // namespace hwfarm::api
