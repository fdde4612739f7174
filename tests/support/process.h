// Test support: real child processes (hwfarmd, hwfarmctl) with their output
// captured to files, and temporary directories.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace hwfarm::test {

// A fresh directory under $TMPDIR (or /tmp), removed with its contents on
// destruction.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::string& path() const { return path_; }
  std::string file(const std::string& name) const { return path_ + "/" + name; }
  // Writes `text` to file(name) and returns its path.
  std::string write(const std::string& name, const std::string& text) const;
  // Writes a shell script ("#!/bin/sh" and `body`) to file(name), executable,
  // and returns its path. Throws when it cannot be made executable.
  std::string script(const std::string& name, const std::string& body) const;

 private:
  std::string path_;
};

std::string readFile(const std::string& path);
// How many times `what` occurs in `text` (overlapping ones too).
size_t occurrences(const std::string& text, const std::string& what);

// Running, not merely a zombie waiting for a reaper that may never come.
bool processAlive(pid_t pid);

struct ExitStatus {
  bool exited = false; // false: killed by a signal
  int code = 0;        // exit code, or the signal number
};

// A child process with stdout and stderr appended to files. It is killed
// (SIGKILL) when the thread that started it ends: start it on the test's
// own thread.
class Process {
 public:
  // Starts argv[0] (a path) with the current environment plus `env`
  // (a value of "" unsets the variable). Throws on fork/exec failure.
  Process(std::vector<std::string> argv, const std::string& stdout_path, const std::string& stderr_path,
          const std::map<std::string, std::string>& env = {}, const std::string& cwd = "");
  ~Process(); // SIGKILLs and reaps a child still running
  Process(const Process&) = delete;
  Process& operator=(const Process&) = delete;

  pid_t pid() const { return pid_; }
  void signal(int sig) const;
  // Waits for the child to end; nothing if it is still running at the deadline.
  std::optional<ExitStatus> wait(std::chrono::milliseconds timeout);
  bool running();

 private:
  pid_t pid_ = -1;
  std::optional<ExitStatus> status_;
};

// A pseudo-terminal in raw mode (what is written arrives as it is, no CR
// added before LF): give name() as a child's stdout or stderr path to see
// what a person at a terminal would. Throws when no pty can be opened.
class Terminal {
 public:
  Terminal();
  ~Terminal();
  Terminal(const Terminal&) = delete;
  Terminal& operator=(const Terminal&) = delete;

  const std::string& name() const { return name_; }
  // What was written to it so far (reads what is waiting first).
  const std::string& screen();
  // Reads until the screen holds `needle` or `timeout` passed (test code
  // only: a child's output is its own, not the daemon's timers). True when
  // it holds it.
  bool waitFor(const std::string& needle, std::chrono::milliseconds timeout);

 private:
  int master_ = -1, slave_ = -1;
  std::string name_;
  std::string screen_;
};

// Polls `path` until its contents contain `needle` (test code only: the
// daemon itself never polls). Returns the contents, or nothing at timeout.
std::optional<std::string> waitForText(const std::string& path, const std::string& needle,
                                       std::chrono::milliseconds timeout);

// Live processes (not this one, not zombies) whose command line, working
// directory or environment mentions `path` (a test's temp dir: what the
// test started, and what those started), each "pid N (comm): command".
std::vector<std::string> processesUnder(const std::string& path);
// Waits until processesUnder(path) is empty, at most `timeout` (test code
// only: a reaper works asynchronously). Returns what is left.
std::vector<std::string> waitForNoProcessUnder(const std::string& path, std::chrono::milliseconds timeout);

// Whether a client of this network namespace is connected to a sandboxed
// QEMU's UART socket whose path is under `dir` and ends with `name`: the
// socket listens in the sandbox's namespace, and the kernel lists the
// accepted end, under the same path, in the client's.
bool sandboxSocketConnected(const std::string& dir, const std::string& name);

// Runs a command to completion, capturing stdout and stderr.
struct CommandResult {
  ExitStatus status;
  std::string out;
  std::string err;
};
CommandResult runCommand(const std::vector<std::string>& argv, const std::map<std::string, std::string>& env = {},
                         std::chrono::milliseconds timeout = std::chrono::seconds(30));

} // namespace hwfarm::test
