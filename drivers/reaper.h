// No process outlives hwfarmd: every child it started (QEMU's sandbox,
// flashers, power commands) and everything those started dies with it,
// however hwfarmd dies (SIGKILL, an abort, a sanitizer's abort, an exception
// escaping main), whichever thread or intermediate process started it.
//
// Marks: spawnProcess gives every child these environment variables, which
// its descendants inherit (QEMU's sandbox clears its environment and sets
// them again):
//   HWFARM_INSTANCE=<id>:<id>...        the instances ("<pid>.<start time>")
//                                       of the process that started it and
//                                       of that process's own marked
//                                       ancestors, nearest last
//   HWFARM_OWNER=<state directory>      the daemon's state directory, once set
//   HWFARM_CHILD=<what it is>           "QEMU simulator sim-0", "flasher of board b1"
// (A test's hwfarmd is marked with the test's instance, so the test's
// reaper finds the daemon's children too.)
//
// The reaper: a small process forked at start-up, before any thread, that
// holds the read end of a pipe only its parent holds the write end of. When
// the parent dies, however it dies, the kernel closes that end; the reaper
// then SIGKILLs every process whose instances include the parent's, and
// every member of the process groups they lead, until none is left, and
// exits.
// It ignores SIGTERM, SIGINT and SIGHUP and has a process group of its own:
// it ends when its parent has ended, never before.
//
// Leftovers: processes marked with the daemon's state directory but another
// instance are what an earlier daemon left (its reaper was killed with it).
// A restarted daemon stops them before it uses any board (stopLeftovers).
//
// Processes are identified by their marks and signalled through pidfds
// opened while their start time was checked (drivers/process_table.h), so
// a recycled pid is never killed. A descendant that clears its environment
// and leaves its process group (a tool that daemonizes with `env -i`)
// escapes; under systemd the service's cgroup still catches it
// (KillMode=control-group).
#pragma once

#include <sys/types.h>

#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include "common/status.h"

namespace hwfarm::drivers {

inline constexpr const char* kInstanceMark = "HWFARM_INSTANCE";
inline constexpr const char* kOwnerMark = "HWFARM_OWNER";
inline constexpr const char* kChildMark = "HWFARM_CHILD";

// This process's instance, "<pid>.<start time>": unique on this boot.
const std::string& instanceId();

// Starts this process's reaper and returns its pid. REQUIRES: no other
// thread exists yet (it forks a process that keeps running C++ code), so
// call it first thing in main. Fails (and starts nothing) when threads
// exist or fork fails; a second call returns the first reaper.
Result<pid_t> startReaper();

// At a graceful exit: lets the reaper sweep now and waits for it to exit,
// at most `timeout`. False when it did not exit in time (or none ran).
bool stopReaper(std::chrono::milliseconds timeout);

// Marks children started from now on with the daemon's state directory
// (made absolute), so that a restarted daemon finds what they left. ""
// marks them with none.
void setChildOwner(const std::string& state_dir);

// The marks a child started now gets, "KEY=VALUE" each, with `what`: this
// process's instance after those it inherited.
std::vector<std::string> childMarks(const std::string& what);
// This process's environment with childMarks instead of the marks it
// inherited.
std::vector<std::string> childEnvironment(const std::string& what);

// Whether an environment (processEnvironment) is marked with `instance`
// among its instances, or with the state directory `owner` (absolute, as
// setChildOwner makes it).
bool markedWithInstance(const std::vector<std::string>& environment, const std::string& instance);
bool markedWithOwner(const std::vector<std::string>& environment, const std::string& owner);

struct StoppedProcess {
  pid_t pid = 0;
  std::string what;    // its HWFARM_CHILD, or "in the process group of ..." for an unmarked member
  std::string command; // its command line
};

// SIGKILLs every live process but this one whose environment `match`es,
// and every other member of the process groups such processes lead; scans
// again until a scan finds none or `timeout` passes. Returns each process
// it signalled, once.
using EnvironmentMatch = std::function<bool(const std::vector<std::string>& environment)>;
std::vector<StoppedProcess> killMarked(const EnvironmentMatch& match, std::chrono::milliseconds timeout);

// What an earlier daemon on `state_dir` left running (marked with it, but
// not with this instance), stopped. Call it before using any board.
std::vector<StoppedProcess> stopLeftovers(const std::string& state_dir, std::chrono::milliseconds timeout);

} // namespace hwfarm::drivers
