// Loading and validating a fleet config.
//
// Validation is pure: text in, config or errors out; no file system, no
// clock. Every error carries file:line:column, the key path and what was
// expected versus found, and all errors of a file are reported at once.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "config/fleet_config.h"

namespace hwfarm::config {

// Limits on config input (docs/configuration.md, "Limits on the files"). They
// hold before any parsing, in the daemon and in --check-config alike.
inline constexpr size_t kMaxConfigBytes = 4 * 1024 * 1024; // a fleet config file
inline constexpr size_t kMaxTokensBytes = 1024 * 1024;     // a tokens file
inline constexpr size_t kMaxTomlKeyParts = 32;             // parts of one dotted key: a.b.c is 3
inline constexpr size_t kMaxTomlNesting = 32;              // arrays and inline tables inside each other
// Errors reported per file; the rest are counted in one last error.
inline constexpr size_t kMaxReportedErrors = 100;

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

// Reads `path` (at most kMaxConfigBytes) and parses it. An unreadable or
// oversized file is one error without a position. `text`, when given,
// receives the file's contents.
LoadResult loadFleetConfigFile(const std::string& path, std::string* text = nullptr);

// Reads a whole file. On failure returns false with `error` set to
// "cannot read file: <strerror>", or "file is larger than N bytes" when it
// holds more than `max_bytes` (reading stops there: /dev/zero is refused).
bool readTextFile(const std::string& path, std::string* text, std::string* error,
                  size_t max_bytes = SIZE_MAX);
// The same from an open descriptor, which stays open.
bool readTextFd(int fd, std::string* text, std::string* error, size_t max_bytes = SIZE_MAX);

// The built-in simulated fleet (config/examples/sim-fleet.toml).
std::string_view embeddedSimFleet();
inline constexpr const char* kEmbeddedSimFleetName = "<embedded sim-fleet.toml>";

} // namespace hwfarm::config
