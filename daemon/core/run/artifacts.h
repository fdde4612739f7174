// What a run leaves in its directory (docs/runs.md, "Artifacts"), rendered
// from its attempts: traces, flash logs, outputs as .npy, golden_results per
// target, the accuracy overlay (golden_results.json, nodedata/), junit.xml. The one place that says what an artifact is; the run
// directory (services/run_dir.h) writes them and summary.json. Pure.
#pragma once

#include <cstdint>
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

// The files of attempts, in their order: traces, flash logs, outputs. The
// attempts of an image come together (a superseded attempt's files are
// named by its place among its image's attempts on its target).
std::vector<ArtifactFile> attemptFiles(const std::vector<AttemptOutput>& attempts);
// The files of a run named `run_name` (its suite, else its id) of its
// counted attempts' verdicts `reports`: golden_results per target, the
// accuracy overlay (overlay.h: golden_results.json over `targets`, the
// run's target names in order and each once, and node data per image and
// target) and junit.xml; `by_image`: golden_results keys carry the image
// (a run of several images).
std::vector<ArtifactFile> summaryFiles(std::string_view run_name, const std::vector<const TargetReport*>& reports,
                                       const std::vector<std::string>& targets, bool by_image);
// What a run's quota of bytes keeps of its files.
struct Kept {
  std::vector<ArtifactFile> files; // junit.xml first, then in their order
  std::vector<std::string> left_out; // the paths of the files that did not fit, in order
  uint64_t bytes = 0;  // of `files`
  uint64_t wanted = 0; // of all
};
// Keeps junit.xml first (what CI reads), then each file in order that
// still fits within `quota` bytes (0: no quota, all are kept).
Kept withinQuota(std::vector<ArtifactFile> files, uint64_t quota);

// The reason of a run that `kept` left files out of: "its artifacts (W
// bytes) exceed NAME (Q bytes): K file(s) kept (B bytes), N left out: a,
// b, c and M more".
std::string quotaReason(const Kept& kept, uint64_t quota, std::string_view name);
// The same with `earlier` files of `earlier_bytes` written before (each
// image's files as it was judged) counted among those kept.
std::string quotaReason(const Kept& kept, uint64_t quota, std::string_view name, size_t earlier,
                        uint64_t earlier_bytes);

} // namespace hwfarm::run
