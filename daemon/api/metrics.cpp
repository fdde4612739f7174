#include "daemon/api/metrics.h"

#include <cstdio>
#include <sstream>

namespace hwfarm::api {
namespace {

void family(std::ostringstream& out, const char* name, const char* type, const char* help) {
  out << "# HELP " << name << ' ' << help << "\n# TYPE " << name << ' ' << type << '\n';
}

// A family with one sample, labelled with the agent only.
template <class T>
void single(std::ostringstream& out, const char* name, const char* type, const char* help, const std::string& agent,
            const T& value) {
  family(out, name, type, help);
  out << name << '{' << agent << "} " << value << '\n';
}

} // namespace

std::string renderMetrics(const AgentState& state, const LeaseService& leases,
                          const std::map<int, uint64_t>& http_responses, const RunService* runs,
                          const SlaService* sla, const UploadService* uploads) {
  std::ostringstream out;
  const auto& scheduler = leases.scheduler();
  const auto& m = leases.metrics();
  std::string agent = "agent=\"" + state.config->agent.name + "\"";

  family(out, "hwfarm_boards", "gauge", "Configured boards by state.");
  std::map<std::string, int> by_state;
  for (const char* s : {"offline", "recovering", "available", "leased", "quarantined", "maintenance"}) by_state[s] = 0;
  for (const auto& b : scheduler.boards()) ++by_state[lease::toString(b.state)];
  for (const auto& [s, n] : by_state) out << "hwfarm_boards{" << agent << ",state=\"" << s << "\"} " << n << '\n';

  single(out, "hwfarm_leases_active", "gauge", "Leases currently held.", agent, scheduler.activeLeaseCount());
  single(out, "hwfarm_queue_depth", "gauge", "Lease requests waiting for boards.", agent, scheduler.queueLength());

  single(out, "hwfarm_lease_grants_total", "counter", "Leases granted.", agent, m.grants);
  single(out, "hwfarm_lease_releases_total", "counter",
         "Leases released by their holder (or because their client left before the grant reached it).", agent,
         m.releases);
  single(out, "hwfarm_lease_expiries_total", "counter", "Leases that expired without renewal.", agent, m.expiries);
  single(out, "hwfarm_lease_revocations_total", "counter", "Leases revoked by an operator or a config reload.", agent,
         m.revocations);
  single(out, "hwfarm_lease_wait_timeouts_total", "counter", "Lease requests not granted within their wait_s.", agent,
         m.wait_timeouts);

  family(out, "hwfarm_lease_wait_seconds", "histogram", "Time from request to grant.");
  for (size_t i = 0; i < LeaseMetrics::kBuckets.size(); ++i)
    out << "hwfarm_lease_wait_seconds_bucket{" << agent << ",le=\"" << LeaseMetrics::kBuckets[i] << "\"} "
        << m.wait_buckets[i] << '\n';
  out << "hwfarm_lease_wait_seconds_bucket{" << agent << ",le=\"+Inf\"} " << m.wait_count << '\n';
  out << "hwfarm_lease_wait_seconds_sum{" << agent << "} " << m.wait_sum_s << '\n';
  out << "hwfarm_lease_wait_seconds_count{" << agent << "} " << m.wait_count << '\n';

  family(out, "hwfarm_http_responses_total", "counter", "HTTP responses by status code.");
  for (const auto& [code, n] : http_responses)
    out << "hwfarm_http_responses_total{" << agent << ",code=\"" << code << "\"} " << n << '\n';

  if (state.server_stats) {
    api::ServerStats st = state.server_stats();
    single(out, "hwfarm_http_connections", "gauge", "Open HTTP connections.", agent, st.connections);
    single(out, "hwfarm_http_max_connections", "gauge",
           "limits.max_connections as applied (fitted under RLIMIT_NOFILE at start-up).", agent, st.max_connections);
    single(out, "hwfarm_http_accept_errors_total", "counter", "Failed accept() calls (EMFILE, ENFILE, ...).", agent,
           st.accept_errors);
    single(out, "hwfarm_streams_open", "gauge", "Open streamed responses (console readers).", agent, st.streams);
    single(out, "hwfarm_stream_queued_bytes", "gauge",
           "Bytes held in memory for streamed responses and not yet sent, all streams together.", agent,
           st.stream_bytes_queued);
  }

  if (runs) {
    const RunMetrics& rm = runs->metrics();
    single(out, "hwfarm_runs_running", "gauge", "Runs running now.", agent, runs->runningCount());
    family(out, "hwfarm_runs_total", "counter", "Runs ended, by their state.");
    for (const char* s : {"passed", "failed", "error", "cancelled"}) {
      auto it = rm.ended.find(s);
      out << "hwfarm_runs_total{" << agent << ",state=\"" << s << "\"} " << (it == rm.ended.end() ? 0 : it->second)
          << '\n';
    }
    family(out, "hwfarm_run_attempts_total", "counter",
           "Images run on a target and judged, by failure class (none: passed).");
    out << "hwfarm_run_attempts_total{" << agent << ",class=\"none\"} "
        << rm.attempts - rm.infrastructure_failures - rm.test_failures << '\n';
    out << "hwfarm_run_attempts_total{" << agent << ",class=\"test\"} " << rm.test_failures << '\n';
    out << "hwfarm_run_attempts_total{" << agent << ",class=\"infrastructure\"} " << rm.infrastructure_failures << '\n';
  }

  family(out, "hwfarm_tier", "gauge", "Registered, effective and pinned CI tier (4: suspended; pinned 0: not pinned).");
  out << "hwfarm_tier{" << agent << ",kind=\"registered\"} " << state.config->agent.tier << '\n';
  out << "hwfarm_tier{" << agent << ",kind=\"effective\"} " << state.effective_tier << '\n';
  if (sla) {
    const health::SlaPolicy& p = sla->policy();
    health::Standing st = p.standing(sla->nowMs());
    out << "hwfarm_tier{" << agent << ",kind=\"policy\"} " << p.policyTier() << '\n';
    out << "hwfarm_tier{" << agent << ",kind=\"pinned\"} " << (st.pinned ? *st.pinned : 0) << '\n';
    family(out, "hwfarm_sla_time_to_demotion_seconds", "gauge",
           "Seconds until the SLA policy demotes the agent one tier unless an incident is resolved (+Inf: none ahead).");
    out << "hwfarm_sla_time_to_demotion_seconds{" << agent << "} ";
    if (st.ms_to_demotion) { // to the millisecond (the stream's 6 digits would round up a countdown)
      char seconds[32];
      std::snprintf(seconds, sizeof seconds, "%.3f", static_cast<double>(*st.ms_to_demotion) / 1000.0);
      out << seconds << '\n';
    } else {
      out << "+Inf\n";
    }
    single(out, "hwfarm_sla_open_incidents", "gauge", "Open infrastructure incidents (a board, a hub or the host).",
           agent, st.incidents.size());
    family(out, "hwfarm_sla_transitions_total", "counter", "Tier transitions since start-up, by kind.");
    for (auto kind : {health::Transition::Kind::demoted, health::Transition::Kind::promoted,
                      health::Transition::Kind::pinned, health::Transition::Kind::unpinned})
      out << "hwfarm_sla_transitions_total{" << agent << ",kind=\"" << health::toString(kind) << "\"} "
          << sla->metrics().transitions[static_cast<size_t>(kind)] << '\n';
    single(out, "hwfarm_sla_save_errors_total", "counter", "Writes of <state_dir>/sla.json that failed.", agent,
           sla->metrics().save_errors);
  }
  if (uploads) {
    family(out, "hwfarm_uploads", "gauge", "Runs whose upload to the S3 bucket is not done, by state.");
    std::map<std::string, int> by_state{{"pending", 0}, {"failed", 0}};
    for (const auto& u : uploads->unfinished()) ++by_state[u.state];
    for (const auto& [s, n] : by_state) out << "hwfarm_uploads{" << agent << ",state=\"" << s << "\"} " << n << '\n';
  }
  single(out, "hwfarm_config_generation", "gauge", "Configuration generation served.", agent,
         state.config_status.generation);
  return out.str();
}

} // namespace hwfarm::api
