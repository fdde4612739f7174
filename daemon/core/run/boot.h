// How a board takes an image: the one sequence a run's attempt and a health
// check both follow (DESIGN.md, "One shape for every engine"), by what the
// board has. Pure: results in, the next step out; the caller carries the
// steps out through its target runner.
//
//   simulated   flash (stage the image), power off (the console then holds
//               this boot only), power on
//   switched    flash, power off (and its off time), power on: a board with
//               a tty and a power switch. Its console holds this boot only:
//               what a flasher that resets the board (openocd, st-flash,
//               nrfjprog) let it print until it was off is not read
//   unswitched  flash: the flasher's reset starts the firmware (a USB board
//               with power.driver = "none": nothing to switch)
//
// The console counts from listening() on: a switched or simulated board's
// once its power-on starts, an unswitched board's from the flash's start
// (its firmware starts at the flasher's reset, before the flash reports
// back). The deadline counts from running() on.
#pragma once

#include <optional>

#include "common/status.h"

namespace hwfarm::run {

enum class BoardKind { simulated, switched, unswitched };

// cycle_off: off, then the switch's off time (power.off_s); an on follows.
enum class PowerStep { on, off, cycle, cycle_off };

struct BootStep {
  enum class Kind { flash, power } kind = Kind::flash;
  PowerStep power = PowerStep::on; // for Kind::power
};

class Boot {
 public:
  enum class Stage {
    idle,     // not started
    flashing, // the flash runs
    stopping, // a simulated or switched board powers off before its boot
    running,  // the firmware runs (its power step may still be under way)
    failed,   // a flash or power step failed: failure() says why
  };

  explicit Boot(BoardKind kind) : kind_(kind) {}

  // idle -> flashing: the first step, always the flash.
  BootStep start();
  // The flash's result: the next step, if any (running or stopping), or
  // failed (nullopt).
  std::optional<BootStep> flashed(const Status& status);
  // A power step's result: from stopping, the power-on (a simulator's off
  // cannot fail; a switch's failed off ends the boot); in running, a
  // failure ends the boot.
  std::optional<BootStep> powered(const Status& status);

  Stage stage() const { return stage_; }
  BoardKind kind() const { return kind_; }
  bool listening() const;
  bool running() const { return stage_ == Stage::running; }
  const Status& failure() const { return failure_; }

 private:
  BoardKind kind_;
  Stage stage_ = Stage::idle;
  Status failure_;
};

} // namespace hwfarm::run
