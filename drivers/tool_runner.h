// Runs an external tool (flasher, power switch) as an argv vector, never
// through a shell, in its own process group, with a deadline that kills the
// whole group, so no grandchild outlives it. Output (stdout and stderr) goes
// to a log file; the result carries its tail.
//
// ToolResult is the runner's raw observation; toStatus() turns it into the
// Status the flasher and power drivers return.
//
// Blocking: call it off the event loop (DESIGN.md: work that blocks runs
// off-loop and posts its result back).
#pragma once

#include <chrono>
#include <ios>
#include <string>
#include <vector>

#include "common/status.h"

namespace hwfarm::drivers {

struct ToolResult {
  bool started = false;  // false: the tool could not be run at all
  int exit_code = -1;    // when it exited
  int signal = 0;        // when a signal ended it
  bool timed_out = false;
  double seconds = 0;
  std::string output_tail; // the last few lines of its output
  Status start_error;      // why it could not be started (not ok iff !started)

  bool ok() const { return started && !timed_out && signal == 0 && exit_code == 0; }
  // "exited with status 2", "killed after the 60 s timeout", "not found: ..."
  std::string describe() const;
  // Ok when ok(); otherwise an infrastructure failure whose message is
  // `prefix` + describe() (+ "; output: " and the tail) and whose evidence
  // holds the exit status or signal and the output tail. Codes: timeout
  // past the deadline, the start error's code when it did not start,
  // io_error when it failed.
  Status toStatus(const std::string& prefix = "") const;
};

struct ToolOptions {
  std::chrono::milliseconds timeout{120000};
  std::chrono::milliseconds kill_grace{2000}; // SIGTERM to SIGKILL
  std::string log_path;                        // appended to; empty: discarded
  size_t tail_bytes = 2048;
  std::string what; // what the tool is ("flasher of board b1"), see SpawnOptions::what
};

ToolResult runTool(const std::vector<std::string>& argv, const ToolOptions& options);

// The last `bytes` of what was written to the file `path` after offset
// `from`; when the limit cuts a line, that partial line is dropped. "" when
// it cannot be read.
std::string outputTail(const std::string& path, size_t bytes, std::streamoff from = 0);

} // namespace hwfarm::drivers
