// daemon/core/run/simulator_share: one lease's hanging images never hold
// every reference simulator while another lease's run waits.
#include <catch2/catch.hpp>

#include "daemon/core/run/simulator_share.h"

using hwfarm::run::SimulatorShare;
using Tickets = std::vector<uint64_t>;

TEST_CASE("a lease alone uses its share, and the slot it leaves free goes to the next lease at once") {
  // Given 2 simulators, at most 1 per lease
  SimulatorShare share(2, 1);
  // When a hostile lease queues two images that will hang
  uint64_t h1 = share.add("hostile"), h2 = share.add("hostile");
  // Then only one starts: the other slot stays for someone else
  CHECK(share.start() == Tickets{h1});
  // When a normal lease comes, its image starts at once
  uint64_t n1 = share.add("normal");
  CHECK(share.start() == Tickets{n1});
  CHECK(share.start().empty());
  // And the hostile's second waits until its first is done
  share.finished(n1);
  CHECK(share.start().empty());
  share.finished(h1);
  CHECK(share.start() == Tickets{h2});
  share.finished(h2);
  CHECK(share.running() == 0);
  CHECK(share.waiting() == 0);
}

TEST_CASE("a freed slot goes to the lease running the fewest, then to the one waiting longest, and a lease's own jobs start in order") {
  // Given 3 simulators, at most 2 per lease, all held by a and b
  SimulatorShare share(3, 2);
  uint64_t a1 = share.add("a"), a2 = share.add("a"), b1 = share.add("b");
  CHECK(share.start() == Tickets{a1, b1, a2});
  // When a, b and c queue more, c first
  uint64_t c1 = share.add("c"), b2 = share.add("b"), a3 = share.add("a");
  CHECK(share.start().empty());
  // Then a slot freed by a goes to c (running none), not to a or b
  share.finished(a1);
  CHECK(share.start() == Tickets{c1});
  // And when c's ends, a and b both run one: b's b2 waited longest
  share.finished(c1);
  CHECK(share.start() == Tickets{b2});
  // Then a's own next job when a slot frees
  share.finished(b1);
  CHECK(share.start() == Tickets{a3});
  CHECK(share.runningFor("a") == 2);
  CHECK(share.runningFor("c") == 0);
}

TEST_CASE("a job dropped while it waits leaves the queue, and a per-lease share above the slots is the slots") {
  SimulatorShare share(1, 5);
  uint64_t a1 = share.add("a"), a2 = share.add("a"), b1 = share.add("b");
  CHECK(share.start() == Tickets{a1});
  // When a's second is dropped (its run was cancelled) before it started
  share.finished(a2);
  CHECK(share.waiting() == 1);
  share.finished(a1);
  // Then b's job is next
  CHECK(share.start() == Tickets{b1});
  // A reload to 2 slots, 1 per lease: b keeps its slot, a new lease gets the other
  share.setLimits(2, 1);
  uint64_t b2 = share.add("b"), c1 = share.add("c");
  CHECK(share.start() == Tickets{c1});
  share.finished(b1);
  CHECK(share.start() == Tickets{b2});
  // A ticket it never gave, or one already finished, changes nothing
  share.finished(999);
  share.finished(b1);
  CHECK(share.running() == 2);
}
