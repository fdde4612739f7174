// Publishing a harness's results on a lease (results_commands.cpp): what
// `results publish` and `lease run --results` share.
#pragma once

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

// Sends the files to lease `lease` and prints the run it made (--json: its
// record): its counts, its failing cases with their classes, "run ID:
// STATE (reason)". kOk once published, whatever its verdict; kUsage for a
// file that cannot be read; else the daemon's refusal's exit code.
int publishResults(Session& s, const std::string& lease, const PublishOptions& o);

// The paths `pattern` matches (glob(3)), sorted; none when none does.
std::vector<std::string> expandGlob(const std::string& pattern);

} // namespace hwfarm::cli
