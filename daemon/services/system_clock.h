// The Clock of a running hwfarmd: the system's monotonic and wall clocks
// (CLOCK_MONOTONIC and CLOCK_REALTIME through std::chrono). Tests hand the
// services a ManualClock (daemon/core/clock.h) instead.
#pragma once

#include "daemon/core/clock.h"

namespace hwfarm {

class SystemClock final : public Clock {
 public:
  SteadyTime steadyNow() const override;
  int64_t wallMs() const override;
};

} // namespace hwfarm
