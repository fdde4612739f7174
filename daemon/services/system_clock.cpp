#include "daemon/services/system_clock.h"

namespace hwfarm {

Clock::SteadyTime SystemClock::steadyNow() const { return std::chrono::steady_clock::now(); }

int64_t SystemClock::wallMs() const {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

} // namespace hwfarm
