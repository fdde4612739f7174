#include "daemon/core/run/boot.h"

namespace hwfarm::run {

BootStep Boot::start() {
  stage_ = Stage::flashing;
  return {BootStep::Kind::flash};
}

std::optional<BootStep> Boot::flashed(const Status& status) {
  if (stage_ != Stage::flashing) return std::nullopt;
  if (!status.ok()) {
    failure_ = status;
    stage_ = Stage::failed;
    return std::nullopt;
  }
  switch (kind_) {
    case BoardKind::simulated:
      stage_ = Stage::stopping;
      return BootStep{BootStep::Kind::power, PowerStep::off};
    case BoardKind::switched:
      stage_ = Stage::stopping;
      return BootStep{BootStep::Kind::power, PowerStep::cycle_off};
    case BoardKind::unswitched:
      stage_ = Stage::running;
      return std::nullopt;
  }
  return std::nullopt;
}

std::optional<BootStep> Boot::powered(const Status& status) {
  if (stage_ == Stage::stopping) {
    if (kind_ == BoardKind::switched && !status.ok()) {
      failure_ = status;
      stage_ = Stage::failed;
      return std::nullopt;
    }
    stage_ = Stage::running;
    return BootStep{BootStep::Kind::power, PowerStep::on};
  }
  if (stage_ == Stage::running && !status.ok()) {
    failure_ = status;
    stage_ = Stage::failed;
  }
  return std::nullopt;
}

bool Boot::listening() const {
  if (stage_ == Stage::running) return true;
  return stage_ == Stage::flashing && kind_ == BoardKind::unswitched;
}

} // namespace hwfarm::run
