#include "daemon/core/timer_queue.h"

namespace hwfarm {

TimerQueue::Id TimerQueue::schedule(Time when, std::function<void()> fn) {
  Id id = next_id_++;
  timers_.emplace(Key{when, id}, std::move(fn));
  when_.emplace(id, when);
  return id;
}

bool TimerQueue::cancel(Id id) {
  auto it = when_.find(id);
  if (it == when_.end()) return false;
  timers_.erase({it->second, id});
  when_.erase(it);
  return true;
}

void TimerQueue::clear() {
  timers_.clear();
  when_.clear();
}

std::optional<TimerQueue::Time> TimerQueue::next() const {
  if (timers_.empty()) return std::nullopt;
  return timers_.begin()->first.first;
}

size_t TimerQueue::runDue(Time now) {
  const Id first_new = next_id_; // timers scheduled from here on wait for the next call
  size_t ran = 0;
  auto it = timers_.begin();
  while (it != timers_.end() && it->first.first <= now) {
    if (it->first.second >= first_new) {
      ++it;
      continue;
    }
    Key key = it->first;
    std::function<void()> fn = std::move(it->second);
    timers_.erase(it);
    when_.erase(key.second);
    fn(); // may schedule and cancel timers
    ++ran;
    // The timers due before this call that are left all come after `key`.
    it = timers_.upper_bound(key);
  }
  return ran;
}

} // namespace hwfarm
