#include "daemon/services/lease_service.h"

#include <chrono>
#include <optional>
#include <set>
#include <unordered_map>

#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <spdlog/spdlog.h>

#include "config/tokens.h"
#include "daemon/services/loop_timers.h"
#include "daemon/store/database.h"
#include "daemon/store/lease_tables.h"

namespace hwfarm {
namespace asio = boost::asio;
using lease::BoardState;
using lease::Changes;

namespace {

// 128 random bits, hex: lease ids stay unique across restarts and hosts.
std::string randomId() { return config::randomHex(16); }

std::vector<lease::BoardSpec> specsOf(const config::FleetConfig& config) {
  std::vector<lease::BoardSpec> specs;
  for (const auto& w : config.workers)
    for (const auto& b : w.boards)
      specs.push_back({b.name, b.type, w.name, w.node, b.labels, b.driver, b.usb.serial.value_or(""),
                       b.driver == "usb" && b.serial.port != "auto" ? b.serial.port : ""});
  return specs;
}

// Until USB discovery reports presence, only simulated boards are present.
BoardState initialState(const lease::BoardSpec& spec) {
  return spec.driver == "qemu" ? BoardState::available : BoardState::offline;
}

// Ended leases stay in memory this long (for GET and idempotent retries);
// the database keeps them for leases.history_days.
constexpr int64_t kMemoryHistoryMs = 3600 * 1000;
// How often ended leases older than that are forgotten.
constexpr auto kForgetInterval = std::chrono::minutes(1);

lease::SchedulerOptions schedulerOptions(const config::FleetConfig& c) {
  lease::SchedulerOptions o;
  o.aging_ms = static_cast<int64_t>(c.leases.aging_s * 1000);
  o.max_queue = static_cast<size_t>(c.limits.max_queue);
  o.max_count = static_cast<int>(c.limits.max_count);
  o.max_swaps_per_hour = static_cast<int>(c.leases.max_swaps_per_hour);
  return o;
}

} // namespace

struct LeaseService::Impl {
  struct Waiter {
    uint64_t id;
    AcquireDone done;
    TimerQueue::Id timer;
  };

  Impl(asio::io_context& io_context, const config::FleetConfig& config, const Clock& clock, store::Database* shared)
      : io(io_context),
        clock(clock),
        start_steady(clock.steadyNow()),
        start_wall_ms(clock.wallMs()),
        config(config),
        scheduler(schedulerOptions(config), randomId),
        owned(shared ? nullptr : openDatabase(config)),
        store(shared ? *shared : *owned),
        timers(io_context, clock) {
    store.add(tables);
  }

  void restore();
  void forgetOldLeases();
  void operation(const std::function<lease::OpResult(Changes&)>& op, const OpDone& done);
  void persist(Changes changes, std::function<void()> then);
  void delivered(const Changes& changes);
  void armExpiry();
  void scheduleRecovery(const std::string& board);
  void answerWaiters(uint64_t ticket, const AcquireOutcome& outcome);
  void waitTimedOut(uint64_t ticket, uint64_t waiter_id);
  void waiterGone(uint64_t ticket, uint64_t waiter_id);
  void countGrant(const lease::Lease& lease);
  void countEnded(const Changes& changes);
  store::Batch batchOf(std::shared_ptr<const Changes> changes) const;

  // The scheduler's time: the wall clock at start plus steady time since.
  int64_t now() const {
    return start_wall_ms +
           std::chrono::duration_cast<std::chrono::milliseconds>(clock.steadyNow() - start_steady).count();
  }
  // The steady time at which now() reaches `ms`.
  Clock::SteadyTime steadyAt(int64_t ms) const { return start_steady + std::chrono::milliseconds(ms - start_wall_ms); }
  // Runs `fn` from the tick() at or after `when`; never after stop().
  TimerQueue::Id at(Clock::SteadyTime when, std::function<void()> fn) {
    return stopped ? 0 : timers.at(when, std::move(fn));
  }
  void cancelTimer(TimerQueue::Id& id) { timers.cancel(id); }

  asio::io_context& io;
  const Clock& clock;
  Clock::SteadyTime start_steady;
  int64_t start_wall_ms;
  config::FleetConfig config;
  lease::Scheduler scheduler;
  store::LeaseTables tables; // before the database: it outlives the database's threads
  std::unique_ptr<store::Database> owned; // unless the daemon shares its database
  store::Database& store;
  LoopTimers timers;
  TimerQueue::Id expiry_timer = 0;
  int64_t armed_for = INT64_MAX; // the expiry expiry_timer fires for
  std::unordered_map<std::string, TimerQueue::Id> recovery_timers;
  std::unordered_map<uint64_t, std::vector<Waiter>> waiting;
  std::set<uint64_t> abandoned; // tickets whose clients left after the grant decision
  uint64_t next_waiter = 1;
  std::function<void(const lease::Event&)> on_infra; // onInfrastructureFailureRecorded
  LeaseMetrics metrics;
  std::function<void(const lease::Lease&)> on_ended;
  std::function<void(const std::string&)> recovery_handler;
  bool stopped = false;
  std::vector<store::Database::Pending> group; // changes waiting for this turn's commit
  bool flush_posted = false;
  static constexpr int kFlushPasses = 4; // extra loop passes a commit may wait for, under load
  int flush_passes = 0;
  size_t flush_seen = 0; // the group's size at the last pass
  void flush();
};

// The batch reads the leases and events in `changes` in place; the boards
// entering or leaving an operator state are copied (they are rare).
store::Batch LeaseService::Impl::batchOf(std::shared_ptr<const Changes> changes) const {
  store::Batch batch;
  for (const auto& name : changes->sticky)
    if (const lease::Board* b = scheduler.board(name)) batch.boards.push_back(*b);
  batch.changes = std::move(changes);
  return batch;
}

void LeaseService::Impl::restore() {
  int64_t t = now();
  int64_t history_ms = static_cast<int64_t>(config.leases.history_days * 86400000.0);
  Changes changes;
  scheduler.configure(specsOf(config), initialState, t, changes);
  for (const auto& b : tables.loadBoards(store))
    scheduler.restoreBoard(b.name, b.state, b.since_ms, b.reason);
  size_t active = 0;
  for (const auto& l : tables.loadLeases(store, t - std::min(history_ms, kMemoryHistoryMs))) {
    scheduler.restoreLease(l);
    if (l.state == lease::LeaseState::active) ++active;
  }
  scheduler.sortEnded();
  // Active leases on boards that left the config while we were down
  // (collected first: revoking may change the lease map).
  std::vector<std::pair<std::string, std::string>> orphans; // lease id, missing board
  for (const auto& [id, l] : scheduler.leases()) {
    if (l.state != lease::LeaseState::active) continue;
    for (const auto& b : l.boards)
      if (!scheduler.board(b.name)) {
        orphans.emplace_back(id, b.name);
        break;
      }
  }
  for (const auto& [id, board] : orphans)
    scheduler.revoke(id, "board " + board + " was removed from the configuration", t, changes);
  size_t before = changes.ended.size();
  scheduler.expireDue(t, changes);
  store.commitNow(tables.write(batchOf(std::make_shared<const Changes>(changes))));
  countEnded(changes); // expiries and revocations at start-up are in /metrics too
  tables.prune(store, t - history_ms);
  spdlog::info("lease state restored from {}: {} active lease(s), {} expired while hwfarmd was down", store.path(),
               active - (changes.ended.size() - before), changes.ended.size() - before);
  for (const auto& b : scheduler.boards())
    if (b.state == BoardState::recovering) scheduleRecovery(b.spec.name);
}

void LeaseService::Impl::forgetOldLeases() {
  at(clock.steadyNow() + kForgetInterval, [this] {
    scheduler.forgetEndedBefore(
        now() - std::min(kMemoryHistoryMs, static_cast<int64_t>(config.leases.history_days * 86400000.0)));
    forgetOldLeases();
  });
}

void LeaseService::Impl::countGrant(const lease::Lease& l) {
  ++metrics.grants;
  double s = static_cast<double>(l.waited_ms) / 1000.0;
  ++metrics.wait_count;
  metrics.wait_sum_s += s;
  for (size_t i = 0; i < LeaseMetrics::kBuckets.size(); ++i)
    if (s <= LeaseMetrics::kBuckets[i]) ++metrics.wait_buckets[i];
}

// Makes `changes` durable, then runs `then` and answers everyone the changes
// concern (waiting requests granted or dropped).
void LeaseService::Impl::countEnded(const Changes& changes) {
  for (const auto& l : changes.ended) {
    if (l.state == lease::LeaseState::released) ++metrics.releases;
    else if (l.state == lease::LeaseState::expired) ++metrics.expiries;
    else if (l.state == lease::LeaseState::revoked) ++metrics.revocations;
  }
}

void LeaseService::Impl::persist(Changes changes, std::function<void()> then) {
  for (const auto& l : changes.granted) countGrant(l);
  countEnded(changes);
  for (const auto& name : changes.boards)
    if (const lease::Board* b = scheduler.board(name); b && b->state == BoardState::recovering) scheduleRecovery(name);
  armExpiry();
  if (!changes.durable() && changes.events.empty() && group.empty() && store.idle()) {
    // Nothing to write and nothing earlier still on its way to the disk.
    if (then) then();
    delivered(changes);
    return;
  }
  // Otherwise even an answer with nothing to write goes through the group
  // (as an empty batch), so it never overtakes an earlier commit it may
  // depend on (a retry answered with a grant still being written).
  auto shared = std::make_shared<Changes>(std::move(changes));
  group.push_back(tables.pending(batchOf(shared), [this, shared, then = std::move(then)](const Status& status) {
    if (!status.ok()) {
      // Memory and disk disagree now; the durable state is the truth. Exit
      // without answering anyone, and let systemd restart us from it.
      spdlog::critical("cannot commit to {}: {}; exiting so that nothing unsaved is acknowledged", store.path(),
                       status.message());
      std::_Exit(70);
    }
    if (then) then();
    delivered(*shared);
  }));
  // Everything changed while handling the ready events of this loop turn
  // goes to the store as one group.
  if (!flush_posted) {
    flush_posted = true;
    asio::post(io, [this] { flush(); });
  }
}

// Commits the group, but first lets the loop take another pass over its
// ready work (polling its sockets without waiting) for as long as each pass
// brought more changes, at most kFlushPasses times: requests that arrived
// meanwhile join this commit instead of paying for their own, and a commit
// costs about as much as the requests in it (SQLite's commit, WAL frames,
// system calls). Alone, a request waits for one empty pass (one
// non-blocking epoll_wait).
void LeaseService::Impl::flush() {
  if (group.size() != flush_seen && flush_passes < kFlushPasses) {
    ++flush_passes;
    flush_seen = group.size();
    asio::post(io, [this] { flush(); });
    return;
  }
  flush_posted = false;
  flush_passes = 0;
  flush_seen = 0;
  store.commit(std::exchange(group, {}));
}

void LeaseService::Impl::delivered(const Changes& changes) {
  if (on_ended)
    for (const auto& l : changes.ended) on_ended(l);
  if (on_infra)
    for (const auto& e : changes.events)
      if (e.kind == "infra_failure") on_infra(e);
  for (const auto& l : changes.granted) {
    if (abandoned.erase(l.ticket)) {
      spdlog::info("lease {} granted to a client that left while waiting: releasing it", l.id);
      Changes more;
      scheduler.release(l.id, now(), more);
      persist(std::move(more), nullptr);
      continue;
    }
    // A request granted on arrival is answered by its own completion.
    if (!waiting.count(l.ticket)) continue;
    AcquireOutcome outcome;
    // The lease as it is now (the snapshot if it was already forgotten).
    const lease::Lease* current = scheduler.lease(l.id);
    outcome.lease = current ? *current : l;
    answerWaiters(l.ticket, outcome);
  }
  for (const auto& d : changes.dropped) {
    AcquireOutcome outcome;
    outcome.status = Status::error(Code::invalid_argument, d.detail);
    answerWaiters(d.ticket, outcome);
  }
}

void LeaseService::Impl::answerWaiters(uint64_t ticket, const AcquireOutcome& outcome) {
  auto it = waiting.find(ticket);
  if (it == waiting.end()) return;
  std::vector<Waiter> waiters = std::move(it->second);
  waiting.erase(it);
  for (auto& w : waiters) {
    cancelTimer(w.timer);
    w.done(outcome);
  }
}

void LeaseService::Impl::armExpiry() {
  int64_t next = scheduler.nextExpiry();
  if (next == armed_for) return;
  armed_for = next;
  cancelTimer(expiry_timer);
  if (next == INT64_MAX) return;
  expiry_timer = at(steadyAt(next), [this] {
    expiry_timer = 0;
    armed_for = INT64_MAX;
    Changes changes;
    scheduler.expireDue(now(), changes);
    for (const auto& l : changes.ended)
      spdlog::info("lease {} of {} expired (boards: {})", l.id, l.holder.principal, l.boards.size());
    persist(std::move(changes), nullptr);
  });
}

// Until health checks exist, recovery is a configurable wait (leases.recovery_s).
void LeaseService::Impl::scheduleRecovery(const std::string& board) {
  if (recovery_timers.count(board)) return;
  auto delay = std::chrono::milliseconds(static_cast<int64_t>(config.leases.recovery_s * 1000));
  recovery_timers[board] = at(clock.steadyNow() + delay, [this, board] {
    recovery_timers.erase(board);
    const lease::Board* b = scheduler.board(board);
    if (!b || b->state != BoardState::recovering) return;
    if (recovery_handler) return recovery_handler(board); // a health check decides
    Changes changes;
    scheduler.recovered(board, now(), changes);
    persist(std::move(changes), nullptr);
  });
}

void LeaseService::Impl::waitTimedOut(uint64_t ticket, uint64_t waiter_id) {
  auto it = waiting.find(ticket);
  if (it == waiting.end()) return;
  // Granted but not yet committed: the grant is on its way to this waiter.
  if (scheduler.position(ticket, now()) == 0) return;
  auto& list = it->second;
  for (size_t i = 0; i < list.size(); ++i) {
    if (list[i].id != waiter_id) continue;
    Waiter w = std::move(list[i]);
    list.erase(list.begin() + static_cast<std::ptrdiff_t>(i));
    AcquireOutcome outcome;
    outcome.status = Status::error(Code::timeout, "no matching board was free within the wait");
    outcome.position = scheduler.position(ticket, now());
    ++metrics.wait_timeouts;
    if (list.empty()) {
      waiting.erase(it);
      Changes changes;
      scheduler.cancel(ticket, now(), changes);
      persist(std::move(changes), nullptr);
    }
    w.done(outcome);
    return;
  }
}

void LeaseService::Impl::waiterGone(uint64_t ticket, uint64_t waiter_id) {
  auto it = waiting.find(ticket);
  if (it == waiting.end()) return;
  auto& list = it->second;
  for (size_t i = 0; i < list.size(); ++i) {
    if (list[i].id != waiter_id) continue;
    cancelTimer(list[i].timer);
    list.erase(list.begin() + static_cast<std::ptrdiff_t>(i));
    break;
  }
  if (!list.empty()) return;
  waiting.erase(it);
  Changes changes;
  // Not queued any more: granted, commit in flight. Give the boards back
  // once the grant is durable (see delivered()).
  if (!scheduler.cancel(ticket, now(), changes)) abandoned.insert(ticket);
  persist(std::move(changes), nullptr);
}

std::unique_ptr<store::Database> openDatabase(const config::FleetConfig& config) {
  return std::make_unique<store::Database>(config.agent.state_dir + "/hwfarm.db",
                                           store::DatabaseOptions{config.leases.fsync});
}

void startDatabase(store::Database& db, asio::io_context& io) {
  db.start([&io](std::function<void()> fn) { asio::post(io, std::move(fn)); });
}

LeaseService::LeaseService(asio::io_context& io, const config::FleetConfig& config, const Clock& clock)
    : impl_(std::make_unique<Impl>(io, config, clock, nullptr)) {
  impl_->restore();
  startDatabase(impl_->store, io);
  impl_->armExpiry();
  impl_->forgetOldLeases();
}

LeaseService::LeaseService(asio::io_context& io, const config::FleetConfig& config, const Clock& clock,
                           store::Database& db)
    : impl_(std::make_unique<Impl>(io, config, clock, &db)) {
  impl_->restore();
  impl_->armExpiry();
  impl_->forgetOldLeases();
}

LeaseService::~LeaseService() = default;

void LeaseService::reconfigure(const config::FleetConfig& config) {
  impl_->config = config;
  impl_->scheduler.setOptions(schedulerOptions(config));
  Changes changes;
  impl_->scheduler.configure(specsOf(config), initialState, impl_->now(), changes);
  for (const auto& l : changes.ended) spdlog::warn("lease {} {}", l.id, l.end_reason);
  impl_->persist(std::move(changes), nullptr);
}

void LeaseService::stop() {
  impl_->stopped = true;
  AcquireOutcome outcome;
  outcome.status = Status::error(Code::unavailable, "hwfarmd is stopping; retry with the same idempotency_key");
  std::vector<uint64_t> tickets;
  for (const auto& [ticket, list] : impl_->waiting) tickets.push_back(ticket);
  for (uint64_t t : tickets) impl_->answerWaiters(t, outcome);
  impl_->timers.clear();
  impl_->expiry_timer = 0;
  impl_->recovery_timers.clear();
}

void LeaseService::tick() {
  if (!impl_->stopped) impl_->timers.tick();
}

void LeaseService::acquire(lease::LeaseRequest request, int64_t wait_ms, AcquireDone done,
                           const std::function<void(std::function<void()>)>& on_cancel) {
  Impl& d = *impl_;
  if (d.stopped) {
    done({Status::error(Code::unavailable, "hwfarmd is stopping"), false, {}, 0});
    return;
  }
  Changes changes;
  lease::SubmitResult r = d.scheduler.submit(std::move(request), d.now(), changes);
  if (!r.status.ok()) {
    done({std::move(r.status), false, {}, 0});
    return;
  }
  if (r.kind == lease::Submitted::granted || r.kind == lease::Submitted::existing) {
    AcquireOutcome outcome{Status(), r.kind == lease::Submitted::existing, std::move(r.lease), 0};
    d.persist(std::move(changes), [done = std::move(done), outcome = std::move(outcome)] { done(outcome); });
    return;
  }
  // Queued, or joined the wait of the request it retries.
  uint64_t ticket = r.ticket;
  uint64_t id = d.next_waiter++;
  TimerQueue::Id timer =
      d.at(d.clock.steadyNow() + std::chrono::milliseconds(wait_ms), [&d, ticket, id] { d.waitTimedOut(ticket, id); });
  d.waiting[ticket].push_back({id, std::move(done), timer});
  if (on_cancel) on_cancel([&d, ticket, id] { d.waiterGone(ticket, id); });
  // The submit may have granted other requests (never: it only queues), but
  // it may have changed nothing durable either; keep the path uniform.
  d.persist(std::move(changes), nullptr);
}

// One scheduler operation: refused ones answer at once, the others once
// their changes are durable.
void LeaseService::Impl::operation(const std::function<lease::OpResult(Changes&)>& op, const OpDone& done) {
  Changes changes;
  lease::OpResult r = op(changes);
  if (!r.status.ok()) return done(r);
  persist(std::move(changes), [done, r = std::move(r)] { done(r); });
}

void LeaseService::renew(const std::string& id, int64_t ttl_ms, OpDone done) {
  impl_->operation([&](Changes& c) { return impl_->scheduler.renew(id, ttl_ms, impl_->now(), c); }, done);
}

void LeaseService::release(const std::string& id, OpDone done) {
  impl_->operation([&](Changes& c) { return impl_->scheduler.release(id, impl_->now(), c); }, done);
}

void LeaseService::revoke(const std::string& id, const std::string& reason, OpDone done) {
  impl_->operation([&](Changes& c) { return impl_->scheduler.revoke(id, reason, impl_->now(), c); }, done);
}

void LeaseService::maintenance(const std::string& board, const std::string& reason, OpDone done) {
  impl_->operation([&](Changes& c) { return impl_->scheduler.enterMaintenance(board, reason, impl_->now(), c); },
                   done);
}

void LeaseService::recordInfrastructureFailure(const std::string& lease_id, const std::string& board,
                                               const std::string& detail) {
  recordEvent("infra_failure", lease_id, board, detail);
}

void LeaseService::recordEvent(const std::string& kind, const std::string& lease_id, const std::string& board,
                               const std::string& detail) {
  Changes changes;
  changes.events.push_back({impl_->now(), kind, lease_id, board, detail});
  impl_->persist(std::move(changes), nullptr);
}

void LeaseService::presence(const std::string& board, bool present) {
  Changes changes;
  if (present) {
    impl_->scheduler.appeared(board, impl_->now(), changes);
    spdlog::info("board {} is present", board);
  } else {
    const lease::Board* b = impl_->scheduler.board(board);
    if (!b || (b->state == BoardState::offline && !b->present)) return; // nothing new
    if (b->state == BoardState::leased)
      spdlog::warn("board {} vanished while leased by lease {}: infrastructure failure", board, b->lease_id);
    else
      spdlog::info("board {} is gone", board);
    impl_->scheduler.vanished(board, impl_->now(), changes);
  }
  impl_->persist(std::move(changes), nullptr);
}

void LeaseService::resume(const std::string& board, OpDone done) {
  impl_->operation([&](Changes& c) { return impl_->scheduler.resume(board, impl_->now(), c); }, done);
}

void LeaseService::setRecoveryHandler(std::function<void(const std::string& board)> handler) {
  impl_->recovery_handler = std::move(handler);
}

void LeaseService::beginCheck(const std::string& board, OpDone done) {
  impl_->operation([&](Changes& c) { return impl_->scheduler.beginCheck(board, impl_->now(), c); }, done);
}

void LeaseService::checked(const std::string& board, lease::BoardState to, const std::string& reason, OpDone done) {
  impl_->operation([&](Changes& c) { return impl_->scheduler.checked(board, to, reason, impl_->now(), c); }, done);
}

void LeaseService::swap(const std::string& id, const std::string& board, const std::string& reason, OpDone done) {
  impl_->operation([&](Changes& c) { return impl_->scheduler.swap(id, board, reason, impl_->now(), c); }, done);
}

void LeaseService::whenCommitted(std::function<void()> fn) { impl_->persist(Changes{}, std::move(fn)); }

void LeaseService::onLeaseEnded(std::function<void(const lease::Lease&)> hook) { impl_->on_ended = std::move(hook); }
void LeaseService::onInfrastructureFailureRecorded(std::function<void(const lease::Event&)> hook) {
  impl_->on_infra = std::move(hook);
}

const lease::Scheduler& LeaseService::scheduler() const { return impl_->scheduler; }
const LeaseMetrics& LeaseService::metrics() const { return impl_->metrics; }
int64_t LeaseService::nowMs() const { return impl_->now(); }

} // namespace hwfarm
