// Waiting in process tests for something outside the test's control (a
// process to exit, a daemon's queue to fill): polled, with a bound, so a
// condition that never comes fails the test's next check instead of hanging
// it. Never for the daemon's own timers: tests drive those on a clock.
#pragma once

#include <chrono>
#include <thread>

namespace hwfarm::test {

// Polls `holds` every 10 ms while it is true, for `at_most` at the longest;
// whether it still holds (the caller's CHECK tells what it waited for).
template <class Condition>
bool waitWhile(Condition&& holds, std::chrono::milliseconds at_most) {
  const auto until = std::chrono::steady_clock::now() + at_most;
  while (holds()) {
    if (std::chrono::steady_clock::now() >= until) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return false;
}

} // namespace hwfarm::test
