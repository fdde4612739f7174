// What the daemon currently serves: the active config and how it got there.
// Owned by Daemon, read by the API; both run on the event loop thread only.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "config/fleet_config.h"
#include "daemon/api/server.h"
#include "daemon/services/sla_service.h"

namespace hwfarm {

struct ConfigStatus {
  uint64_t generation = 0;  // 1 for the start-up config, +1 per good reload
  std::string source;       // file path or the embedded name
  std::string sha256;       // of the config text
  int64_t loaded_at_ms = 0; // unix ms
  // The last reload attempt, good or bad.
  int64_t last_reload_at_ms = 0; // unix ms; 0 = no reload yet
  bool last_reload_ok = true;
  std::vector<std::string> last_reload_errors;
  // Settings the last good reload changed but did not apply (they keep
  // their running value until a restart), one message each.
  std::vector<std::string> last_reload_restart_needed;
};

// A USB device of a configured vendor:product that no board claims.
struct UnclaimedDevice {
  std::string vendor, product, serial, port, tty;
  std::string snippet; // a [[worker.board]] entry to paste into the config
};

struct AgentState {
  std::shared_ptr<const config::FleetConfig> config;
  ConfigStatus config_status;
  int64_t started_at_ms = 0; // unix ms
  std::string version;
  // The tier served now (the SLA service's effective tier: its pin, else
  // the policy's tier), since when (unix ms) and why ("demoted to tier 2
  // at ...: ..."; the text of a refused lease's 409).
  int effective_tier = 3;
  int64_t tier_since_ms = 0;
  std::string tier_reason;
  bool usb_discovery = false; // libusb discovery is running
  std::vector<UnclaimedDevice> unclaimed;
  std::function<api::ServerStats()> server_stats; // set once the HTTP server runs
};

// Makes `state`'s effective tier, since and reason those of `sla`, now and
// at every change (SlaService::onTierChanged). Both outlive the hook.
inline void followTier(AgentState& state, SlaService& sla) {
  auto set = [&state](int tier, int64_t since_ms, const std::string& reason) {
    state.effective_tier = tier;
    state.tier_since_ms = since_ms;
    state.tier_reason = reason;
  };
  set(sla.policy().effectiveTier(), sla.policy().effectiveSinceMs(), sla.policy().effectiveReason());
  sla.onTierChanged(set);
}

} // namespace hwfarm
