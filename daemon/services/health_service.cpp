#include "daemon/services/health_service.h"

#include <algorithm>
#include <set>

#include <spdlog/spdlog.h>

#include "daemon/services/health_checks.h"
#include "daemon/services/lease_service.h"
#include "daemon/services/loop_timers.h"

namespace asio = boost::asio;

namespace hwfarm {
namespace {

constexpr std::chrono::milliseconds kReenumerateWait{10000}; // for a board with a tty to come back

health::HealthOptions optionsOf(const config::BoardConfig& b) {
  health::HealthOptions o;
  o.interval_ms = static_cast<int64_t>(b.health.interval_s * 1000);
  o.quarantine_after = static_cast<int>(b.health.quarantine_after);
  o.retry_ms = static_cast<int64_t>(b.health.retry_s * 1000);
  o.backoff_initial_ms = static_cast<int64_t>(b.health.backoff_s * 1000);
  o.backoff_max_ms = static_cast<int64_t>(b.health.backoff_max_s * 1000);
  return o;
}

} // namespace

struct HealthService::Impl {
  Impl(asio::io_context& io_context, const config::FleetConfig& c, BoardService& b, TargetRunner& t, LeaseService& l,
       const Clock& clk)
      : steps(io_context, c, clk, b, t), leases(l), clock(clk), timers(io_context, clk) {
    configure(c);
  }

  int64_t now() const { return clock.wallMs(); }

  // Boards that stay keep their health (with the new options); a new one
  // starts healthy (a board the scheduler has quarantined, quarantined:
  // its retries start at health.backoff_s).
  void configure(const config::FleetConfig& c) {
    config = c;
    steps.reconfigure(c);
    std::map<std::string, std::unique_ptr<health::BoardHealth>> next;
    for (const auto& w : c.workers)
      for (const auto& b : w.boards) {
        health::BoardHealthState state;
        if (auto it = health.find(b.name); it != health.end()) {
          state = it->second->state();
        } else {
          state.health = health::HealthState::healthy;
          state.last_check_ms = now();
          state.last_event_ms = now();
          const lease::Board* s = leases.scheduler().board(b.name);
          if (s && s->state == lease::BoardState::quarantined) {
            state.health = health::HealthState::quarantined;
            state.failed_ladders = static_cast<int>(b.health.quarantine_after);
            state.backoff_ms = static_cast<int64_t>(b.health.backoff_s * 1000);
            state.quarantined_ms = now();
            state.reason = s->reason.empty() ? "quarantined when hwfarmd started" : s->reason;
          }
        }
        next[b.name] = std::make_unique<health::BoardHealth>(b.name, optionsOf(b), std::move(state));
      }
    health = std::move(next);
    rearm();
  }

  health::BoardHealth* find(const std::string& name) {
    auto it = health.find(name);
    return it == health.end() ? nullptr : it->second.get();
  }

  // The lease service's recovery of `name` (it spent leases.recovery_s in
  // recovering): a check is due, unless the board is failing and waits for
  // its retry (a failed check left it recovering).
  void recovering(const std::string& name) {
    health::BoardHealth* h = find(name);
    if (!h || stopped || running.count(name)) return;
    const lease::Board* b = leases.scheduler().board(name);
    std::string reason = b ? b->reason : "";
    bool resumed = reason.rfind("resumed", 0) == 0;
    const auto& s = h->state();
    if (resumed && s.health == health::HealthState::quarantined) h->onResume(now());
    if (!resumed && !s.pending &&
        (s.health == health::HealthState::failing || s.health == health::HealthState::quarantined))
      return rearm();
    h->requestCheck(now(), resumed ? health::Trigger::resume
                           : reason == "present" ? health::Trigger::first
                                                 : health::Trigger::lease_end);
    parked.erase(name);
    rearm();
  }

  void rearm() {
    if (stopped) return;
    std::optional<int64_t> next;
    for (const auto& [name, h] : health) {
      if (running.count(name) || parked.count(name)) continue;
      if (auto t = h->nextCheckMs()) next = next ? std::min(*next, *t) : *t;
    }
    timers.cancel(timer);
    if (!next) return;
    int64_t delay = std::max<int64_t>(0, *next - now());
    timer = timers.after(std::chrono::milliseconds(delay), [this] {
      timer = 0;
      fire();
    });
  }

  void fire() {
    if (stopped) return;
    int64_t t = now();
    std::vector<std::string> due;
    for (const auto& [name, h] : health) {
      if (running.count(name) || parked.count(name)) continue;
      if (auto next = h->nextCheckMs(); next && *next <= t) due.push_back(name);
    }
    for (const auto& name : due) start(name);
    rearm();
  }

  // A check is due for `name`: where the board is decides whether it runs.
  void start(const std::string& name) {
    health::BoardHealth* h = find(name);
    const lease::Board* b = leases.scheduler().board(name);
    if (!h || !b) return;
    switch (b->state) {
      case lease::BoardState::leased:
        h->onLeased(now()); // never while leased; due again when its lease ends
        return;
      case lease::BoardState::offline:
        parked.insert(name); // until it appears (it then enters recovering)
        return;
      case lease::BoardState::maintenance:
        if (h->nextTrigger() != health::Trigger::operator_request) {
          parked.insert(name);
          return;
        }
        return ladder(name); // the operator's check runs; its result is only recorded
      case lease::BoardState::available:
        // Out of the pool first, so no lease gets it mid-check.
        running.insert(name);
        leases.beginCheck(name, [this, name](const lease::OpResult& r) {
          running.erase(name);
          if (!r.status.ok() || stopped) return rearm(); // leased meanwhile: it waits for the lease's end
          ladder(name);
        });
        return;
      case lease::BoardState::recovering:
      case lease::BoardState::quarantined:
        return ladder(name);
    }
  }

  // Check; if it fails: power-cycle, port reset, re-enumeration, check.
  void ladder(const std::string& name) {
    health::BoardHealth* h = find(name);
    if (!h) return;
    auto record = std::make_shared<health::CheckRecord>();
    record->started_ms = now();
    record->trigger = h->nextTrigger();
    h->onCheckStarted(record->started_ms);
    running.insert(name);
    spdlog::info("board {}: health check ({})", name, health::toString(record->trigger));
    steps.check(name, [this, name, record](health::StepResult first) {
      record->steps.push_back(std::move(first));
      if (record->steps.back().ok || stopped) return finish(name, record);
      steps.cycle(name, [this, name, record](health::StepResult cycled) {
        bool uhubctl = false;
        if (const config::BoardConfig* b = config.findBoard(name)) uhubctl = b->power.driver == "uhubctl";
        record->steps.push_back(std::move(cycled));
        record->steps.push_back({health::Step::port_reset, true, true, 0,
                                 uhubctl ? "the power cycle was the USB port's (uhubctl)"
                                         : "no USB port reset configured (power.driver = \"uhubctl\")"});
        steps.awaitPresence(name, kReenumerateWait, [this, name, record](health::StepResult present) {
          record->steps.push_back(std::move(present));
          steps.check(name, [this, name, record](health::StepResult again) {
            record->steps.push_back(std::move(again));
            finish(name, record);
          });
        });
      });
    });
  }

  void finish(const std::string& name, const std::shared_ptr<health::CheckRecord>& record) {
    running.erase(name);
    record->ended_ms = now();
    health::BoardHealth* h = find(name);
    if (stopped || !h) return;
    // The SLA hears of the check first: its incident book then says
    // whether a failure is part of a hub's or the host's incident, which
    // does not count toward this board's quarantine.
    if (hook) hook(name, *record);
    bool correlated = !record->passed() && correlation && correlation(name);
    std::optional<health::HealthChange> change = h->onCheckFinished(*record, correlated);
    std::string summary = std::string(record->passed() ? "passed" : "failed") + " (" +
                          health::toString(record->trigger) + ", " + std::to_string(record->durationMs()) + " ms)";
    if (record->passed()) spdlog::info("board {}: health check {}", name, summary);
    else spdlog::warn("board {}: health check {}: {}", name, summary, record->evidence());
    leases.recordEvent("health_check", "", name, record->passed() ? summary : summary + ": " + record->evidence());
    if (change) {
      std::string text = std::string(health::toString(change->from)) + " -> " + health::toString(change->to) + ": " +
                         change->reason;
      spdlog::log(change->to == health::HealthState::healthy ? spdlog::level::info : spdlog::level::warn,
                  "board {}: health {}", name, text);
      leases.recordEvent("health_state", "", name, text);
    }
    lease::BoardState to = h->boardState();
    const lease::Board* b = leases.scheduler().board(name);
    bool applies = b && (b->state == lease::BoardState::recovering || b->state == lease::BoardState::quarantined) &&
                   (to == lease::BoardState::available || to == lease::BoardState::recovering ||
                    to == lease::BoardState::quarantined);
    if (!applies) return rearm(); // in maintenance (an operator's check) or gone: recorded only
    std::string reason = to == lease::BoardState::available ? "" : h->state().reason;
    leases.checked(name, to, reason, [this, name](const lease::OpResult& r) {
      if (!r.status.ok()) spdlog::warn("board {}: health check result not applied: {}", name, r.status.message());
      rearm();
    });
  }

  config::FleetConfig config;
  HealthChecks steps;
  LeaseService& leases;
  const Clock& clock;
  LoopTimers timers;
  TimerQueue::Id timer = 0; // the next check's
  std::map<std::string, std::unique_ptr<health::BoardHealth>> health;
  std::set<std::string> running; // a check (or its start) under way
  std::set<std::string> parked;  // due, but offline or in maintenance
  std::function<void(const std::string&, const health::CheckRecord&)> hook;
  std::function<bool(const std::string&)> correlation;
  bool stopped = false;
};

HealthService::HealthService(asio::io_context& io, const config::FleetConfig& config, BoardService& boards,
                             TargetRunner& targets, LeaseService& leases, const Clock& clock)
    : impl_(std::make_unique<Impl>(io, config, boards, targets, leases, clock)) {
  Impl* impl = impl_.get();
  leases.setRecoveryHandler([impl](const std::string& board) { impl->recovering(board); });
}

HealthService::~HealthService() { impl_->leases.setRecoveryHandler(nullptr); }

void HealthService::reconfigure(const config::FleetConfig& config) { impl_->configure(config); }

void HealthService::stop() {
  impl_->stopped = true;
  impl_->steps.stop();
  impl_->timers.clear();
  impl_->timer = 0;
}

void HealthService::leaseEnded(const lease::Lease& lease) {
  for (const auto& lb : lease.boards)
    if (health::BoardHealth* h = impl_->find(lb.name)) h->onReleased(impl_->now());
  impl_->rearm();
}

void HealthService::infrastructureFailure(const std::string& board) {
  if (health::BoardHealth* h = impl_->find(board)) {
    h->onInfraFailure(impl_->now());
    impl_->rearm();
  }
}

Status HealthService::requestCheck(const std::string& board, const std::string& by) {
  health::BoardHealth* h = impl_->find(board);
  const lease::Board* b = impl_->leases.scheduler().board(board);
  if (!h || !b) return Status::error(Code::not_found, "no board " + board);
  if (b->state == lease::BoardState::leased)
    return Status::error(Code::conflict, "board " + board + " is leased (lease " + b->lease_id +
                                             "): a health check would touch it; ask again once the lease ends");
  if (b->state == lease::BoardState::offline)
    return Status::error(Code::conflict, "board " + board + " is offline: nothing to check until it is present");
  if (impl_->running.count(board))
    return Status::error(Code::conflict, "a health check of board " + board + " is under way");
  h->onOperatorRequest(impl_->now());
  impl_->leases.recordEvent("health_check_requested", "", board, "by " + by);
  impl_->parked.erase(board);
  impl_->rearm();
  return Status::success();
}

const health::BoardHealth* HealthService::board(const std::string& name) const {
  auto it = impl_->health.find(name);
  return it == impl_->health.end() ? nullptr : it->second.get();
}

std::optional<int64_t> HealthService::nextCheckMs(const std::string& name) const {
  const health::BoardHealth* h = board(name);
  if (!h || impl_->running.count(name)) return std::nullopt;
  return h->nextCheckMs();
}

void HealthService::onChecked(std::function<void(const std::string&, const health::CheckRecord&)> hook) {
  impl_->hook = std::move(hook);
}

void HealthService::tick() {
  impl_->timers.tick();
  impl_->steps.tick();
}

void HealthService::setCorrelation(std::function<bool(const std::string& board)> correlated) {
  impl_->correlation = std::move(correlated);
}

} // namespace hwfarm
