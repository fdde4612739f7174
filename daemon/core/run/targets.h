// A run's targets (docs/runs.md, "A run"), resolved from what the client
// named (Spec::targets: boards of the lease, board types, the simulator)
// over a lookup of the configured boards, named for the artifacts, with
// the board type whose simulator the run uses. Pure.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "daemon/core/lease/types.h"
#include "daemon/core/run/boot.h"
#include "daemon/core/run/spec.h"

namespace hwfarm::run {

// A configured board, as a run needs to know it.
struct BoardInfo {
  std::string type;
  BoardKind kind = BoardKind::simulated;
};

// A target of a run: a board of its lease, or the simulator.
struct Target {
  std::string board; // empty: the simulator target
  std::string name;  // the artifact name
  BoardKind kind = BoardKind::simulated; // a board's
  bool simulator() const { return board.empty(); }
};

struct Fleet {
  // A configured board, or nullopt.
  std::function<std::optional<BoardInfo>(const std::string& name)> board;
  // The QEMU machine of the simulator for a board type ("mps2-an385"), or
  // nullopt when there is none: the type's [[reference]], else a simulated
  // board of the lease of that type.
  std::function<std::optional<std::string>(const std::string& type)> simulator;
};

struct Resolved {
  std::vector<Target> targets; // in the order named
  // The board type whose simulator the references and the simulator
  // target run (the first board target's, else the lease's first board's);
  // "" when the run needs none.
  std::string sim_type;
  std::string sim_label;  // "qemu <machine>", the record's board for the simulator; "" with none
  std::string reference;  // the reference's artifact name ("qemu_ref", "golden_ref"), "" without one
};

// Code::invalid_argument saying what is wrong: a target that is neither a
// present board of the lease, one of its board types nor "qemu", one
// listed twice, a type named more often than the lease holds boards of it,
// a lost board, no simulator for the board type when the run needs one.
Result<Resolved> resolveTargets(const Spec& spec, const lease::Lease& lease, const Fleet& fleet);

} // namespace hwfarm::run
