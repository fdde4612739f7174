// The archive a harness's results come in (POST /v1/leases/{id}/results,
// docs/harness-results.md): a tar of results/ files (JUnit XML,
// twister.json) and artifacts/ files. Read twice off the event loop: once
// to check every name and parse every results file (nothing is written
// when anything is wrong), once to write its files into the run's
// directory. Blocking.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "common/status.h"
#include "daemon/core/results/external_run.h"
#include "daemon/services/run_dir.h"

namespace hwfarm {

// The most results files an archive may hold.
constexpr size_t kMaxResultsFiles = 64;

struct CheckedArchive {
  explicit CheckedArchive(std::vector<results::InfraRule> rules) : judge(std::move(rules)) {}
  results::ExternalJudge judge;   // every results file, judged as read (one file's cases held at a time)
  std::vector<std::string> files; // every file's path, sorted
  uint64_t bytes = 0;             // of all files
};

// Reads the archive at `path`: each member named "results/NAME" or
// "artifacts/PATH" (plain paths, run_dir.h), none twice nor both a file
// and a folder, at least one results file and at most kMaxResultsFiles,
// all at most `quota` bytes together (Code::too_large naming
// `quota_name`); each results file judged by `rules`. Code::invalid_argument saying which member and why, or
// for a results file "FILE:LINE:COL: what" (harness_results.h).
Result<CheckedArchive> checkResultsArchive(const std::string& path, uint64_t quota, const std::string& quota_name,
                                           std::vector<results::InfraRule> rules);

// Writes the archive's files into run `id`'s directory, each synced and
// renamed into place, the folders synced at the end; leaves `reserve`
// bytes free (Code::no_space). On failure the caller removes the directory.
Status writeResultsArchive(const std::string& path, const RunDir& dir, const std::string& id, uint64_t reserve);

} // namespace hwfarm
