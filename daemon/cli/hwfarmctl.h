// hwfarmctl: the client Jenkinsfiles and operators run.
#pragma once

#include <ostream>
#include <string>
#include <vector>

namespace hwfarm::cli {

// Exit codes, documented in README.md and docs/cli.md.
enum ExitCode : int {
  kOk = 0,
  kApiError = 1,    // the daemon answered with an error
  kUsage = 2,       // bad command line
  kUnreachable = 3, // no answer from the daemon
};

// Runs one hwfarmctl command. `env` supplies HWFARM_URL / HWFARM_TOKEN.
int runHwfarmctl(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

// Renders rows as a left-aligned table with a header row.
std::string formatTable(const std::vector<std::vector<std::string>>& rows);

} // namespace hwfarm::cli
