// Deadlines on a Clock's steady time, fired by whoever drives the clock: the
// lease service's one event-loop timer in production, a test that advances a
// ManualClock otherwise. Pure: it never reads a clock; the caller passes
// the time to runDue().
//
// Thread safety: none; one thread (the event loop, or a test) uses it.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <unordered_map>
#include <utility>

#include "daemon/core/clock.h"

namespace hwfarm {

class TimerQueue {
 public:
  using Id = uint64_t; // never 0: 0 names no timer
  using Time = Clock::SteadyTime;

  // Runs `fn` from the first runDue() whose time is >= `when`.
  Id schedule(Time when, std::function<void()> fn);
  // Drops a timer that has not fired; false if there is none (fired,
  // cancelled, or 0).
  bool cancel(Id id);
  // Drops every timer.
  void clear();

  // The earliest deadline, if any.
  std::optional<Time> next() const;
  // Runs every timer that was scheduled before this call and is due at
  // `now`, earliest deadline first (equal deadlines in scheduling order),
  // each removed before it runs. Timers the callbacks schedule run from the
  // next call on, even when already due: one call always ends. Returns how
  // many ran.
  size_t runDue(Time now);
  size_t size() const { return timers_.size(); }

 private:
  using Key = std::pair<Time, Id>;
  std::map<Key, std::function<void()>> timers_;
  std::unordered_map<Id, Time> when_;
  Id next_id_ = 1;
};

} // namespace hwfarm
