// Publishing a harness's results on a lease (results_commands.cpp): what
// `results publish` and `lease run --results` share.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "daemon/cli/session.h"

namespace hwfarm::cli {

struct PublishOptions {
  std::vector<std::string> files;     // JUnit XML or twister.json
  std::vector<std::string> artifacts; // files, or folders (every regular file beneath)
  std::string name = "results";
  std::string commit;
  std::string board;
};

// The most a publish sends: the archive is built in memory, and hwfarmd
// takes no more by default (runs.max_artifact_bytes).
inline constexpr uint64_t kMaxPublishBytes = uint64_t{1} << 30;

// Sends the files to lease `lease` and prints the run it made (--json: its
// record): its counts, its failing cases with their classes, "run ID:
// STATE (reason)"; its state in `*state` when given. A file named twice
// (the same canonical path, in `files` or among the artifacts) is sent
// once. kOk once published, whatever its verdict; kUsage for a file that
// cannot be read, or files that together pass kMaxPublishBytes (nothing is
// read nor sent then); else the daemon's refusal's exit code.
int publishResults(Session& s, const std::string& lease, const PublishOptions& o, std::string* state = nullptr);

// The paths `pattern` matches (glob(3)), sorted; none when none does.
std::vector<std::string> expandGlob(const std::string& pattern);

} // namespace hwfarm::cli
