// What a client asks a run to do (POST /v1/leases/{id}/runs, docs/runs.md):
// its images, how they spread over the targets, what they are held against.
// The routes build it from the request; the plan (plan.h) carries it out.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"
#include "daemon/core/run/record.h"
#include "daemon/core/run/thresholds.h"

namespace hwfarm::run {

struct ImageSpec {
  std::string name; // as the client named it (a file name, a manifest name)
  std::string path; // the image in the lease's image store
  // What the reference runs instead of `path` (its own build of the test,
  // for the simulator's machine); empty: the image itself.
  std::string reference_path;
  // With a golden reference: the outputs the reference "prints", as
  // result-protocol text (golden.h), in the store (<sha256>.golden).
  std::string golden_path;
};

struct Spec {
  std::vector<ImageSpec> images;
  Mode mode = Mode::shard;
  ReferenceKind reference = ReferenceKind::qemu;
  std::string suite;  // the suite's name (the record's and junit.xml's); empty: none
  std::string commit; // what the images were built from; empty: none
  // The targets, in order (empty: every present board of the lease). Each
  // is a board of the lease, a board type (the next board of the lease of
  // that type no earlier entry took: a type listed twice takes two boards),
  // or kSimulatorTarget (the reference simulator run as a target too).
  std::vector<std::string> targets;
  // Retry a target's infrastructure failure once, on another board of its
  // type swapped into the lease.
  bool retry = true;
  int64_t deadline_ms = 60000; // per image and target, from the power-on
  // How long a console (a board's, a simulator's) is still read after its
  // END: a record that follows fails the attempt ("record after END").
  int64_t drain_ms = 250;
  std::vector<ThresholdRule> thresholds;
  // Set by the daemon, never by a client: the bytes of artifacts the run
  // may write (withinQuota, artifacts.h; 0: no quota) and the config key
  // that set it, named in the reason of a run that passes it.
  uint64_t max_artifact_bytes = 0;
  std::string artifact_quota = "runs.max_artifact_bytes";
  // Set by the daemon: the simulator time the run may use, its references'
  // and its simulator targets' together (runs.max_simulator_s; 0: no
  // bound). A simulator is stopped when the run's time runs out, and one
  // not started yet does not start: those attempts fail the run's way.
  int64_t max_simulator_ms = 0;
  // Set by the daemon: the bytes of consoles, flash logs and outputs' values
  // the run may hold of attempts whose files are not written yet
  // (runs.max_run_memory_bytes; 0: no bound). Past it a target starts only
  // an image other targets began; when nothing can free memory the run
  // ends error (Plan).
  uint64_t max_run_memory_bytes = 0;
};

// The target that names the reference's simulator (Spec::targets).
inline constexpr std::string_view kSimulatorTarget = "qemu";

// Ok, or Code::invalid_argument saying what is wrong with `spec` on its
// own: no image, a deadline outside (0, 24 h], an image's golden file or
// reference image that does not go with the reference.
Status check(const Spec& spec);

} // namespace hwfarm::run
