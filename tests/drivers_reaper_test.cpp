// No child outlives the process that started it (drivers/reaper.h): a
// parent that starts children the way hwfarmd does (tests/fakes/
// child_spawner.cpp) dies in every phase of a simulator's and a tool's life,
// in every way a process dies; nothing it started may remain. And a
// restarted owner stops only what an earlier instance left.
#include <catch2/catch.hpp>

#include <signal.h>
#include <sys/stat.h>

#include <algorithm>
#include <filesystem>
#include <thread>

#include "drivers/process_table.h"
#include "drivers/reaper.h"
#include "drivers/spawn.h"
#include "tests/support/process.h"
#include "tests/support/firmware.h"

using namespace hwfarm::drivers;
using namespace hwfarm::test;
using namespace std::chrono_literals;

namespace {

std::string lines(const std::vector<std::string>& list) {
  std::string out;
  for (const auto& l : list) out += l + "\n";
  return out;
}

size_t count(const std::vector<std::string>& processes, const std::string& needle) {
  return static_cast<size_t>(std::count_if(processes.begin(), processes.end(), [&](const std::string& p) {
    return p.find(needle) != std::string::npos;
  }));
}

struct Death {
  std::string how;   // child_spawner's DEATH
  int signal;        // sent by the test (0: it dies by itself)
  bool exited;       // how it ends: an exit code, or a signal
  int code;
};

const Death kDeaths[] = {
    {"wait", SIGKILL, false, SIGKILL},
    {"wait", SIGABRT, false, SIGABRT},
    {"throw", 0, false, SIGABRT}, // an exception escaping main aborts
    {"exit", 0, true, 1},         // a sanitizer's report ends the process with _exit(1)
};

// Starts child_spawner up to `phase`, lets it die as `death` says, and
// returns what is left of what it started.
std::vector<std::string> dieInPhase(const TempDir& dir, const std::string& phase, const Death& death,
                                    const std::string& variant, size_t expected, const std::string& child) {
  if (phase == "qemu-starting") {
    std::string gate = dir.write("qemu-gate", "#!/bin/sh\ntouch " + dir.file("qemu/sock/started") +
                                                  "\nwhile [ ! -e " + dir.file("qemu/sock/gate") +
                                                  " ]; do sleep 0.02; done\nexec qemu-system-arm \"$@\"\n");
    REQUIRE(::chmod(gate.c_str(), 0755) == 0);
  }
  Process parent({CHILD_SPAWNER_PATH, dir.path(), phase, death.how, firmware(variant)}, dir.file("out"),
                 dir.file("err"), {}, dir.path());
  // Given a parent whose child reached `phase`,
  INFO("child_spawner's stderr: " << readFile(dir.file("err")));
  REQUIRE((death.how != "wait" || waitForText(dir.file("out"), "ready\n", 60s)));
  // (a tool started through a shell or setsid may still be between its
  // fork and its exec when "ready" comes: what runs is waited for)
  std::vector<std::string> running = processesUnder(dir.path());
  for (auto until = std::chrono::steady_clock::now() + 10s;
       death.how == "wait" && count(running, child) < expected && std::chrono::steady_clock::now() < until;) {
    std::this_thread::sleep_for(20ms);
    running = processesUnder(dir.path());
  }
  INFO("running:\n" << lines(running));
  if (death.how == "wait") REQUIRE(count(running, child) >= expected);
  // when the parent dies,
  if (death.signal) parent.signal(death.signal);
  auto ended = parent.wait(60s);
  REQUIRE(ended);
  REQUIRE(readFile(dir.file("out")) == "ready\n");
  REQUIRE(ended->exited == death.exited);
  REQUIRE(ended->code == death.code);
  // nothing it started is left, its reaper included,
  std::vector<std::string> left = waitForNoProcessUnder(dir.path(), 15s);
  // and its reaper said what it stopped.
  std::string said = readFile(dir.file("err"));
  INFO("stderr:\n" << said);
  REQUIRE(said.find("hwfarmd-reaper: pid " + std::to_string(parent.pid()) + " ended: stopped pid ") !=
          std::string::npos);
  return left;
}

void requireNoneLeft(const std::string& phase, const std::string& variant, size_t expected, const std::string& child,
                     const std::string& what) {
  for (const Death& death : kDeaths) {
    DYNAMIC_SECTION(phase << ", parent ends by " << death.how << " " << death.signal) {
      TempDir dir;
      std::vector<std::string> left = dieInPhase(dir, phase, death, variant, expected, child);
      INFO("left:\n" << lines(left));
      REQUIRE(left.empty());
      REQUIRE(readFile(dir.file("err")).find(" (" + what + "): ") != std::string::npos);
    }
  }
}

} // namespace

TEST_CASE("a tool started from an ended thread, through a shell, runs on and dies with its parent") {
  // The tool and its three children: in the background, in a session of
  // its own, and without environment (no marks: caught as a member of the
  // tool's process group).
  requireNoneLeft("tools", "pass", 4, "sleep 300", "a test tool");
}

TEST_CASE("a simulator whose sandbox is being set up dies with its parent") {
  requireNoneLeft("qemu-starting", "hang", 1, "qemu-gate", "QEMU simulator sim");
}

TEST_CASE("a simulator waiting for its console dies with its parent") {
  requireNoneLeft("qemu-waiting", "hang", 1, "qemu-system-arm", "QEMU simulator sim");
}

TEST_CASE("a simulator running firmware dies with its parent") {
  requireNoneLeft("qemu-running", "hang", 1, "qemu-system-arm", "QEMU simulator sim");
}

TEST_CASE("a simulator whose firmware ended dies with its parent") {
  requireNoneLeft("qemu-ended", "idle", 1, "qemu-system-arm", "QEMU simulator sim");
}

namespace {

// Waits (up to 5 s) until process `pid` runs /bin/sleep: before its exec
// it is a copy of this test, without the environment that marks it.
void waitForSleep(pid_t pid) {
  for (int i = 0; i < 500; ++i) {
    if (auto stat = readProcessStat(pid); stat && stat->comm == "sleep") return;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  FAIL("process " << pid << " did not exec /bin/sleep within 5 s");
}

} // namespace

TEST_CASE("a restarted owner stops only what an earlier instance left") {
  TempDir dir;
  std::string owner = dir.file("state");
  // Given a process an earlier instance on the same state directory left,
  Process left({"/bin/sleep", "300"}, dir.file("left.out"), dir.file("left.err"),
               {{"HWFARM_OWNER", owner}, {"HWFARM_INSTANCE", "1.2"}, {"HWFARM_CHILD", "flasher of board b1"}});
  // one of another state directory's, one of no daemon's (only this test's),
  Process other({"/bin/sleep", "300"}, dir.file("other.out"), dir.file("other.err"),
                {{"HWFARM_OWNER", owner + "2"}, {"HWFARM_INSTANCE", "1.2"}});
  Process plain({"/bin/sleep", "300"}, dir.file("plain.out"), dir.file("plain.err"));
  for (pid_t pid : {left.pid(), other.pid(), plain.pid()}) waitForSleep(pid);
  // and one this instance started,
  setChildOwner(owner);
  SpawnOptions o;
  o.argv = {"/bin/sleep", "300"};
  o.what = "a current child";
  auto mine = spawnProcess(o);
  REQUIRE(mine);
  // stopping leftovers stops the earlier instance's alone,
  std::vector<StoppedProcess> stopped = stopLeftovers(owner + "/", 5s);
  REQUIRE(stopped.size() == 1);
  REQUIRE(stopped[0].pid == left.pid());
  REQUIRE(stopped[0].what == "flasher of board b1");
  REQUIRE(stopped[0].command == "/bin/sleep 300");
  auto status = left.wait(5s);
  REQUIRE(status);
  REQUIRE(status->code == SIGKILL);
  REQUIRE(other.running());
  REQUIRE(plain.running());
  REQUIRE(processAlive(*mine));
  ::kill(*mine, SIGKILL);
  killGroupAndReap(*mine);
  setChildOwner("");
}

TEST_CASE("a child carries its parent's instance after its ancestors', and its parent's owner") {
  TempDir dir;
  setChildOwner(dir.file("state"));
  ::setenv("HWFARM_INSTANCE", "1.2", 1);   // as if this process were itself some daemon's child
  ::setenv("HWFARM_OWNER", "/elsewhere", 1); // of a daemon on another state directory
  SpawnOptions o;
  o.argv = {"/bin/sleep", "300"};
  o.what = "flasher of board b1";
  auto child = spawnProcess(o);
  ::unsetenv("HWFARM_INSTANCE");
  ::unsetenv("HWFARM_OWNER");
  setChildOwner("");
  REQUIRE(child);
  std::vector<std::string> env = processEnvironment(*child);
  ::kill(*child, SIGKILL);
  killGroupAndReap(*child);
  auto marked = [&](const std::string& key) {
    return std::count_if(env.begin(), env.end(), [&](const std::string& e) { return e.rfind(key + "=", 0) == 0; });
  };
  REQUIRE(marked("HWFARM_INSTANCE") == 1);
  REQUIRE(std::count(env.begin(), env.end(), "HWFARM_INSTANCE=1.2:" + instanceId()) == 1);
  REQUIRE(markedWithInstance(env, "1.2"));
  REQUIRE(markedWithInstance(env, instanceId()));
  REQUIRE_FALSE(markedWithInstance(env, "1.23"));
  REQUIRE(marked("HWFARM_OWNER") == 1);
  REQUIRE(std::count(env.begin(), env.end(), "HWFARM_OWNER=" + dir.file("state")) == 1);
  REQUIRE(std::count(env.begin(), env.end(), "HWFARM_CHILD=flasher of board b1") == 1);
}

TEST_CASE("a process is held by its pid and start time, never by a pid alone") {
  TempDir dir;
  Process p({"/bin/sleep", "300"}, dir.file("out"), dir.file("err"));
  auto stat = readProcessStat(p.pid());
  REQUIRE(stat);
  // Given a process, a handle with another start time is not it,
  REQUIRE_FALSE(ProcessHandle::open(p.pid(), stat->start_time + 1));
  auto handle = ProcessHandle::open(p.pid(), stat->start_time);
  REQUIRE(handle);
  REQUIRE(handle->alive());
  // and once it has ended (a zombie, then reaped) the handle signals nothing.
  p.signal(SIGKILL);
  REQUIRE(p.wait(5s));
  REQUIRE_FALSE(handle->alive());
  REQUIRE_FALSE(handle->signal(SIGKILL));
  REQUIRE_FALSE(ProcessHandle::open(p.pid(), stat->start_time));
}
