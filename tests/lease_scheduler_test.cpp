// The lease scheduler as pure logic: time is an argument, so ordering,
// aging, expiry and starvation are tested in microseconds.
#include <catch2/catch.hpp>

#include <random>

#include "daemon/core/lease/scheduler.h"

using namespace hwfarm::lease;

namespace {

BoardSpec spec(const std::string& name, const std::string& type, const std::string& worker = "w0",
               std::vector<std::string> labels = {}) {
  return BoardSpec{name, type, worker, worker + "-node", std::move(labels), "qemu", "", ""};
}

struct Fixture {
  int next_id = 0;
  Scheduler s{SchedulerOptions{60000, 100, 64}, [this] { return "L" + std::to_string(++next_id); }};
  Changes changes;

  explicit Fixture(const std::vector<BoardSpec>& specs) {
    s.configure(specs, [](const BoardSpec&) { return BoardState::available; }, 0, changes);
  }
  SubmitResult submit(const std::string& type, int count, int64_t now, int priority = 0,
                      const std::string& key = "", const std::string& principal = "p") {
    LeaseRequest r;
    r.selector.type = type;
    r.count = count;
    r.ttl_ms = 10000;
    r.priority = priority;
    r.idempotency_key = key;
    r.holder.principal = principal;
    return s.submit(r, now, changes);
  }
  std::vector<std::string> boardsOf(const Lease& l) {
    std::vector<std::string> out;
    for (const auto& b : l.boards) out.push_back(b.name);
    return out;
  }
};

} // namespace

TEST_CASE("grants go to the least recently used board and not always the first") {
  Fixture f({spec("a", "t"), spec("b", "t"), spec("c", "t")});
  std::vector<std::string> seen;
  for (int i = 0; i < 3; ++i) {
    auto r = f.submit("t", 1, 100 + i);
    REQUIRE(r.kind == Submitted::granted);
    seen.push_back(r.lease.boards[0].name);
    REQUIRE(f.s.release(r.lease.id, 100 + i, f.changes).status.ok());
  }
  REQUIRE(seen == std::vector<std::string>{"a", "b", "c"});
}

TEST_CASE("multi-board requests are all-or-nothing and hold no partial boards") {
  Fixture f({spec("a", "t"), spec("b", "t")});
  auto first = f.submit("t", 1, 1);
  REQUIRE(first.kind == Submitted::granted);
  auto pair = f.submit("t", 2, 2);
  REQUIRE(pair.kind == Submitted::queued);
  // The free board is held back for the pair, not leased to it alone.
  REQUIRE(f.s.board("b")->state == BoardState::available);
  REQUIRE(f.s.activeLeaseCount() == 1);
  f.changes = {};
  f.s.release(first.lease.id, 3, f.changes);
  REQUIRE(f.changes.granted.size() == 1);
  REQUIRE(f.changes.granted[0].ticket == pair.ticket);
  REQUIRE(f.boardsOf(f.changes.granted[0]).size() == 2);
}

TEST_CASE("within a priority first come first served") {
  Fixture f({spec("a", "t")});
  auto holder = f.submit("t", 1, 0);
  auto w1 = f.submit("t", 1, 1);
  auto w2 = f.submit("t", 1, 2);
  REQUIRE(w1.position == 1);
  REQUIRE(w2.position == 2);
  f.changes = {};
  f.s.release(holder.lease.id, 3, f.changes);
  REQUIRE(f.changes.granted.at(0).ticket == w1.ticket);
}

TEST_CASE("higher priority goes first and waiting ages a request past newer ones") {
  Fixture f({spec("a", "t")});
  auto holder = f.submit("t", 1, 0);
  auto low = f.submit("t", 1, 0, /*priority=*/0);
  auto high = f.submit("t", 1, 1000, /*priority=*/1);
  REQUIRE(f.s.position(high.ticket, 1000) == 1);
  // A priority-1 request arriving 61 s after it is behind: the low request
  // has aged by more than one priority step in the meantime.
  auto newer = f.submit("t", 1, 61000, /*priority=*/1);
  REQUIRE(f.s.position(high.ticket, 61000) == 1);
  REQUIRE(f.s.position(low.ticket, 61000) == 2);
  REQUIRE(f.s.position(newer.ticket, 61000) == 3);
  f.changes = {};
  f.s.release(holder.lease.id, 61000, f.changes);
  REQUIRE(f.changes.granted.at(0).ticket == high.ticket);
}

TEST_CASE("a waiting request is found by its holder's idempotency key, and by no one else's") {
  Fixture f({spec("a", "t")});
  auto holder = f.submit("t", 1, 0, 0, "k0", "p");
  auto ahead = f.submit("t", 1, 1, 0, "k1", "p");
  auto mine = f.submit("t", 1, 2, 0, "k2", "p");
  REQUIRE(mine.kind == Submitted::queued);
  REQUIRE(f.s.waiting("p", "k2") == f.s.waiting(mine.ticket));
  REQUIRE(f.s.waiting("p", "k2")->ticket == mine.ticket);
  REQUIRE(f.s.position(mine.ticket, 2) == 2);
  REQUIRE(f.s.waiting("q", "k2") == nullptr); // another principal's key
  REQUIRE(f.s.waiting("p", "k0") == nullptr); // granted: not waiting
  // Once the one ahead is granted, it is first.
  f.changes = {};
  f.s.release(holder.lease.id, 3, f.changes);
  REQUIRE(f.s.waiting("p", "k1") == nullptr);
  REQUIRE(f.s.position(mine.ticket, 3) == 1);
  REQUIRE(f.s.position(ahead.ticket, 3) == 0);
}

TEST_CASE("a large request is not starved by a stream of small ones") {
  Fixture f({spec("a", "t"), spec("b", "t"), spec("c", "t")});
  auto s1 = f.submit("t", 1, 0);
  auto s2 = f.submit("t", 1, 0);
  auto big = f.submit("t", 3, 1);
  REQUIRE(big.kind == Submitted::queued);
  // Small requests keep arriving; each release would let one in if the big
  // request did not hold the freed boards back.
  auto s3 = f.submit("t", 1, 2);
  REQUIRE(s3.kind == Submitted::queued);
  f.changes = {};
  f.s.release(s1.lease.id, 3, f.changes);
  REQUIRE(f.changes.granted.empty());
  auto s4 = f.submit("t", 1, 4);
  REQUIRE(s4.kind == Submitted::queued);
  f.changes = {};
  f.s.release(s2.lease.id, 5, f.changes);
  REQUIRE(f.changes.granted.size() == 1);
  REQUIRE(f.changes.granted[0].ticket == big.ticket);
}

TEST_CASE("held-back boards are still usable by requests the big one cannot use") {
  Fixture f({spec("a", "t"), spec("b", "t"), spec("x", "other")});
  auto s1 = f.submit("t", 1, 0);
  auto big = f.submit("t", 2, 1);
  REQUIRE(big.kind == Submitted::queued);
  REQUIRE(f.submit("other", 1, 2).kind == Submitted::granted);
}

TEST_CASE("an expired lease sends its boards to recovering and never straight to available") {
  Fixture f({spec("a", "t")});
  auto r = f.submit("t", 1, 0);
  REQUIRE(f.s.nextExpiry() == 10000);
  f.changes = {};
  f.s.expireDue(9999, f.changes);
  REQUIRE(f.changes.ended.empty());
  f.s.expireDue(10000, f.changes);
  REQUIRE(f.changes.ended.size() == 1);
  REQUIRE(f.s.lease(r.lease.id)->state == LeaseState::expired);
  REQUIRE(f.s.board("a")->state == BoardState::recovering);
  REQUIRE(f.submit("t", 1, 10001).kind == Submitted::queued);
  f.changes = {};
  f.s.recovered("a", 10002, f.changes);
  REQUIRE(f.changes.granted.size() == 1);
}

TEST_CASE("renewal moves the expiry and ended leases cannot be renewed or released") {
  Fixture f({spec("a", "t")});
  auto r = f.submit("t", 1, 0);
  REQUIRE(f.s.renew(r.lease.id, 20000, 5000, f.changes).lease.expires_ms == 25000);
  f.s.expireDue(24999, f.changes);
  REQUIRE(f.s.lease(r.lease.id)->state == LeaseState::active);
  f.s.release(r.lease.id, 25000, f.changes);
  auto again = f.s.renew(r.lease.id, 1000, 25001, f.changes);
  REQUIRE(again.status.is(hwfarm::Code::conflict));
  REQUIRE(again.status.message() == "lease " + r.lease.id + " is released (released)");
  REQUIRE(f.s.release("nope", 1, f.changes).status.is(hwfarm::Code::not_found));
}

TEST_CASE("requests no configured board can ever match are refused at once") {
  Fixture f({spec("a", "t"), spec("b", "t", "w1")});
  auto r = f.submit("nucleo", 1, 0);
  REQUIRE(r.status.is(hwfarm::Code::invalid_argument));
  REQUIRE(r.status.message() == "selector type=nucleo matches 0 configured board(s), 1 requested");
  REQUIRE(f.submit("t", 3, 0).status.message() == "selector type=t matches 2 configured board(s), 3 requested");
  LeaseRequest w;
  w.selector.worker = "w9";
  w.ttl_ms = 1;
  REQUIRE(f.s.submit(w, 0, f.changes).status.message() == "no configured worker or Jenkins node is named \"w9\"");
  w.selector.worker = "w1-node"; // a worker is also found by its Jenkins node name
  REQUIRE(f.s.submit(w, 0, f.changes).lease.boards.at(0).name == "b");
}

TEST_CASE("a retried request with the same idempotency key gets the same lease or ticket") {
  Fixture f({spec("a", "t")});
  auto first = f.submit("t", 1, 0, 0, "k1");
  auto retry = f.submit("t", 1, 1, 0, "k1");
  REQUIRE(retry.kind == Submitted::existing);
  REQUIRE(retry.lease.id == first.lease.id);
  REQUIRE(f.s.activeLeaseCount() == 1);
  auto waiting = f.submit("t", 1, 2, 0, "k2");
  auto joined = f.submit("t", 1, 3, 0, "k2");
  REQUIRE(joined.kind == Submitted::joined);
  REQUIRE(joined.ticket == waiting.ticket);
  REQUIRE(f.s.queueLength() == 1);
  // The same key from another principal is another request.
  REQUIRE(f.submit("t", 1, 4, 0, "k1", "other").kind == Submitted::queued);
}

TEST_CASE("cancelling a waiting request releases the boards it held back") {
  Fixture f({spec("a", "t"), spec("b", "t")});
  auto s1 = f.submit("t", 1, 0);
  auto big = f.submit("t", 2, 1);
  REQUIRE(f.submit("t", 1, 2).kind == Submitted::queued);
  f.changes = {};
  REQUIRE(f.s.cancel(big.ticket, 3, f.changes));
  REQUIRE(f.changes.granted.size() == 1); // the small one now gets board b
}

TEST_CASE("removing a leased board from the config revokes its lease with a reason") {
  Fixture f({spec("a", "t"), spec("b", "t")});
  auto r = f.submit("t", 2, 0);
  auto waiting = f.submit("t", 2, 1);
  f.changes = {};
  f.s.configure({spec("a", "t")}, [](const BoardSpec&) { return BoardState::available; }, 5, f.changes);
  REQUIRE(f.changes.ended.size() == 1);
  REQUIRE(f.s.lease(r.lease.id)->state == LeaseState::revoked);
  REQUIRE(f.s.lease(r.lease.id)->end_reason == "revoked: board b was removed from the configuration");
  REQUIRE(f.s.board("a")->state == BoardState::recovering);
  REQUIRE(f.changes.dropped.size() == 1);
  REQUIRE(f.changes.dropped[0].ticket == waiting.ticket);
  REQUIRE(f.changes.dropped[0].detail == "selector type=t matches 1 configured board(s), 2 requested");
}

TEST_CASE("a board that vanishes while leased is lost to the lease as an infrastructure failure") {
  Fixture f({spec("a", "t"), spec("b", "t")});
  auto r = f.submit("t", 2, 0);
  f.changes = {};
  f.s.vanished("a", 7, f.changes);
  const Lease* l = f.s.lease(r.lease.id);
  REQUIRE(l->state == LeaseState::active);
  REQUIRE(l->boards[0].lost);
  REQUIRE(l->boards[0].lost_ms == 7);
  REQUIRE(f.s.board("a")->state == BoardState::offline);
  REQUIRE(f.changes.events.at(0).kind == "infra_failure");
  f.s.release(r.lease.id, 8, f.changes);
  REQUIRE(f.s.board("a")->state == BoardState::offline);
  REQUIRE(f.s.board("b")->state == BoardState::available);
}

TEST_CASE("maintenance only for unleased boards and resume goes through recovering") {
  Fixture f({spec("a", "t"), spec("b", "t")});
  auto r = f.submit("t", 1, 0);
  REQUIRE(f.s.enterMaintenance("a", "", 1, f.changes).status.is(hwfarm::Code::conflict));
  REQUIRE(f.s.enterMaintenance("b", "probe swap", 1, f.changes).status.ok());
  REQUIRE(f.submit("t", 1, 2).kind == Submitted::queued);
  REQUIRE(f.s.resume("b", 3, f.changes).status.ok());
  REQUIRE(f.s.board("b")->state == BoardState::recovering);
}

TEST_CASE("random operations keep every board in at most one lease and the counts conserved") {
  std::vector<BoardSpec> specs;
  for (int i = 0; i < 12; ++i) specs.push_back(spec("b" + std::to_string(i), i % 3 == 0 ? "x" : "y", "w" + std::to_string(i % 2)));
  Fixture f(specs);
  std::mt19937 rng(12345);
  int64_t now = 0;
  std::vector<uint64_t> tickets;
  for (int step = 0; step < 20000; ++step) {
    now += rng() % 500;
    int op = static_cast<int>(rng() % 6);
    f.changes = {};
    if (op <= 1) {
      auto r = f.submit(rng() % 2 ? "x" : "y", 1 + static_cast<int>(rng() % 3), now, static_cast<int>(rng() % 3));
      if (r.kind == Submitted::queued) tickets.push_back(r.ticket);
    } else if (op == 2 && !tickets.empty()) {
      f.s.cancel(tickets[rng() % tickets.size()], now, f.changes);
    } else if (op == 3) {
      for (const auto& [id, l] : f.s.leases())
        if (l.state == LeaseState::active && rng() % 2) {
          f.s.release(id, now, f.changes);
          break;
        }
    } else if (op == 4) {
      f.s.expireDue(now, f.changes);
    } else {
      for (const auto& b : f.s.boards())
        if (b.state == BoardState::recovering) f.s.recovered(b.spec.name, now, f.changes);
    }
    // Invariants after every step.
    std::map<std::string, std::string> holder;
    for (const auto& [id, l] : f.s.leases()) {
      if (l.state != LeaseState::active) continue;
      for (const auto& b : l.boards) {
        REQUIRE(holder.count(b.name) == 0);
        holder[b.name] = id;
      }
    }
    size_t leased = 0;
    for (const auto& b : f.s.boards()) {
      if (b.state == BoardState::leased) {
        ++leased;
        REQUIRE(holder.at(b.spec.name) == b.lease_id);
      } else {
        REQUIRE(holder.count(b.spec.name) == 0);
      }
    }
    REQUIRE(leased == holder.size());
    REQUIRE(f.s.boards().size() == 12);
    // Each waiting request's counted place is its place in the sorted order.
    std::vector<const LeaseRequest*> order = f.s.queue(now);
    for (size_t i = 0; i < order.size(); ++i) REQUIRE(f.s.position(order[i]->ticket, now) == i + 1);
    // Nobody waits while enough of its boards are available and nobody
    // ahead of it could use them.
    if (f.s.queueLength() > 0) {
      const LeaseRequest* head = f.s.queue(now).front();
      size_t free = 0;
      for (const auto& b : f.s.boards())
        if (b.state == BoardState::available && head->selector.matches(b.spec)) ++free;
      REQUIRE(free < static_cast<size_t>(head->count));
    }
  }
}

TEST_CASE("a board that is not present goes back to offline when resumed") {
  int ids = 0;
  Scheduler s{SchedulerOptions{}, [&] { return "L" + std::to_string(++ids); }};
  Changes c;
  s.configure({spec("usb-1", "t")}, [](const BoardSpec&) { return BoardState::offline; }, 0, c);
  REQUIRE(s.enterMaintenance("usb-1", "", 1, c).status.ok());
  REQUIRE(s.resume("usb-1", 2, c).status.ok());
  REQUIRE(s.board("usb-1")->state == BoardState::offline);
  // Once it appears it recovers like any other.
  s.appeared("usb-1", 3, c);
  REQUIRE(s.board("usb-1")->state == BoardState::recovering);
}

TEST_CASE("at most max_ended ended leases stay in memory and active ones always do") {
  int next_id = 0;
  SchedulerOptions options{60000, 100, 64, 3};
  Scheduler s(options, [&] { return "L" + std::to_string(++next_id); });
  Changes c;
  s.configure({spec("a", "t"), spec("b", "t")}, [](const BoardSpec&) { return BoardState::available; }, 0, c);
  auto submit = [&](const std::string& key, int64_t now) {
    LeaseRequest r;
    r.selector.type = "t";
    r.ttl_ms = 10000;
    r.idempotency_key = key;
    r.holder.principal = "p";
    return s.submit(r, now, c);
  };
  auto held = submit("held", 1); // stays active throughout
  REQUIRE(held.kind == Submitted::granted);
  std::vector<std::string> ended;
  for (int i = 0; i < 5; ++i) {
    auto r = submit("k" + std::to_string(i), 10 + i);
    REQUIRE(r.kind == Submitted::granted);
    REQUIRE(s.release(r.lease.id, 10 + i, c).status.ok());
    ended.push_back(r.lease.id);
  }
  REQUIRE(s.endedLeaseCount() == 3);
  CHECK(s.lease(ended[0]) == nullptr);
  CHECK(s.lease(ended[1]) == nullptr);
  CHECK(s.lease(ended[2]) != nullptr);
  CHECK(s.lease(ended[4]) != nullptr);
  CHECK(s.lease(held.lease.id) != nullptr);
  // A forgotten lease's key no longer replays it; a remembered one does.
  CHECK(submit("k0", 20).kind == Submitted::granted);
  CHECK(submit("k4", 21).kind == Submitted::existing);
  // Time-based forgetting keeps the active lease.
  s.forgetEndedBefore(1000);
  CHECK(s.lease(ended[4]) == nullptr);
  CHECK(s.lease(held.lease.id) != nullptr);
  CHECK(s.endedLeaseCount() == 0);
}

TEST_CASE("restored ended leases are forgotten in the order they ended, not granted") {
  Scheduler s(SchedulerOptions{}, [] { return std::string("new"); });
  Changes c;
  s.configure({spec("a", "t")}, [](const BoardSpec&) { return BoardState::available; }, 0, c);
  auto ended = [](const std::string& id, int64_t granted, int64_t end) {
    Lease l;
    l.id = id;
    l.state = LeaseState::released;
    l.granted_ms = granted;
    l.ended_ms = end;
    l.boards = {{"a", false, 0}};
    return l;
  };
  // In grant order, as the store loads them: "long" was granted first but
  // ended last.
  s.restoreLease(ended("long", 100, 900));
  s.restoreLease(ended("short1", 200, 300));
  s.restoreLease(ended("short2", 250, 350));
  s.sortEnded();
  s.forgetEndedBefore(500);
  CHECK(s.lease("short1") == nullptr);
  CHECK(s.lease("short2") == nullptr);
  CHECK(s.lease("long") != nullptr);
  CHECK(s.endedLeaseCount() == 1);
}

// Issue 9, item 14: unplugging and replugging a quarantined board took it
// offline, then recovering, then available: out of quarantine unreviewed.
TEST_CASE("a quarantined board that is unplugged and replugged stays quarantined") {
  int ids = 0;
  Scheduler s{SchedulerOptions{}, [&] { return "L" + std::to_string(++ids); }};
  Changes c;
  s.configure({spec("usb-1", "t")}, [](const BoardSpec&) { return BoardState::offline; }, 0, c);
  s.appeared("usb-1", 1, c);
  // Given a present board in quarantine (restored from the database),
  s.restoreBoard("usb-1", BoardState::quarantined, 2, "3 failed health checks");
  REQUIRE(s.board("usb-1")->state == BoardState::quarantined);
  // when it is unplugged and plugged in again,
  s.vanished("usb-1", 3, c);
  REQUIRE(s.board("usb-1")->state == BoardState::quarantined);
  REQUIRE_FALSE(s.board("usb-1")->present);
  s.appeared("usb-1", 4, c);
  // it is still quarantined, with its reason, until an operator resumes it.
  REQUIRE(s.board("usb-1")->state == BoardState::quarantined);
  REQUIRE(s.board("usb-1")->reason == "3 failed health checks");
  REQUIRE(s.board("usb-1")->present);
  REQUIRE(s.resume("usb-1", 5, c).status.ok());
  REQUIRE(s.board("usb-1")->state == BoardState::recovering);
  // Resumed while unplugged, it waits offline for its device.
  s.restoreBoard("usb-1", BoardState::quarantined, 6, "again");
  s.vanished("usb-1", 7, c);
  REQUIRE(s.resume("usb-1", 8, c).status.ok());
  REQUIRE(s.board("usb-1")->state == BoardState::offline);
}

TEST_CASE("swap replaces a leased board in place with an available one of its type") {
  Fixture f({spec("a", "t"), spec("b", "t"), spec("c", "t"), spec("x", "other")});
  auto r = f.submit("t", 2, 1);
  REQUIRE(r.kind == Submitted::granted);
  REQUIRE(f.boardsOf(r.lease) == std::vector<std::string>{"a", "b"});
  f.changes = {};
  OpResult s = f.s.swap(r.lease.id, "a", "flash tool failed", 5, f.changes);
  REQUIRE(s.status.ok());
  // Same place in the list, so the lease's board order (and a run's target
  // names) stays.
  REQUIRE(f.boardsOf(s.lease) == std::vector<std::string>{"c", "b"});
  REQUIRE(f.boardsOf(*f.s.lease(r.lease.id)) == std::vector<std::string>{"c", "b"});
  REQUIRE(f.s.board("c")->state == BoardState::leased);
  REQUIRE(f.s.board("c")->lease_id == r.lease.id);
  REQUIRE(f.s.board("a")->state == BoardState::recovering);
  REQUIRE(f.s.board("a")->lease_id.empty());
  REQUIRE(f.changes.updated.size() == 1);
  bool event = false;
  for (const auto& e : f.changes.events)
    if (e.kind == "board_swap" && e.board == "a" && e.detail == "replaced by c: flash tool failed") event = true;
  REQUIRE(event);
  // Nothing of type t is free any more: refused, and the lease is unchanged.
  f.changes = {};
  OpResult none = f.s.swap(r.lease.id, "b", "again", 6, f.changes);
  REQUIRE(none.status.is(hwfarm::Code::conflict));
  REQUIRE(none.status.message() == "no other board of type t is available to replace b");
  REQUIRE(f.boardsOf(*f.s.lease(r.lease.id)) == std::vector<std::string>{"c", "b"});
  REQUIRE(f.changes.updated.empty());
  // A board not in the lease, an unknown lease, an ended lease.
  REQUIRE(f.s.swap(r.lease.id, "x", "", 7, f.changes).status.is(hwfarm::Code::not_found));
  REQUIRE(f.s.swap("nope", "b", "", 7, f.changes).status.is(hwfarm::Code::not_found));
  REQUIRE(f.s.release(r.lease.id, 8, f.changes).status.ok());
  REQUIRE(f.s.swap(r.lease.id, "b", "", 9, f.changes).status.is(hwfarm::Code::conflict));
  // Its boards were released: c and b are available again, a still recovers.
  REQUIRE(f.s.board("c")->state == BoardState::available);
  REQUIRE(f.s.board("b")->state == BoardState::available);
  REQUIRE(f.s.board("a")->state == BoardState::recovering);
}

TEST_CASE("a lease has at most max_swaps_per_hour boards swapped in within any hour") {
  // Given six boards of one type and a lease that may swap two per hour,
  Fixture f({spec("a", "t"), spec("b", "t"), spec("c", "t"), spec("d", "t"), spec("e", "t"), spec("g", "t")});
  SchedulerOptions o{60000, 100, 64};
  o.max_swaps_per_hour = 2;
  f.s.setOptions(o);
  auto r = f.submit("t", 1, 0);
  REQUIRE(f.boardsOf(r.lease) == std::vector<std::string>{"a"});
  // two swaps go through,
  REQUIRE(f.s.swap(r.lease.id, "a", "flash tool failed", 1000, f.changes).status.ok());
  REQUIRE(f.s.swap(r.lease.id, "b", "flash tool failed", 2000, f.changes).status.ok());
  std::string kept = f.boardsOf(*f.s.lease(r.lease.id))[0];
  // the third within the hour is refused with why, its board staying leased,
  f.changes = {};
  OpResult third = f.s.swap(r.lease.id, kept, "flash tool failed", 1000 + 3600000 - 1, f.changes);
  REQUIRE(third.status.is(hwfarm::Code::conflict));
  REQUIRE(third.status.message() == "lease " + r.lease.id +
                                        " had 2 board(s) swapped in within the last hour (leases.max_swaps_per_hour = "
                                        "2): " + kept + " stays");
  REQUIRE(f.s.board(kept)->state == BoardState::leased);
  REQUIRE(f.changes.events.empty());
  // and an hour after the first, one more may go.
  REQUIRE(f.s.swap(r.lease.id, kept, "flash tool failed", 1000 + 3600000, f.changes).status.ok());
  REQUIRE(f.s.swap(r.lease.id, f.boardsOf(*f.s.lease(r.lease.id))[0], "again", 1000 + 3600001, f.changes)
              .status.is(hwfarm::Code::conflict));
  // Another lease counts its own; 0 turns swaps off.
  auto other = f.submit("t", 1, 5000000);
  REQUIRE(f.s.swap(other.lease.id, f.boardsOf(other.lease)[0], "x", 5000001, f.changes).status.ok());
  o.max_swaps_per_hour = 0;
  f.s.setOptions(o);
  REQUIRE(f.s.swap(other.lease.id, f.boardsOf(*f.s.lease(other.lease.id))[0], "x", 9000000, f.changes)
              .status.is(hwfarm::Code::conflict));
}

TEST_CASE("swap of a lost board keeps it offline and respects the lease's selector") {
  Fixture f({spec("a", "t", "w0", {"fast"}), spec("b", "t", "w0"), spec("c", "t", "w0", {"fast"})});
  LeaseRequest req;
  req.selector.type = "t";
  req.selector.labels = {"fast"};
  req.count = 1;
  req.ttl_ms = 10000;
  req.holder.principal = "p";
  auto r = f.s.submit(req, 1, f.changes);
  REQUIRE(r.kind == Submitted::granted);
  REQUIRE(f.boardsOf(r.lease) == std::vector<std::string>{"a"});
  REQUIRE(f.s.vanished("a", 2, f.changes).status.ok());
  REQUIRE(f.s.lease(r.lease.id)->boards[0].lost);
  OpResult s = f.s.swap(r.lease.id, "a", "board vanished", 3, f.changes);
  REQUIRE(s.status.ok());
  // b has no "fast" label: c it is.
  REQUIRE(f.boardsOf(s.lease) == std::vector<std::string>{"c"});
  REQUIRE_FALSE(s.lease.boards[0].lost);
  REQUIRE(f.s.board("a")->state == BoardState::offline);
  REQUIRE(f.s.board("b")->state == BoardState::available);
}

TEST_CASE("a health check takes an available board out of the pool and its result decides where it goes") {
  Fixture f({spec("a", "t")});
  REQUIRE(f.s.beginCheck("a", 1, f.changes).status.ok());
  REQUIRE(f.s.board("a")->state == BoardState::recovering);
  REQUIRE(f.s.board("a")->reason == "health check");
  // Mid-check nothing is granted; the request waits.
  auto waiting = f.submit("t", 1, 2);
  REQUIRE(waiting.kind == Submitted::queued);
  // A second check cannot start; a failed one keeps it recovering, then K
  // of them quarantine it; a passing one makes it available, which grants
  // the waiting request.
  REQUIRE(f.s.beginCheck("a", 3, f.changes).status.is(hwfarm::Code::conflict));
  REQUIRE(f.s.checked("a", BoardState::recovering, "health check failed: no banner", 4, f.changes).status.ok());
  REQUIRE(f.s.checked("a", BoardState::quarantined, "3 failed checks", 5, f.changes).status.ok());
  REQUIRE(f.s.board("a")->state == BoardState::quarantined);
  REQUIRE(f.s.checked("a", BoardState::leased, "", 6, f.changes).status.is(hwfarm::Code::conflict));
  f.changes = {};
  REQUIRE(f.s.checked("a", BoardState::available, "", 7, f.changes).status.ok());
  REQUIRE(f.changes.granted.size() == 1);
  REQUIRE(f.s.board("a")->state == BoardState::leased);
  // A leased board's stale result changes nothing.
  REQUIRE(f.s.checked("a", BoardState::quarantined, "late", 8, f.changes).status.is(hwfarm::Code::conflict));
  REQUIRE(f.s.board("a")->state == BoardState::leased);
  REQUIRE(f.s.beginCheck("nope", 9, f.changes).status.is(hwfarm::Code::not_found));
}
