#include "daemon/core/run/targets.h"

#include <algorithm>
#include <set>

#include "daemon/core/run/naming.h"

namespace hwfarm::run {
namespace {

// The key of the simulator target among the names taken: no board is named so.
const std::string kSimulatorKey = "@qemu";

// Board names, from what the client named: boards, board types, "qemu"
// (as kSimulatorKey).
Result<std::vector<std::string>> pick(const std::vector<std::string>& wanted, const lease::Lease& lease,
                                      const Fleet& fleet) {
  std::vector<std::string> present;
  for (const auto& b : lease.boards)
    if (!b.lost) present.push_back(b.name);
  if (wanted.empty()) {
    if (present.empty()) return Status::error(Code::invalid_argument, "lease " + lease.id + " has no present board");
    return present;
  }
  std::vector<std::string> out;
  std::set<std::string> taken;
  for (const auto& w : wanted) {
    if (std::find(present.begin(), present.end(), w) != present.end()) {
      if (!taken.insert(w).second) return Status::error(Code::invalid_argument, "board " + w + " is listed twice");
      out.push_back(w);
      continue;
    }
    if (w == kSimulatorTarget) {
      if (!taken.insert(kSimulatorKey).second)
        return Status::error(Code::invalid_argument, "the simulator target \"qemu\" is listed twice");
      out.push_back(kSimulatorKey);
      continue;
    }
    // A board type: its next board of the lease no earlier entry took.
    size_t of_type = 0;
    std::optional<std::string> next;
    for (const auto& name : present) {
      std::optional<BoardInfo> b = fleet.board(name);
      if (!b || b->type != w) continue;
      ++of_type;
      if (!next && !taken.count(name)) next = name;
    }
    if (!next) {
      bool in_lease = std::any_of(lease.boards.begin(), lease.boards.end(), [&](const auto& b) { return b.name == w; });
      if (in_lease) return Status::error(Code::invalid_argument, "board " + w + " of lease " + lease.id + " is lost");
      if (of_type == 0)
        return Status::error(Code::invalid_argument, "target " + w + " is neither a present board of lease " +
                                                         lease.id + ", a board type of it, nor \"qemu\"");
      return Status::error(Code::invalid_argument, "the targets name board type " + w + " more often than lease " +
                                                       lease.id + " holds boards of it (" + std::to_string(of_type) +
                                                       ")");
    }
    taken.insert(*next);
    out.push_back(*next);
  }
  return out;
}

} // namespace

Status check(const Spec& spec) {
  if (spec.images.empty()) return Status::error(Code::invalid_argument, "a run needs at least one image");
  if (spec.deadline_ms <= 0 || spec.deadline_ms > 24LL * 3600 * 1000)
    return Status::error(Code::invalid_argument, "deadline_s must be within 0 to 86400");
  bool golden = spec.reference == ReferenceKind::golden;
  for (const auto& img : spec.images) {
    if (golden && (img.golden_path.empty() || !img.reference_path.empty()))
      return Status::error(Code::invalid_argument,
                           "image " + img.name + ": a golden reference needs its golden file (and no reference_image)");
    if (!golden && !img.golden_path.empty())
      return Status::error(Code::invalid_argument, "image " + img.name + ": a golden file needs reference \"golden\"");
  }
  return Status::success();
}

Result<Resolved> resolveTargets(const Spec& spec, const lease::Lease& lease, const Fleet& fleet) {
  Result<std::vector<std::string>> picked = pick(spec.targets, lease, fleet);
  if (!picked) return picked.status();
  Resolved r;
  // Targets are named by board type: two of a type get _0 and _1; the
  // simulator target is "qemu", beside the reference's "qemu_ref".
  std::vector<std::string> types;
  bool simulator_target = false;
  for (const auto& name : *picked) {
    if (name == kSimulatorKey) {
      simulator_target = true;
      types.emplace_back(kSimulatorTarget);
      r.targets.push_back({"", "", BoardKind::simulated});
      continue;
    }
    std::optional<BoardInfo> b = fleet.board(name);
    if (!b) return Status::error(Code::invalid_argument, "board " + name + " is not in the configuration");
    types.push_back(b->type);
    if (r.sim_type.empty()) r.sim_type = b->type;
    r.targets.push_back({name, "", b->kind});
  }
  // A run of the simulator alone simulates the lease's first board type.
  if (r.sim_type.empty() && !lease.boards.empty())
    if (std::optional<BoardInfo> b = fleet.board(lease.boards.front().name)) r.sim_type = b->type;
  if (spec.reference == ReferenceKind::qemu || simulator_target) {
    std::optional<std::string> machine = fleet.simulator(r.sim_type);
    if (!machine)
      return Status::error(Code::invalid_argument,
                           "no reference simulator for board type " + r.sim_type +
                               ": add a [[reference]] for it to the configuration, or use reference \"none\"");
    r.sim_label = "qemu " + *machine;
  }
  std::optional<std::string> reference;
  if (spec.reference != ReferenceKind::none) reference = std::string(referenceName(spec.reference));
  RunNames names = runNames(types, reference);
  for (size_t i = 0; i < r.targets.size(); ++i) r.targets[i].name = names.targets[i];
  r.reference = names.reference;
  return r;
}

} // namespace hwfarm::run
