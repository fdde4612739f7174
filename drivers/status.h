// Driver outcomes as values (STYLE.md habit 5). Every driver failure is an
// infrastructure failure; the message says what failed and why.
#pragma once

#include <string>

namespace hwfarm::drivers {

struct Status {
  bool ok = true;
  std::string message;
  bool busy = false;        // refused because another operation runs: not a failure of the board
  bool unsupported = false; // the board has no such capability (power.driver = "none")

  static Status success() { return {}; }
  static Status failure(std::string message) { return {false, std::move(message)}; }
  static Status refusedBusy(std::string message) { return {false, std::move(message), true}; }
  static Status refusedUnsupported(std::string message) { return {false, std::move(message), false, true}; }
};

} // namespace hwfarm::drivers
