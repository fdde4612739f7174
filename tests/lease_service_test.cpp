// The lease service in process on a ManualClock: the real scheduler and a
// real store (in a temp state dir) on an event loop this test runs. Time moves
// only when a test advances the clock and calls tick(), so expiry, waits,
// recovery and aging are checked to the millisecond without sleeping.
#include <catch2/catch.hpp>

#include <boost/asio/io_context.hpp>
#include <deque>
#include <filesystem>
#include <optional>

#include "config/loader.h"
#include "daemon/core/clock.h"
#include "daemon/services/lease_service.h"
#include "tests/support/daemon_harness.h"

using namespace hwfarm;
using namespace std::chrono_literals;
using lease::BoardState;
using lease::LeaseState;

namespace {

constexpr int64_t kStartWallMs = 1'800'000'000'000; // 2027-01-15

// One lease service with `boards` simulated boards (available from the
// start) and `extra` config text.
struct Service {
  test::TempDir dir;
  ManualClock clock{kStartWallMs};
  boost::asio::io_context io;
  config::FleetConfig config;
  std::unique_ptr<LeaseService> leases;
  std::vector<std::string> ended; // lease ids, in the order their end was committed

  explicit Service(int boards, const std::string& extra = "") {
    auto parsed = config::parseFleetConfig(test::qemuFleet(dir.file("state"), boards, extra), "fleet.toml");
    REQUIRE(parsed.ok());
    config = *parsed.config;
    std::filesystem::create_directories(config.agent.state_dir);
    leases = std::make_unique<LeaseService>(io, config, clock);
    leases->onLeaseEnded([this](const lease::Lease& l) { ended.push_back(l.id); });
  }
  ~Service() {
    leases->stop();
    settle();
  }

  // Runs the loop until `done()` holds; false if it still does not after 10 s
  // of real time (the store's threads answer in milliseconds).
  template <typename Pred>
  bool runUntil(Pred done) {
    auto deadline = std::chrono::steady_clock::now() + 10s;
    while (!done() && std::chrono::steady_clock::now() < deadline) {
      if (io.stopped()) io.restart();
      io.run_one_for(10ms);
    }
    return done();
  }
  // Runs the loop until every change made so far is committed and answered.
  void settle() {
    bool committed = false;
    leases->whenCommitted([&] { committed = true; });
    REQUIRE(runUntil([&] { return committed; }));
  }
  // Moves time forward, fires what is due and lets its commits complete.
  void advance(std::chrono::milliseconds d) {
    clock.advance(d);
    leases->tick();
    settle();
  }

  lease::LeaseRequest request(int count, int64_t ttl_ms, int priority = 0, const std::string& job = "job") {
    lease::LeaseRequest r;
    r.selector.type = "mps2-an385";
    r.count = count;
    r.ttl_ms = ttl_ms;
    r.priority = priority;
    r.holder = {"pipeline", job, "1", "hw", ""};
    return r;
  }
  // Starts an acquire; its answer lands in the returned slot.
  std::shared_ptr<std::optional<AcquireOutcome>> acquire(lease::LeaseRequest r, int64_t wait_ms) {
    auto answer = std::make_shared<std::optional<AcquireOutcome>>();
    leases->acquire(std::move(r), wait_ms, [answer](const AcquireOutcome& o) { *answer = o; }, nullptr);
    return answer;
  }
  // An acquire that is granted at once.
  lease::Lease grant(int count, int64_t ttl_ms, int priority = 0) {
    auto answer = acquire(request(count, ttl_ms, priority), 0);
    REQUIRE(runUntil([&] { return answer->has_value(); }));
    REQUIRE((*answer)->status.ok());
    return (*answer)->lease;
  }
  // Stops the service and starts a new one on the same state dir, with the
  // wall clock at `wall_ms` (a restart: steady time starts afresh).
  void restart(int64_t wall_ms) {
    leases->stop();
    settle();
    leases.reset();
    clock = ManualClock(wall_ms);
    leases = std::make_unique<LeaseService>(io, config, clock);
  }
  const lease::Lease& lease(const std::string& id) const {
    const lease::Lease* l = leases->scheduler().lease(id);
    REQUIRE(l);
    return *l;
  }
  BoardState board(const std::string& name) const { return leases->scheduler().board(name)->state; }
  lease::OpResult renew(const std::string& id, int64_t ttl_ms) {
    std::optional<lease::OpResult> result;
    leases->renew(id, ttl_ms, [&](const lease::OpResult& r) { result = r; });
    REQUIRE(runUntil([&] { return result.has_value(); }));
    return *result;
  }
  void release(const std::string& id) {
    std::optional<lease::OpResult> result;
    leases->release(id, [&](const lease::OpResult& r) { result = r; });
    REQUIRE(runUntil([&] { return result.has_value(); }));
    REQUIRE(result->status.ok());
  }
};

} // namespace

TEST_CASE("a lease expires exactly at its TTL and not a millisecond before") {
  Service s(1, "[leases]\nrecovery_s = 600\n");
  // Given a lease with a 30 s TTL,
  lease::Lease l = s.grant(1, 30000);
  REQUIRE(l.granted_ms == kStartWallMs);
  REQUIRE(l.expires_ms == kStartWallMs + 30000);
  // it is active 1 ms before its expiry,
  s.advance(29999ms);
  REQUIRE(s.lease(l.id).state == LeaseState::active);
  REQUIRE(s.board("sim-0") == BoardState::leased);
  REQUIRE(s.ended.empty());
  // and expired at it: its board recovers, the end is committed and counted.
  s.advance(1ms);
  REQUIRE(s.lease(l.id).state == LeaseState::expired);
  REQUIRE(s.lease(l.id).ended_ms == kStartWallMs + 30000);
  REQUIRE(s.lease(l.id).end_reason == "expired: not renewed within its TTL");
  REQUIRE(s.board("sim-0") == BoardState::recovering);
  REQUIRE(s.ended == std::vector<std::string>{l.id});
  REQUIRE(s.leases->metrics().expiries == 1);
}

TEST_CASE("a renewal moves the expiry to its TTL from the renewal") {
  Service s(1);
  lease::Lease l = s.grant(1, 10000);
  s.advance(8000ms);
  // Given a renewal for 10 s at 8 s,
  lease::OpResult r = s.renew(l.id, 10000);
  REQUIRE(r.status.ok());
  REQUIRE(r.lease.expires_ms == kStartWallMs + 18000);
  // the old expiry passes without effect,
  s.advance(2000ms);
  REQUIRE(s.lease(l.id).state == LeaseState::active);
  s.advance(7999ms);
  REQUIRE(s.lease(l.id).state == LeaseState::active);
  // and the lease ends 10 s after the renewal.
  s.advance(1ms);
  REQUIRE(s.lease(l.id).state == LeaseState::expired);
  REQUIRE(s.lease(l.id).ended_ms == kStartWallMs + 18000);
  // An ended lease does not renew: a conflict naming its end.
  lease::OpResult late = s.renew(l.id, 10000);
  REQUIRE(late.status.is(Code::conflict));
  REQUIRE(late.status.message() == "lease " + l.id + " is expired (expired: not renewed within its TTL)");
}

TEST_CASE("a waiting request times out at wait_ms with its queue position") {
  Service s(1);
  s.grant(1, 600000);
  // Given two requests waiting for the one board, 5 s and 2 s,
  auto first = s.acquire(s.request(1, 60000), 5000);
  auto second = s.acquire(s.request(1, 60000), 2000);
  s.settle();
  REQUIRE(s.leases->scheduler().queueLength() == 2);
  // the second times out at 2 s, second in the queue,
  s.advance(1999ms);
  REQUIRE_FALSE(second->has_value());
  s.advance(1ms);
  REQUIRE(second->has_value());
  REQUIRE((*second)->status.is(Code::timeout));
  REQUIRE((*second)->position == 2);
  REQUIRE(s.leases->scheduler().queueLength() == 1);
  // and the first at 5 s, first in the queue; nothing is left waiting.
  s.advance(2999ms);
  REQUIRE_FALSE(first->has_value());
  s.advance(1ms);
  REQUIRE(first->has_value());
  REQUIRE((*first)->status.is(Code::timeout));
  REQUIRE((*first)->position == 1);
  REQUIRE(s.leases->scheduler().queueLength() == 0);
  REQUIRE(s.leases->metrics().wait_timeouts == 2);
}

TEST_CASE("a recovering board becomes available after leases.recovery_s and goes to a waiting request") {
  Service s(1, "[leases]\nrecovery_s = 5\n");
  lease::Lease l = s.grant(1, 1000);
  s.advance(1000ms);
  REQUIRE(s.board("sim-0") == BoardState::recovering);
  // Given a request waiting for the recovering board,
  auto waiting = s.acquire(s.request(1, 60000), 60000);
  s.settle();
  REQUIRE(s.leases->scheduler().queueLength() == 1);
  // the board is still recovering 1 ms before the recovery time,
  s.advance(4999ms);
  REQUIRE(s.board("sim-0") == BoardState::recovering);
  REQUIRE_FALSE(waiting->has_value());
  // and once it is over, the board is granted to the waiting request.
  s.advance(1ms);
  REQUIRE(waiting->has_value());
  REQUIRE((*waiting)->status.ok());
  REQUIRE_FALSE((*waiting)->existing);
  REQUIRE((*waiting)->lease.waited_ms == 5000);
  REQUIRE((*waiting)->lease.boards.at(0).name == "sim-0");
  REQUIRE(s.board("sim-0") == BoardState::leased);
  REQUIRE(l.id != (*waiting)->lease.id);
}

TEST_CASE("aging lets a large request past a stream of small ones") {
  // aging_s = 10: +1 effective priority per 10 s waited.
  Service s(2, "[leases]\naging_s = 10\n");
  std::deque<std::string> small{s.grant(1, 600000, 1).id, s.grant(1, 600000, 1).id};
  // Given a request for both boards at priority 0 waiting behind a stream of
  // priority-1 requests for one board, one arriving as each board frees up
  // every 3 s,
  auto large = s.acquire(s.request(2, 600000, 0, "large"), 600000);
  s.settle();
  std::vector<std::shared_ptr<std::optional<AcquireOutcome>>> stream;
  for (int step = 1; step <= 5; ++step) {
    s.advance(3000ms);
    stream.push_back(s.acquire(s.request(1, 600000, 1), 600000));
    s.release(small.front());
    small.pop_front();
    s.settle();
    INFO("at " << step * 3 << " s");
    if (step <= 3) {
      // the small ones pass while the large one has waited less than aging_s,
      REQUIRE(stream.back()->has_value());
      REQUIRE((*stream.back())->status.ok());
      small.push_back((*stream.back())->lease.id);
      REQUIRE_FALSE(large->has_value());
    } else if (step == 4) {
      // then the large one is first: the freed board is held back for it,
      REQUIRE_FALSE(stream.back()->has_value());
      REQUIRE_FALSE(large->has_value());
      size_t available = 0;
      for (const auto& b : s.leases->scheduler().boards()) available += b.state == BoardState::available;
      REQUIRE(available == 1);
    }
  }
  // and it gets both boards as the next one frees up, at 15 s.
  REQUIRE(large->has_value());
  REQUIRE((*large)->status.ok());
  REQUIRE((*large)->lease.boards.size() == 2);
  REQUIRE((*large)->lease.waited_ms == 15000);
  REQUIRE_FALSE(stream[3]->has_value());
  REQUIRE_FALSE(stream[4]->has_value());
  REQUIRE(s.leases->scheduler().queueLength() == 2);
}

// The right behaviour: deadlines run on steady time. A step of the wall clock
// (NTP, an operator's `date -s`) makes no lease expire early or late and no
// wait end early or late; the service's times keep counting from its start
// (they differ from the stepped wall clock until the next start).
TEST_CASE("a wall-clock step moves no deadline and no time the service reports") {
  Service s(1);
  lease::Lease l = s.grant(1, 10000);
  auto waiting = s.acquire(s.request(1, 60000), 4000);
  s.settle();
  s.advance(1000ms);
  // Given the wall clock set an hour forward,
  s.clock.setWallMs(s.clock.wallMs() + 3600 * 1000);
  s.leases->tick();
  s.settle();
  // nothing is expired or timed out by it, and the service's time has not jumped;
  REQUIRE(s.lease(l.id).state == LeaseState::active);
  REQUIRE_FALSE(waiting->has_value());
  REQUIRE(s.leases->nowMs() == kStartWallMs + 1000);
  // set two hours back, neither is prolonged:
  s.clock.setWallMs(s.clock.wallMs() - 2 * 3600 * 1000);
  s.advance(2999ms);
  REQUIRE_FALSE(waiting->has_value());
  s.advance(1ms);
  REQUIRE(waiting->has_value());
  REQUIRE((*waiting)->status.is(Code::timeout));
  s.advance(5999ms);
  REQUIRE(s.lease(l.id).state == LeaseState::active);
  s.advance(1ms);
  REQUIRE(s.lease(l.id).state == LeaseState::expired);
  REQUIRE(s.lease(l.id).ended_ms == kStartWallMs + 10000);
  REQUIRE(s.leases->nowMs() == kStartWallMs + 10000);
}

TEST_CASE("a restart restores leases against the wall clock: a lease that ran out meanwhile is expired") {
  Service s(2);
  lease::Lease lapses = s.grant(1, 10000);
  lease::Lease keeps = s.grant(1, 60000);
  // Given a restart 30 s later by the wall clock,
  s.restart(kStartWallMs + 30000);
  // the lease that ran out while the service was down is expired as of the
  // start, and the other keeps its expiry.
  REQUIRE(s.lease(lapses.id).state == LeaseState::expired);
  REQUIRE(s.lease(lapses.id).ended_ms == kStartWallMs + 30000);
  REQUIRE(s.lease(keeps.id).state == LeaseState::active);
  REQUIRE(s.lease(keeps.id).expires_ms == kStartWallMs + 60000);
  REQUIRE(s.leases->metrics().expiries == 1);
  // It still expires at that time, by the new start's clock.
  s.advance(29999ms);
  REQUIRE(s.lease(keeps.id).state == LeaseState::active);
  s.advance(1ms);
  REQUIRE(s.lease(keeps.id).state == LeaseState::expired);
}

TEST_CASE("stopping answers waiting requests as unavailable and fires no more deadlines") {
  Service s(1, "[leases]\nrecovery_s = 0\n");
  lease::Lease l = s.grant(1, 5000);
  auto waiting = s.acquire(s.request(1, 60000), 60000);
  s.settle();
  s.leases->stop();
  REQUIRE(waiting->has_value());
  REQUIRE((*waiting)->status.is(Code::unavailable));
  REQUIRE((*waiting)->status.message() == "hwfarmd is stopping; retry with the same idempotency_key");
  s.advance(10000ms);
  REQUIRE(s.lease(l.id).state == LeaseState::active);
  auto late = s.acquire(s.request(1, 60000), 0);
  REQUIRE(late->has_value());
  REQUIRE((*late)->status.is(Code::unavailable));
}

TEST_CASE("refused requests carry the reason as their status") {
  Service s(2, "[limits]\nmax_queue = 1\n");
  auto three = s.acquire(s.request(3, 60000), 0);
  REQUIRE(three->has_value());
  REQUIRE((*three)->status.is(Code::invalid_argument));
  REQUIRE((*three)->status.message() == "selector type=mps2-an385 matches 2 configured board(s), 3 requested");
  s.grant(2, 60000);
  auto queued = s.acquire(s.request(1, 60000), 60000);
  auto full = s.acquire(s.request(1, 60000), 60000);
  REQUIRE_FALSE(queued->has_value());
  REQUIRE(full->has_value());
  REQUIRE((*full)->status.is(Code::busy));
  REQUIRE((*full)->status.message() == "1 requests are waiting (limits.max_queue)");
}
