// What a run leaves in its directory (docs/runs.md, "Artifacts"), rendered
// from its attempts: traces, flash logs, outputs as .npy, golden_results per
// target, the accuracy overlay (golden_results.json, nodedata/), junit.xml. The one place that says what an artifact is; the run
// directory (services/run_dir.h) writes them and summary.json. Pure.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "daemon/core/run/protocol.h"
#include "daemon/core/run/report.h"

namespace hwfarm::run {

struct ArtifactFile {
  std::string path; // relative to the run's directory
  std::string bytes;
};

// What one attempt left behind, by reference (the plan holds it).
struct AttemptOutput {
  std::string_view image;  // artifact names
  std::string_view target;
  bool flashed = false;    // a board's: it has a flash log
  bool superseded = false; // retried: its files are "<target>__attempt<n>", its verdict not counted
  const std::string* console = nullptr;
  const std::string* flash_log = nullptr;
  const ParseResult* parsed = nullptr;
  const TargetReport* report = nullptr; // a target's verdict, nullptr for the reference
};

// The files of a run named `run_name` (its suite, else its id), in the
// order of its attempts, then golden_results per target, the accuracy
// overlay (overlay.h: golden_results.json over `targets`, the run's target
// names in order and each once, and node data per image and target) and
// junit.xml (the counted attempts' verdicts); `by_image`: golden_results
// keys carry the image (a run of several images).
std::vector<ArtifactFile> artifactFiles(std::string_view run_name, const std::vector<AttemptOutput>& attempts,
                                        const std::vector<std::string>& targets, bool by_image);

} // namespace hwfarm::run
