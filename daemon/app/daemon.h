// hwfarmd's life cycle: start-up, SIGHUP reload, graceful stop, systemd
// notifications and watchdog, all driven by one io_context.
#pragma once

#include <memory>
#include <string>

#include "config/loader.h"

namespace hwfarm {

struct DaemonOptions {
  std::string config_path; // empty: the embedded simulated fleet
};

// Loads the config from `path`, or the embedded default when empty.
config::LoadResult loadConfig(const std::string& path);

class Daemon {
 public:
  explicit Daemon(DaemonOptions options);
  ~Daemon();

  // Runs until SIGTERM/SIGINT. Returns the process exit code: 0 after a
  // graceful stop, 1 when start-up failed (the reason is logged).
  int run();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

} // namespace hwfarm
