// Time as the daemon's logic sees it. Core code never reads a clock: it is
// handed one (or a time) by the service that drives it, so tests of expiry,
// recovery and aging run on a ManualClock in milliseconds, without sleeping.
// The implementation that reads the system's clocks lives outside core/.
#pragma once

#include <chrono>
#include <cstdint>

namespace hwfarm {

class Clock {
 public:
  using SteadyTime = std::chrono::steady_clock::time_point;

  virtual ~Clock() = default;

  // Monotonic time for deadlines, timers and durations: never goes back,
  // unaffected by changes of the wall clock.
  virtual SteadyTime steadyNow() const = 0;

  // Wall time in unix milliseconds, for what is stored and shown (a lease's
  // expiry, event times). May jump when the system's time is set.
  virtual int64_t wallMs() const = 0;
};

// A clock that moves only when told to. Starts at steady time 0 and at
// wall time `wall_ms`. Not thread-safe: one thread drives it (tests).
class ManualClock final : public Clock {
 public:
  explicit ManualClock(int64_t wall_ms = 0) : wall_ms_(wall_ms) {}

  SteadyTime steadyNow() const override { return steady_; }
  int64_t wallMs() const override { return wall_ms_; }

  // Moves both clocks forward by `d` (REQUIRES: d >= 0).
  void advance(std::chrono::milliseconds d) {
    steady_ += d;
    wall_ms_ += d.count();
  }

  // Sets the wall clock alone, as an operator or NTP step does; steady
  // time does not move.
  void setWallMs(int64_t wall_ms) { wall_ms_ = wall_ms; }

 private:
  SteadyTime steady_{};
  int64_t wall_ms_;
};

} // namespace hwfarm
