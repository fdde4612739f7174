// The tier SLA service: the pure policy (core/health/sla_policy.h) on the
// event loop. It feeds the policy the lab's infrastructure failures and the
// runs' outcomes, makes the decisions that fall due on a timer, applies the
// operator's pin, logs and counts every transition, and keeps the policy's
// state in <state_dir>/sla.json, so a restart resumes where it stopped
// (docs/sla.md "Wiring").
//
// Time is the Clock's wall time (unix ms): an incident's age keeps counting
// while hwfarmd is down. A wall clock stepped back counts as no time passing
// (the policy takes inputs in time order).
//
// Durability: every change is written to sla.json (a temp file, fsync,
// rename, fsync of the directory) off the event loop, newest state last;
// pin() and unpin() answer once their change is on disk.
//
// Thread safety: all calls on the event loop thread.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "common/status.h"
#include "config/fleet_config.h"
#include "daemon/core/clock.h"
#include "daemon/core/health/sla_policy.h"
#include "daemon/core/run/record.h"
#include "daemon/services/sla_state_file.h"

namespace boost::asio {
class io_context;
}

namespace hwfarm {

// The policy's options from the config: agent.tier, [sla.tierN], the
// boards with their hubs (power.hub of a uhubctl board), and the [sla]
// options correlation_window_s, ratio_max_runs and transitions_kept.
health::SlaOptions slaOptions(const config::FleetConfig& config);

// One run's outcome per board target, from its record: the worst of its
// attempts on that board (an infrastructure failure, else a test failure,
// else passed), with the first such attempt's reason. A reference
// simulator that failed the lab's way makes the first board's outcome a
// reference_failure (unless it is an infrastructure failure already): one
// per run, whatever else failed, and a target that failed only because of
// it is no failure of its board. Runs that were cancelled (or still run)
// give nothing, and neither do the attempts a cancel cut short.
struct BoardOutcome {
  std::string board;
  health::RunResult result = health::RunResult::passed;
  std::string detail;
};
std::vector<BoardOutcome> boardOutcomes(const run::Record& run);

struct SlaMetrics {
  // Transitions made since start-up, by health::Transition::Kind.
  std::array<uint64_t, 4> transitions{};
  uint64_t save_errors = 0; // writes of sla.json that failed
};

class SlaService {
 public:
  // Resumes from <state_dir>/sla.json when it is there, else starts at the
  // registered tier; then applies sla.pin_tier (see reconfigure). Throws
  // std::runtime_error when the file cannot be read or parsed (it is never
  // replaced: remove it to start from the registered tier). `clock` must
  // outlive the service.
  SlaService(boost::asio::io_context& io, const config::FleetConfig& config, const Clock& clock);
  ~SlaService(); // waits for the write under way

  // New options (tiers, boards, agent.tier: a policy or pinned tier above a
  // new registered tier comes down to it; a board no longer configured
  // counts as resolved). sla.pin_tier is a pin by
  // "config": set, it pins that tier (unless already pinned so by config);
  // removed, it lifts a pin the config made. An operator's pin is not
  // touched by a config without pin_tier.
  void reconfigure(const config::FleetConfig& config);
  // Cancels the timer; inputs after it are ignored.
  void stop();

  // Makes every decision due now, saves, and arms the timer for the next
  // one (the timer calls it; so does every input).
  void tick();

  // An infrastructure failure of `board` that the lease service recorded
  // (a board lost, a run's attempt that failed the lab's way). A detail
  // ending in " [hub H]" names the board's USB hub (else the configured
  // one is taken); the rest is the incident's detail. An empty board (the
  // reference simulator's own failure) opens no incident: it is logged
  // only.
  void infraFailure(const std::string& board, const std::string& detail);
  // An ended run's outcomes (boardOutcomes) on the configured boards (a
  // simulator target is none).
  void runEnded(const run::Record& run);

  // A health check of `board` ended (the board health service's input): a
  // pass resolves the board, a failure opens or joins an incident
  // ("health check: <detail>").
  void checkEnded(const std::string& board, bool passed, const std::string& detail);

  // Whether `board`'s failure is part of a hub's or the host's incident
  // (the health service then does not quarantine it alone).
  bool correlated(const std::string& board) const;

  // The operator's pin: the answer comes once it is saved. invalid_argument
  // (tier outside 1..3 or above the registered tier), conflict (the config
  // pins the tier: sla.pin_tier), io_error (sla.json could not be written;
  // the pin holds in memory).
  using PinDone = std::function<void(const Result<health::Transition>&)>;
  void pin(int tier, const std::string& who, const std::string& reason, PinDone done);
  // Lifts the pin: not_found when there is none, conflict when the config
  // pins the tier.
  void unpin(const std::string& who, const std::string& reason, PinDone done);

  // Writes the state now; `done` runs on the loop once it is on disk (or
  // with the error): every change made before it is durable then.
  void flush(std::function<void(const Status&)> done) { save(std::move(done)); }

  // The standing now (decisions due are made first).
  health::Standing standing();
  const health::SlaPolicy& policy() const { return *policy_; }
  // Who pinned the tier, when it is pinned.
  const std::optional<SlaPin>& pinRecord() const { return pin_; }
  const SlaMetrics& metrics() const { return metrics_; }
  // The time decisions were made up to (unix ms).
  int64_t nowMs() const { return seen_ms_; }
  // Where the state is kept.
  const std::string& path() const { return path_; }

  // Runs after every change of the effective tier or of its reason, with
  // the tier, since when (unix ms) and why.
  using TierHook = std::function<void(int tier, int64_t since_ms, const std::string& reason)>;
  void onTierChanged(TierHook hook);

 private:
  struct Writer;
  // A new policy on `options`, resuming `state` (brought within the
  // registered tier).
  void install(health::SlaOptions options, std::optional<health::SlaState> state);
  // The wall clock, never earlier than a time already used.
  int64_t now();
  // Makes the decisions due now; true when any was made.
  bool advance();
  void handle(const std::vector<health::Transition>& transitions);
  void applyConfigPin();
  void save(std::function<void(const Status&)> done = nullptr);
  void arm();
  void notifyTier();

  boost::asio::io_context& io_;
  const Clock& clock_;
  std::string path_;
  std::set<std::string> boards_; // the configured boards
  std::optional<int> config_pin_;
  std::string config_source_;
  std::unique_ptr<health::SlaPolicy> policy_;
  std::optional<SlaPin> pin_;
  SlaMetrics metrics_;
  TierHook on_tier_;
  int last_tier_ = 0;
  std::string last_reason_;
  bool stopped_ = false;
  int64_t seen_ms_ = 0;
  std::shared_ptr<int> alive_ = std::make_shared<int>(0); // expires with the service: late completions do nothing
  std::unique_ptr<Writer> writer_; // the timer and the writing thread
};

} // namespace hwfarm
