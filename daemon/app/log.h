// Logging set-up: spdlog to stderr. Under systemd (stderr connected to the
// journal, per $JOURNAL_STREAM) every line starts with a `<N>` syslog
// priority so journald keeps the level, and no timestamp is printed.
#pragma once

#include <string>

namespace hwfarm {

// Installs the default logger. `level`: trace, debug, info, warn, error.
void setupLogging(const std::string& level);
void setLogLevel(const std::string& level);

// True when stderr is the journal stream systemd set up for this process.
bool stderrIsJournal();

} // namespace hwfarm
