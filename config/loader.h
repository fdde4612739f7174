// Loading and validating a fleet config.
//
// Validation is pure: text in, config or errors out; no file system, no
// clock. Every error carries file:line:column, the key path and what was
// expected versus found, and all errors of a file are reported at once.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "config/fleet_config.h"

namespace hwfarm::config {

struct ConfigError {
  std::string file;
  int line = 0;   // 0: no position (e.g. unreadable file)
  int column = 0;
  std::string context; // e.g. `worker "w1" board "stm32-3"`, may be empty
  std::string key;     // key path, e.g. "usb.vendor", may be empty
  std::string message;

  // `file:line:col: context: key: message`, parts omitted when empty.
  std::string format() const;
};

struct LoadResult {
  std::optional<FleetConfig> config; // set if and only if errors is empty
  std::vector<ConfigError> errors;

  bool ok() const { return errors.empty(); }
};

// Parses and validates `text`; `file` names it in errors.
LoadResult parseFleetConfig(std::string_view text, const std::string& file);

// Reads `path` and parses it. An unreadable file is one error without a
// position. `text`, when given, receives the file's contents.
LoadResult loadFleetConfigFile(const std::string& path, std::string* text = nullptr);

// Reads a whole file. On failure returns false with `error` set to
// "cannot read file: <strerror>".
bool readTextFile(const std::string& path, std::string* text, std::string* error);

// The built-in simulated fleet (config/examples/sim-fleet.toml).
std::string_view embeddedSimFleet();
inline constexpr const char* kEmbeddedSimFleetName = "<embedded sim-fleet.toml>";

} // namespace hwfarm::config
