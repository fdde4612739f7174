// What every hwfarmctl command shares: the daemon connection, output
// settings, and the mapping of HTTP answers to exit codes.
#pragma once

#include <optional>
#include <ostream>
#include <string>

#include <boost/json/value.hpp>

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
// `text` percent-encoded for a query value (unreserved characters stay).
std::string percentEncode(const std::string& text);
// Reads a local image file (a regular file) into `data`; false with `error`.
bool readImage(const std::string& path, std::string* data, std::string* error);
std::string env(const char* name, const std::string& fallback = "");
// GET `path` and print it with `print` (--json: the daemon's answer).
int simpleGet(Session& s, const std::string& path, int (*print)(const boost::json::value&, std::ostream&));

// hwfarmctl should-run, jenkins labels, lease export (ci_commands.cpp).
// should-run exits 0 (run) or 1 (do not run); export writes to `out_path`
// ("" or "-": stdout).
int shouldRunCommand(Session& s, const std::vector<std::string>& args);
int jenkinsCommand(Session& s, const std::vector<std::string>& args);
int exportLease(Session& s, const std::string& format, const std::string& lease, const std::string& out_path);
// Lease commands (lease_commands.cpp).
int leaseCommand(Session& s, const std::vector<std::string>& args);
// hwfarmctl run (run_command.cpp).
int runCommand(Session& s, const std::vector<std::string>& args);
// hwfarmctl uploads, hwfarmctl upload retry RUN (upload_commands.cpp).
int uploadsCommand(Session& s, const std::vector<std::string>& args);
int uploadCommand(Session& s, const std::vector<std::string>& args);
// hwfarmctl sla, tier (tier_commands.cpp).
int slaCommand(Session& s, const std::vector<std::string>& args);
int tierCommand(Session& s, const std::vector<std::string>& args);

} // namespace hwfarm::cli
