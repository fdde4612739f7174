#include "daemon/core/run/simulator_share.h"

#include <algorithm>

namespace hwfarm::run {

SimulatorShare::SimulatorShare(size_t slots, size_t per_owner) { setLimits(slots, per_owner); }

void SimulatorShare::setLimits(size_t slots, size_t per_owner) {
  slots_ = std::max<size_t>(1, slots);
  per_owner_ = std::clamp<size_t>(per_owner, 1, slots_);
}

uint64_t SimulatorShare::add(const std::string& owner) {
  uint64_t ticket = next_++;
  owners_[owner].waiting.push_back(ticket);
  queued_.emplace(ticket, owner);
  return ticket;
}

std::vector<uint64_t> SimulatorShare::start() {
  std::vector<uint64_t> started;
  while (running_.size() < slots_) {
    // The owner with a waiting job and room under per_owner that runs the
    // fewest; among equals, the one whose first waiting job is oldest
    // (tickets grow with time).
    Owner* best = nullptr;
    const std::string* best_name = nullptr;
    for (auto& [name, o] : owners_) {
      if (o.waiting.empty() || o.running >= per_owner_) continue;
      if (!best || o.running < best->running ||
          (o.running == best->running && o.waiting.front() < best->waiting.front())) {
        best = &o;
        best_name = &name;
      }
    }
    if (!best) break;
    uint64_t ticket = best->waiting.front();
    best->waiting.pop_front();
    ++best->running;
    queued_.erase(ticket);
    running_.emplace(ticket, *best_name);
    started.push_back(ticket);
  }
  return started;
}

void SimulatorShare::finished(uint64_t ticket) {
  std::string owner;
  if (auto it = running_.find(ticket); it != running_.end()) {
    owner = it->second;
    running_.erase(it);
    --owners_[owner].running;
  } else if (auto q = queued_.find(ticket); q != queued_.end()) {
    owner = q->second;
    queued_.erase(q);
    auto& w = owners_[owner].waiting;
    w.erase(std::remove(w.begin(), w.end(), ticket), w.end());
  } else {
    return;
  }
  if (auto o = owners_.find(owner); o != owners_.end() && o->second.waiting.empty() && o->second.running == 0)
    owners_.erase(o);
}

size_t SimulatorShare::waiting() const { return queued_.size(); }

size_t SimulatorShare::runningFor(const std::string& owner) const {
  auto it = owners_.find(owner);
  return it == owners_.end() ? 0 : it->second.running;
}

} // namespace hwfarm::run
