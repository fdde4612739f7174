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
  size_t ran = 0;
  while (!timers_.empty() && timers_.begin()->first.first <= now) {
    auto node = timers_.extract(timers_.begin());
    when_.erase(node.key().second);
    node.mapped()();
    ++ran;
  }
  return ran;
}

} // namespace hwfarm
