// What every hwfarmctl command shares: the daemon connection, output
// settings, and the mapping of HTTP answers to exit codes.
#pragma once

#include <optional>
#include <ostream>
#include <string>

#include <boost/json/value.hpp>

#include "daemon/cli/args.h"
#include "daemon/cli/http_client.h"
#include "daemon/cli/hwfarmctl.h"

namespace hwfarm::cli {

struct Session {
  std::string url;
  std::string token;
  bool json = false;
  bool quiet = false;
  std::ostream& out;
  std::ostream& err;
  std::string cacert; // https:// URLs: the CA file (--cacert, $HWFARM_CACERT); empty: the system's CA store
  // Ends call()s in flight from another thread (they return nothing, quietly).
  Cancellation* cancellation = nullptr;

  // One request. On success (2xx) returns the parsed body; otherwise prints
  // the error and sets `code` to the matching exit code. Transport failures
  // are retried `retries` times (with the same body, so an idempotency key
  // makes a retried acquire safe), after `backoff_s`, doubling.
  std::optional<boost::json::value> call(const std::string& method, const std::string& target,
                                         const std::string& body, int* code, double timeout_s = 30,
                                         int retries = 0, int* status = nullptr,
                                         const std::string& content_type = "application/json");
};

std::string text(const boost::json::value& v);
// The lease or run an id argument names: a whole id (32 hex digits; "run-"
// and 16) is taken as it is, anything else as the beginning of one, looked
// up in GET /v1/leases?all=1 (GET /v1/runs): the one id it begins, else an
// error printed (exit 1): none begins so, or several do (listed). A run's
// prefix may leave out "run-".
int resolveLease(Session& s, const std::string& arg, std::string* id);
int resolveRun(Session& s, const std::string& arg, std::string* id);
// `text` percent-encoded for a query value (unreserved characters stay).
std::string percentEncode(const std::string& text);
// Reads a local file (a regular file) into `data`; false with `error`
// ("cannot read WHAT PATH: why"). readImage: WHAT is "image".
bool readLocalFile(const std::string& path, const std::string& what, std::string* data, std::string* error);
inline bool readImage(const std::string& path, std::string* data, std::string* error) {
  return readLocalFile(path, "image", data, error);
}
std::string env(const char* name, const std::string& fallback = "");
// GET `path` and print it with `print` (--json: the daemon's answer).
int simpleGet(Session& s, const std::string& path, int (*print)(const boost::json::value&, std::ostream&));

// The commands of the table (command_table.cpp), by file. Each gets the
// arguments the table's parser accepted and returns the exit code.
// hwfarmctl.cpp
int statusCommand(Session& s, const Args& a);
int boardsCommand(Session& s, const Args& a);
int queueCommand(Session& s, const Args& a);
int flashCommand(Session& s, const Args& a);
int powerCommand(Session& s, const Args& a);
int consoleCommand(Session& s, const Args& a);
int tokenNewCommand(Session& s, const Args& a);
// board_commands.cpp
int boardShowCommand(Session& s, const Args& a);
int boardCheckCommand(Session& s, const Args& a);
int boardMaintenanceCommand(Session& s, const Args& a);
int boardResumeCommand(Session& s, const Args& a);
// lease_commands.cpp
int leaseAcquireCommand(Session& s, const Args& a);
int leaseRunCommand(Session& s, const Args& a);
int leaseRenewCommand(Session& s, const Args& a);
int leaseReleaseCommand(Session& s, const Args& a);
int leaseShowCommand(Session& s, const Args& a);
int leaseListCommand(Session& s, const Args& a);
// ci_commands.cpp: should-run exits 0 (run) or 1 (do not run).
int leaseExportCommand(Session& s, const Args& a);
int shouldRunCommand(Session& s, const Args& a);
int jenkinsLabelsCommand(Session& s, const Args& a);
// run_command.cpp, run_commands.cpp
int runCommand(Session& s, const Args& a);
int runsCommand(Session& s, const Args& a);
int runShowCommand(Session& s, const Args& a);
int runWaitCommand(Session& s, const Args& a);
int runCancelCommand(Session& s, const Args& a);
int runFetchCommand(Session& s, const Args& a);
// results_commands.cpp
int resultsPublishCommand(Session& s, const Args& a);
// upload_commands.cpp
int uploadsCommand(Session& s, const Args& a);
int uploadRetryCommand(Session& s, const Args& a);
// tier_commands.cpp
int slaCommand(Session& s, const Args& a);
int tierShowCommand(Session& s, const Args& a);
int tierPinCommand(Session& s, const Args& a);
int tierUnpinCommand(Session& s, const Args& a);
// help.cpp
int helpCommand(Session& s, const Args& a);
int generateDocsCommand(Session& s, const Args& a);
int generateCompletionCommand(Session& s, const Args& a);

} // namespace hwfarm::cli
