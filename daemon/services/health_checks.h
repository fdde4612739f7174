// The steps of a board's health check and recovery ladder (health_service.h
// runs them), each with its duration and evidence. A check boots the board's
// health image through the target runner in the same sequence a run's
// attempt does (core/run/boot.h), so the two cannot drift. Never of a leased
// board (the caller makes sure). Deadlines and polls run on the Clock.
//
// Thread safety: every call on the event loop thread.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include "config/fleet_config.h"
#include "daemon/core/clock.h"
#include "daemon/core/health/board_health.h"

namespace boost::asio {
class io_context;
}

namespace hwfarm {

class BoardService;
class TargetRunner;

class HealthChecks {
 public:
  // `clock`, `boards` and `targets` must outlive the checks.
  HealthChecks(boost::asio::io_context& io, const config::FleetConfig& config, const Clock& clock,
               BoardService& boards, TargetRunner& targets);
  ~HealthChecks();

  void reconfigure(const config::FleetConfig& config);
  // No step under way answers any more; its timers stop.
  void stop();

  using StepDone = std::function<void(health::StepResult)>;
  // The board is present (a simulated board always is; a board with a tty
  // needs its console path); then, with a health image, boots it (flash,
  // power as its kind wants) and waits up to health.timeout_s for a console
  // line matching health.banner; then the board leaves the check (its
  // console closes, a simulator stops). Its console goes to
  // consoles/health-<board>/<board>.log, rewritten by each check.
  void check(const std::string& board, StepDone done);
  // Power-cycles the board (skipped without a power switch, and for a
  // simulator, which check() restarts anyway).
  void cycle(const std::string& board, StepDone done);
  // Waits up to `timeout` for a board with a tty to be present again
  // (re-enumerated), looking every 100 ms; skipped for a simulator.
  void awaitPresence(const std::string& board, std::chrono::milliseconds timeout, StepDone done);
  // Fires what is due on a ManualClock (tests); the loop does it otherwise.
  void tick();

 private:
  struct Impl;
  std::shared_ptr<Impl> impl_;
};

} // namespace hwfarm
