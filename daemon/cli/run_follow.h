// A run after it started (hwfarmctl run, run wait, run fetch, run show):
// followed to its end, its artifacts fetched, its verdict as an exit code.
#pragma once

#include <optional>
#include <string>

#include <boost/json/object.hpp>

#include "daemon/cli/session.h"

namespace hwfarm::cli {

// The exit code of a run in `state`: 0 passed, 10 failed, 11 cancelled, 9
// error, interrupted or anything else.
int verdictCode(const std::string& state);

// The string field `key` of a record, or "".
std::string runField(const boost::json::object& o, const char* key);

// "hwfarm_pass on mps2_an385_0 (sim-0): fail: ramp: FAIL ..." on stdout.
void printAttempt(Session& s, const boost::json::object& attempt);

// Follows run `id` (its event stream, else its record) to its end,
// printing each attempt once judged, with a live display on a terminal;
// then fetches its artifacts into `out`, prints "run ID: STATE (reason)"
// (--json: the record) and returns the verdict's exit code. SIGINT or
// SIGTERM meanwhile: with `cancel` the run is cancelled and followed to its
// end; without, the following stops (the run goes on) and it returns 128 +
// the signal.
int finishRun(Session& s, const std::string& id, bool cancel, const std::optional<std::string>& out);

// The end of a run the caller has followed or read: fetches its artifacts
// into `out` if given, prints "run ID: STATE (reason)" (--json: the record)
// and returns the verdict's exit code (or the fetch's failure, when the run
// passed).
int endRun(Session& s, const std::string& id, const boost::json::object& run, const std::optional<std::string>& out);

// Writes every artifact the record `run` lists into `out`, then prints
// "artifacts: N file(s) in DIR"; a file that cannot be fetched (HTTP error,
// local write error) is named on stderr and the others are still fetched;
// kOk, kApiError when any was missing, kUnreachable when the daemon was.
int fetchArtifacts(Session& s, const std::string& id, const boost::json::object& run, const std::string& out);

} // namespace hwfarm::cli
