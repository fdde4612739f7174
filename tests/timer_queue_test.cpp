// Core's TimerQueue: deadlines on a Clock's steady time, fired by runDue().
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "daemon/core/clock.h"
#include "daemon/core/timer_queue.h"

using namespace std::chrono_literals;
using hwfarm::ManualClock;
using hwfarm::TimerQueue;

TEST_CASE("timers fire when their deadline is reached, earliest first, ties in scheduling order") {
  ManualClock clock;
  TimerQueue q;
  std::vector<std::string> fired;
  auto t0 = clock.steadyNow();
  q.schedule(t0 + 20ms, [&] { fired.push_back("b"); });
  q.schedule(t0 + 10ms, [&] { fired.push_back("a"); });
  q.schedule(t0 + 20ms, [&] { fired.push_back("c"); });
  REQUIRE(q.next() == t0 + 10ms);
  clock.advance(9ms);
  REQUIRE(q.runDue(clock.steadyNow()) == 0);
  clock.advance(1ms);
  REQUIRE(q.runDue(clock.steadyNow()) == 1);
  REQUIRE(fired == std::vector<std::string>{"a"});
  clock.advance(10ms);
  REQUIRE(q.runDue(clock.steadyNow()) == 2);
  REQUIRE(fired == std::vector<std::string>{"a", "b", "c"});
  REQUIRE_FALSE(q.next());
  REQUIRE(q.size() == 0);
}

TEST_CASE("a cancelled timer never fires and cancelling twice is refused") {
  ManualClock clock;
  TimerQueue q;
  bool fired = false;
  TimerQueue::Id id = q.schedule(clock.steadyNow() + 5ms, [&] { fired = true; });
  REQUIRE(q.cancel(id));
  REQUIRE_FALSE(q.cancel(id));
  REQUIRE_FALSE(q.cancel(0));
  clock.advance(1h);
  REQUIRE(q.runDue(clock.steadyNow()) == 0);
  REQUIRE_FALSE(fired);
}

TEST_CASE("a timer scheduled by a callback waits for the next call even when due") {
  ManualClock clock;
  TimerQueue q;
  int runs = 0;
  std::function<void()> again = [&] {
    ++runs;
    q.schedule(clock.steadyNow(), again); // due at once: would loop forever in one call
  };
  q.schedule(clock.steadyNow(), again);
  // A callback that cancels a later timer due in the same call stops it.
  bool later = false;
  TimerQueue::Id victim = q.schedule(clock.steadyNow() + 1ms, [&] { later = true; });
  q.schedule(clock.steadyNow(), [&] { q.cancel(victim); });
  clock.advance(1ms);
  REQUIRE(q.runDue(clock.steadyNow()) == 2);
  REQUIRE(runs == 1);
  REQUIRE_FALSE(later);
  REQUIRE(q.runDue(clock.steadyNow()) == 1);
  REQUIRE(runs == 2);
}
