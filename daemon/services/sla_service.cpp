#include "daemon/services/sla_service.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/thread_pool.hpp>
#include <spdlog/spdlog.h>

#include "daemon/core/health/format.h"
#include "daemon/services/atomic_file.h"

namespace hwfarm {
namespace asio = boost::asio;
using health::RunResult;
using health::Transition;

namespace {

// The timer re-reads the wall clock at least this often, so a stepped wall
// clock delays no decision for long.
constexpr int64_t kMaxWaitMs = 60'000;

int64_t hoursToMs(double h) { return static_cast<int64_t>(std::llround(h * 3600'000.0)); }

} // namespace

health::SlaOptions slaOptions(const config::FleetConfig& c) {
  health::SlaOptions o;
  o.registered_tier = c.agent.tier;
  for (size_t i = 0; i < o.tiers.size(); ++i) {
    const config::TierPolicy& p = c.sla.tiers[i];
    o.tiers[i] = health::TierRule{p.resolution_window_h, p.failure_ratio_max, p.ratio_window_h, p.ratio_min_runs,
                                  p.promote_after_h};
  }
  for (const auto& w : c.workers)
    for (const auto& b : w.boards) o.boards.push_back({b.name, b.power.driver == "uhubctl" ? b.power.hub : ""});
  o.correlation_window_ms = hoursToMs(c.sla.correlation_window_h);
  o.ratio_max_runs = c.sla.ratio_max_runs;
  o.transitions_kept = static_cast<size_t>(c.sla.transitions_kept);
  return o;
}

std::vector<BoardOutcome> boardOutcomes(const run::Record& run) {
  std::vector<BoardOutcome> out;
  if (run.state == run::State::running) return out;
  std::map<std::string, size_t> index; // board -> its entry in out, in first-attempt order
  std::string reference_failure;       // the first reference attempt that failed the lab's way
  for (const auto& a : run.attempts) {
    // (what a cancel cut short is the cancel's doing; what ended before it counts)
    if (a.cancelled) continue;
    FailureClass cls = a.judgement ? a.judgement->failure : FailureClass::none;
    if (a.reference) {
      if (cls == FailureClass::infrastructure && reference_failure.empty())
        reference_failure = "reference simulator: " + a.judgement->reason;
      continue;
    }
    if (a.board.empty()) continue;
    // (a target that failed only because its reference did ran well: the
    // reference's failure counts once below)
    // (a harness's case that a rule made the lab's counts as the board's
    // infrastructure failure beside a test failure that decided the run)
    bool lab_case = a.judgement && std::any_of(a.judgement->cases.begin(), a.judgement->cases.end(),
                                               [](const run::CaseVerdict& c) { return !c.rule.empty(); });
    RunResult r = (cls == FailureClass::infrastructure && !a.judgement->reference_failed) || lab_case
                      ? RunResult::infra_failure
                  : cls == FailureClass::test ? RunResult::test_failure
                                              : RunResult::passed;
    auto [it, fresh] = index.emplace(a.board, out.size());
    if (fresh) out.push_back({a.board, RunResult::passed, ""});
    BoardOutcome& o = out[it->second];
    // The worst result wins: infra_failure > test_failure > passed.
    if (static_cast<int>(r) > static_cast<int>(o.result)) {
      o.result = r;
      o.detail = a.judgement->reason;
    }
  }
  // The reference's own failure, once per run, on the first board's
  // outcome unless that is an infrastructure failure already.
  if (!reference_failure.empty() && !out.empty() &&
      static_cast<int>(out.front().result) < static_cast<int>(RunResult::reference_failure)) {
    out.front().result = RunResult::reference_failure;
    out.front().detail = reference_failure;
  }
  return out;
}

// The timer and the thread that writes sla.json. Saves are numbered; the
// thread writes a save only if no later one is queued (the later text
// holds everything), and every save's completion runs on the loop after
// its text, or a later one, is on disk.
struct SlaService::Writer {
  explicit Writer(asio::io_context& io) : timer(io) {}
  asio::steady_timer timer;
  asio::thread_pool thread{1};
  std::atomic<uint64_t> latest{0};
};

SlaService::SlaService(asio::io_context& io, const config::FleetConfig& config, const Clock& clock)
    : io_(io), clock_(clock), path_(config.agent.state_dir + "/sla.json"), writer_(std::make_unique<Writer>(io)) {
  std::optional<health::SlaState> state;
  std::error_code ec;
  if (std::filesystem::exists(path_, ec)) {
    std::ifstream in(path_, std::ios::binary);
    std::ostringstream text;
    text << in.rdbuf();
    if (!in.good() && !in.eof()) throw std::runtime_error("cannot read " + path_);
    Result<SlaFile> file = decodeSlaFile(text.str());
    if (!file.ok())
      throw std::runtime_error(path_ + " is not a valid SLA state (" + file.status().message() +
                               "); remove it to start from the registered tier");
    state = std::move(file->state);
    pin_ = std::move(file->pin);
  } else if (ec) {
    throw std::runtime_error("cannot read " + path_ + ": " + ec.message());
  }
  if (state)
    spdlog::info("SLA state resumed from {}: {} ({} open incident(s), {} transition(s) kept)", path_,
                 health::tierName(state->pinned.value_or(state->policy_tier)), state->incidents.size(),
                 state->transitions.size());
  install(slaOptions(config), std::move(state));
  config_pin_ = config.sla.pin_tier;
  config_source_ = config.source;
  last_tier_ = policy_->effectiveTier();
  last_reason_ = policy_->effectiveReason();
  advance();
  applyConfigPin();
  save();
  arm();
}

SlaService::~SlaService() {
  stopped_ = true;
  writer_->timer.cancel();
  writer_->thread.join();
}

void SlaService::install(health::SlaOptions options, std::optional<health::SlaState> state) {
  if (state) {
    // A registered tier lowered (agent.tier 1 -> 2) brings the policy and a
    // pin down to it: the agent never serves above its registered tier.
    int registered = options.registered_tier;
    if (state->policy_tier < registered || (state->pinned && *state->pinned < registered))
      spdlog::warn("SLA: agent.tier is {}: serving no tier above it", registered);
    state->policy_tier = std::max(state->policy_tier, registered);
    if (state->pinned && *state->pinned < registered) state->pinned = pin_->tier = registered;
  }
  boards_.clear();
  for (const auto& b : options.boards) boards_.insert(b.board);
  policy_ = std::make_unique<health::SlaPolicy>(std::move(options), std::move(state));
  // A board that left the configuration serves nothing: what it left
  // unresolved is resolved (as by a clean check), so removing a broken
  // board is a fix.
  std::vector<std::string> gone;
  for (const auto& incident : policy_->incidents().open())
    for (const auto& board : incident.unresolved)
      if (!boards_.count(board)) gone.push_back(board);
  for (const auto& board : gone) {
    spdlog::info("SLA: board {} is no longer configured: its infrastructure failure counts as resolved", board);
    handle(policy_->onCheck(now(), board, "", true));
  }
}

int64_t SlaService::now() {
  seen_ms_ = std::max(seen_ms_, clock_.wallMs());
  return seen_ms_;
}

void SlaService::onTierChanged(TierHook hook) { on_tier_ = std::move(hook); }

void SlaService::notifyTier() {
  if (policy_->effectiveTier() == last_tier_ && policy_->effectiveReason() == last_reason_) return;
  last_tier_ = policy_->effectiveTier();
  last_reason_ = policy_->effectiveReason();
  if (on_tier_) on_tier_(last_tier_, policy_->effectiveSinceMs(), last_reason_);
}

// Every transition is logged and counted; the caller saves.
void SlaService::handle(const std::vector<Transition>& transitions) {
  for (const auto& t : transitions) {
    ++metrics_.transitions[static_cast<size_t>(t.kind)];
    if (t.kind == Transition::Kind::demoted) spdlog::warn("SLA: {}", t.reason);
    else spdlog::info("SLA: {}", t.reason);
  }
  notifyTier();
}

void SlaService::applyConfigPin() {
  const bool config_pinned = pin_ && pin_->by == "config";
  if (config_pin_ && !(config_pinned && pin_->tier == *config_pin_)) {
    std::string reason = "sla.pin_tier = " + std::to_string(*config_pin_) + " in " + config_source_;
    Result<Transition> t = policy_->pin(now(), *config_pin_, "config", reason);
    if (t.ok()) {
      pin_ = SlaPin{*config_pin_, "config", reason, t->at_ms};
      handle({*t});
    } else {
      spdlog::error("SLA: sla.pin_tier not applied: {}", t.status().message());
    }
  } else if (!config_pin_ && config_pinned) {
    if (auto t = policy_->unpin(now(), "config", "sla.pin_tier removed from " + config_source_)) handle({*t});
    pin_.reset();
  }
}

void SlaService::reconfigure(const config::FleetConfig& config) {
  advance();
  install(slaOptions(config), policy_->state());
  config_pin_ = config.sla.pin_tier;
  config_source_ = config.source;
  notifyTier();
  applyConfigPin();
  if (stopped_) return;
  advance(); // under the new rules
  save();
  arm();
}

void SlaService::stop() {
  stopped_ = true;
  writer_->timer.cancel();
}

void SlaService::tick() {
  if (stopped_) return;
  if (advance()) save();
  arm();
}

bool SlaService::advance() {
  std::vector<Transition> made = policy_->advanceTo(now());
  handle(made);
  return !made.empty();
}

void SlaService::arm() {
  writer_->timer.cancel();
  std::optional<int64_t> next = policy_->nextDecisionMs();
  if (!next || stopped_) return;
  int64_t wait = std::clamp<int64_t>(*next - now(), 0, kMaxWaitMs);
  writer_->timer.expires_after(std::chrono::milliseconds(wait));
  writer_->timer.async_wait([this](const boost::system::error_code& ec) {
    if (!ec) tick();
  });
}

void SlaService::save(std::function<void(const Status&)> done) {
  SlaFile file{policy_->state(), pin_};
  std::string text = encodeSlaFile(file);
  uint64_t number = ++writer_->latest;
  std::weak_ptr<int> alive = alive_;
  asio::post(writer_->thread, [this, alive, number, text = std::move(text), done = std::move(done)] {
    Status status;
    if (writer_->latest.load() == number) status = replaceFile(path_, text);
    asio::post(io_, [this, alive, status, done] {
      if (alive.expired()) return; // the service is gone; so is whoever waited
      if (!status.ok()) {
        ++metrics_.save_errors;
        spdlog::error("SLA: cannot save the SLA state: {}", status.message());
      }
      if (done) done(status);
    });
  });
}

void SlaService::infraFailure(const std::string& board, const std::string& detail) {
  if (stopped_) return;
  if (board.empty()) {
    spdlog::info("SLA: infrastructure failure of no board ({}): not an incident", detail);
    return;
  }
  // The daemon names the board's USB hub at the end: "... [hub 1-1]".
  std::string hub, what = detail;
  static const std::string kHub = " [hub ";
  if (size_t at = detail.rfind(kHub); at != std::string::npos && detail.size() > at + kHub.size() + 1 &&
                                      detail.back() == ']') {
    hub = detail.substr(at + kHub.size(), detail.size() - at - kHub.size() - 1);
    what = detail.substr(0, at);
  }
  handle(policy_->onInfraFailure(now(), board, hub, what));
  save();
  arm();
}

bool SlaService::correlated(const std::string& board) const { return policy_->incidents().correlated(board); }

void SlaService::runEnded(const run::Record& run) {
  if (stopped_) return;
  std::vector<BoardOutcome> outcomes = boardOutcomes(run);
  if (outcomes.empty()) return;
  bool any = false;
  for (const auto& o : outcomes)
    if (boards_.count(o.board)) { // not a simulator target, whatever its label
      // (a harness's published results never resolve an incident: what
      // they say of the board is the suite's word, not hwfarm's)
      handle(policy_->onRun(now(), o.board, "", o.result, o.detail, run.kind == run::Kind::hwfarm));
      any = true;
    }
  if (!any) return;
  save();
  arm();
}

void SlaService::checkEnded(const std::string& board, bool passed, const std::string& detail) {
  if (stopped_) return;
  handle(policy_->onCheck(now(), board, "", passed, detail));
  save();
  arm();
}

void SlaService::pin(int tier, const std::string& who, const std::string& reason, PinDone done) {
  if (config_pin_)
    return done(Status::error(Code::conflict, "the tier is pinned to " + std::to_string(*config_pin_) +
                                                  " by sla.pin_tier in " + config_source_ + "; change it there"));
  advance();
  Result<Transition> t = policy_->pin(now(), tier, who, reason);
  if (!t.ok()) return done(t);
  pin_ = SlaPin{tier, who, reason, t->at_ms};
  handle({*t});
  arm();
  save([done, t](const Status& saved) {
    if (saved.ok()) done(t);
    else done(saved);
  });
}

void SlaService::unpin(const std::string& who, const std::string& reason, PinDone done) {
  if (config_pin_)
    return done(Status::error(Code::conflict, "the tier is pinned to " + std::to_string(*config_pin_) +
                                                  " by sla.pin_tier in " + config_source_ + "; change it there"));
  advance();
  std::optional<Transition> t = policy_->unpin(now(), who, reason);
  if (!t) return done(Status::error(Code::not_found, "the tier is not pinned"));
  pin_.reset();
  handle({*t});
  arm();
  Transition made = *t;
  save([done, made](const Status& saved) {
    if (saved.ok()) done(made);
    else done(saved);
  });
}

health::Standing SlaService::standing() {
  if (!stopped_) tick();
  return policy_->standing(now());
}

} // namespace hwfarm
