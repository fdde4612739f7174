// Deadlines on a Clock, fired from the event loop: a TimerQueue
// (core/timer_queue.h) driven by one Asio timer armed for its earliest
// deadline. The services' deadlines, retries and backoffs all run on one,
// so a test on a ManualClock moves time and calls tick() instead of
// sleeping.
//
// Thread safety: every call on the event loop thread.
#pragma once

#include <chrono>
#include <functional>
#include <memory>

#include "daemon/core/clock.h"
#include "daemon/core/timer_queue.h"

namespace boost::asio {
class io_context;
}

namespace hwfarm {

class LoopTimers {
 public:
  // `clock` must outlive the timers.
  LoopTimers(boost::asio::io_context& io, const Clock& clock);
  ~LoopTimers();

  // Runs `fn` from the tick() at or after `when` (on the loop: once the
  // clock says so).
  TimerQueue::Id at(Clock::SteadyTime when, std::function<void()> fn);
  TimerQueue::Id after(Clock::SteadyTime::duration delay, std::function<void()> fn) {
    return at(clock_.steadyNow() + delay, std::move(fn));
  }
  // Drops timer `id` if it has not fired, and sets `id` to 0.
  void cancel(TimerQueue::Id& id);
  // Drops every timer; nothing fires until the next at().
  void clear();
  // Fires every timer due at the clock's steady time now, then arms the
  // loop's timer for the next one.
  void tick();

  const Clock& clock() const { return clock_; }

 private:
  void rearm();

  const Clock& clock_;
  TimerQueue queue_;
  struct Wake;
  std::unique_ptr<Wake> wake_; // the Asio timer, armed for queue_.next()
};

} // namespace hwfarm
