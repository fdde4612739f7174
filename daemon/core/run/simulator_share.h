// Who gets the next reference simulator (docs/runs.md, "Simulators are
// shared"). The simulators are one pool of `slots` for every run of the
// lab; a simulator is never taken from the job it runs (its firmware may
// hang until its deadline), so fairness is decided when a slot frees:
//   - an owner (a lease: one Jenkins stage, whatever runs it starts) never
//     holds more than `per_owner` slots, so with per_owner < slots one
//     tenant's hanging images cannot hold every simulator while another
//     tenant's run waits;
//   - a free slot goes to the owner with the fewest running, then to the
//     one whose oldest waiting job came first; an owner's jobs start in the
//     order they came.
// Pure: no clock, no I/O; the caller starts what start() hands out.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <string>
#include <vector>

namespace hwfarm::run {

class SimulatorShare {
 public:
  SimulatorShare(size_t slots, size_t per_owner);

  // New limits (a reload): running jobs keep their slots; fewer slots only
  // delay what waits.
  void setLimits(size_t slots, size_t per_owner);

  // A job of `owner` waits for a slot; its ticket.
  uint64_t add(const std::string& owner);

  // The waiting jobs that may start now, in the order to start them; they
  // count as running from here on.
  std::vector<uint64_t> start();

  // A job ended (or was dropped while waiting): its slot is free.
  void finished(uint64_t ticket);

  size_t running() const { return running_.size(); }
  size_t waiting() const;
  size_t runningFor(const std::string& owner) const;

 private:
  struct Owner {
    std::deque<uint64_t> waiting;
    size_t running = 0;
  };

  size_t slots_, per_owner_;
  uint64_t next_ = 1;
  std::map<std::string, Owner> owners_;
  std::map<uint64_t, std::string> running_;  // ticket -> owner
  std::map<uint64_t, std::string> queued_;   // ticket -> owner
};

} // namespace hwfarm::run
