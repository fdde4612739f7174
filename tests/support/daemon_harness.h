// Test support: a real hwfarmd process on its own state directory and a free
// loopback port, with its log captured.
#pragma once

#include <memory>

#include "daemon/cli/http_client.h"
#include "tests/support/process.h"

namespace hwfarm::test {

// A minimal valid fleet: one worker with `boards` QEMU boards, listening on a
// free loopback port, state under `state_dir`.
std::string qemuFleet(const std::string& state_dir, int boards, const std::string& agent_extra = "");

// Writes a tokens file (mode 0600) with one token per role, named after the
// role, whose secret is "secret-<role>"; returns its path.
std::string writeTokens(const TempDir& dir);

// qemuFleet with writeTokens' tokens and no anonymous access; state under
// <dir>/<state>.
std::string tokenFleet(const TempDir& dir, int boards, const std::string& agent_extra = "",
                       const std::string& state = "state");

// A socket connected to the daemon at `url` ("http://HOST:PORT" or
// "unix:PATH"), close-on-exec, with a 10 s receive timeout, for requests no
// client library sends; -1 when the connect fails. `receive_buffer` > 0
// shrinks SO_RCVBUF first (a client that reads slowly).
int connectRaw(const std::string& url, int receive_buffer = 0);
// Sends `request` on a fresh connection and returns everything the daemon
// sends back until it closes (or 10 s of silence). Throws when it cannot
// connect or send.
std::string rawExchange(const std::string& url, const std::string& request);

class RunningDaemon {
 public:
  // Writes `config_text` to <dir>/fleet.toml and starts hwfarmd on it; waits
  // until it logs that it is ready. Throws with the log on failure.
  // `launcher` runs in front of hwfarmd (e.g. umockdev-run -d FILE --).
  RunningDaemon(const TempDir& dir, const std::string& config_text,
                const std::map<std::string, std::string>& env = {}, std::vector<std::string> launcher = {});
  // With a launcher, stops it with SIGTERM (umockdev-run then removes its
  // test bed); otherwise the process is killed.
  ~RunningDaemon();

  const std::string& url() const { return url_; }
  const std::string& configPath() const { return config_path_; }
  const std::string& logPath() const { return log_path_; }
  std::string log() const { return readFile(log_path_); }
  Process& process() { return *process_; }

  cli::HttpResult get(const std::string& target, const std::string& token = "") const;
  cli::HttpResult request(const std::string& method, const std::string& target, const std::string& body,
                          const std::string& token = "", double timeout_s = 30) const;

  // Follows run `id`'s events (GET /v1/runs/{id}/events) until their end
  // line, then returns its record (GET /v1/runs/{id}): the run's end,
  // waited for as a client does, without polling. Throws when the stream
  // fails or ends without its end line.
  std::string recordAtEnd(const std::string& id, const std::string& token = "") const;
  // Whether hwfarmd still runs, and the last 40 lines of its log: for the
  // message of a failure that may be its end.
  std::string state() const;

  // The daemon's reaper (drivers/reaper.h), 0 when none is found.
  pid_t reaperPid() const;

  // SIGKILLs the daemon and starts it again on the same config and state.
  void killAndRestart();

 private:
  void start();

  std::map<std::string, std::string> env_;
  std::vector<std::string> launcher_;
  const TempDir& dir_;
  std::string config_path_;
  std::string log_path_;
  std::string url_;
  std::unique_ptr<Process> process_;
};

} // namespace hwfarm::test
