#include "daemon/services/loop_timers.h"

#include <optional>

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>

namespace hwfarm {

struct LoopTimers::Wake {
  explicit Wake(boost::asio::io_context& io) : timer(io) {}
  boost::asio::steady_timer timer;
  std::optional<Clock::SteadyTime> armed; // the deadline `timer` is armed for
};

LoopTimers::LoopTimers(boost::asio::io_context& io, const Clock& clock)
    : clock_(clock), wake_(std::make_unique<Wake>(io)) {}

LoopTimers::~LoopTimers() = default;

TimerQueue::Id LoopTimers::at(Clock::SteadyTime when, std::function<void()> fn) {
  TimerQueue::Id id = queue_.schedule(when, std::move(fn));
  rearm();
  return id;
}

void LoopTimers::cancel(TimerQueue::Id& id) {
  if (queue_.cancel(std::exchange(id, 0))) rearm();
}

void LoopTimers::clear() {
  queue_.clear();
  rearm();
}

void LoopTimers::tick() {
  queue_.runDue(clock_.steadyNow());
  rearm();
}

void LoopTimers::rearm() {
  std::optional<Clock::SteadyTime> next = queue_.next();
  if (next == wake_->armed) return;
  wake_->armed = next;
  wake_->timer.cancel();
  if (!next) return;
  // The Asio timer runs on the system's steady clock: it waits as long as
  // the Clock says is left (a ManualClock's deadlines fire from tick()).
  wake_->timer.expires_after(std::max(Clock::SteadyTime::duration::zero(), *next - clock_.steadyNow()));
  wake_->timer.async_wait([this](const boost::system::error_code& ec) {
    if (ec) return;
    wake_->armed.reset();
    tick();
  });
}

} // namespace hwfarm
