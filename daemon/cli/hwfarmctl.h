// hwfarmctl: the client Jenkinsfiles and operators run.
#pragma once

#include <ostream>
#include <string>
#include <vector>

namespace hwfarm::cli {

// Exit codes, documented in docs/cli.md. `lease run` exits with its
// command's code instead, unless the lease itself failed.
enum ExitCode : int {
  kOk = 0,
  kApiError = 1,     // the daemon answered with an error not listed below
  kUsage = 2,        // bad command line
  kUnreachable = 3,  // no answer from the daemon
  kWaitTimeout = 4,  // no board within --wait (HTTP 408)
  kRefused = 5,      // the agent's tier does not serve this context (HTTP 409)
  kNoSuchBoard = 6,  // no configured board can ever match (HTTP 422)
  kAuth = 7,         // missing/invalid token or role (HTTP 401/403)
  kLeaseLost = 8,    // lease run: the lease ended while the command ran
  kInfrastructure = 9, // flash/power: the tool or simulator failed (HTTP 502); run: an infrastructure failure
  kTestFailed = 10,    // run: a test failed (the firmware, an output's accuracy)
  kCancelled = 11,     // run: cancelled (Ctrl-C, DELETE, the lease ended)
};

// Runs one hwfarmctl command; HWFARM_URL / HWFARM_TOKEN and the Jenkins
// variables come from the environment.
int runHwfarmctl(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

// Renders rows as a left-aligned table whose first row is the header.
std::string formatTable(const std::vector<std::vector<std::string>>& rows);

} // namespace hwfarm::cli
