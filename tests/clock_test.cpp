// The core's Clock: a ManualClock moves only when a test moves it, so code
// that takes its time from a Clock is tested without sleeping.
#include <catch2/catch.hpp>

#include "daemon/core/clock.h"

using namespace std::chrono_literals;

namespace {

// A deadline as core code computes one: from the Clock it is handed.
bool expired(const hwfarm::Clock& clock, hwfarm::Clock::SteadyTime deadline) { return clock.steadyNow() >= deadline; }

} // namespace

TEST_CASE("a manual clock starts where it is told and stands still until advanced") {
  hwfarm::ManualClock clock(1'700'000'000'000);
  auto start = clock.steadyNow();
  CHECK(clock.wallMs() == 1'700'000'000'000);
  CHECK(clock.steadyNow() == start);
  CHECK(clock.wallMs() == 1'700'000'000'000);
}

TEST_CASE("advancing a manual clock moves steady and wall time together") {
  hwfarm::ManualClock clock(1000);
  auto start = clock.steadyNow();
  clock.advance(1500ms);
  CHECK(clock.steadyNow() - start == 1500ms);
  CHECK(clock.wallMs() == 2500);
}

TEST_CASE("setting the wall time of a manual clock leaves steady time alone") {
  // Given a deadline one minute ahead on the steady clock,
  hwfarm::ManualClock clock(5000);
  const hwfarm::Clock& seen = clock;
  auto deadline = seen.steadyNow() + 60s;
  // a wall clock set back an hour does not move it,
  clock.setWallMs(5000 - 3'600'000);
  CHECK(seen.wallMs() == 5000 - 3'600'000);
  CHECK_FALSE(expired(seen, deadline));
  // and it passes exactly when a minute has gone by.
  clock.advance(59'999ms);
  CHECK_FALSE(expired(seen, deadline));
  clock.advance(1ms);
  CHECK(expired(seen, deadline));
}
