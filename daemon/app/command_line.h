// hwfarmd's command line as one table: the parser, `hwfarmd --help` and the
// options of docs/hwfarmd.md (and so the hwfarmd(8) man page) come from it.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace hwfarm {

struct DaemonOption {
  const char* name;       // "--config"
  const char* alias;      // "-c", or ""
  const char* value;      // "FILE"; "" for a flag
  const char* help;       // one sentence, no final period
  bool value_optional;    // --check-config [FILE]
};

const std::vector<DaemonOption>& daemonOptions();

struct DaemonArgs {
  std::string config_path; // "": the built-in simulated fleet
  std::string simulator_launcher; // "": hwfarmd runs bubblewrap itself
  bool check = false;      // --check-config
  bool version = false;
  bool help = false;
  std::string generate_docs; // the page whose generated blocks to print rewritten
};

// Parses hwfarmd's arguments; the error (an unknown option, with a
// suggestion; a missing value) when they do not parse.
std::optional<std::string> parseDaemonArgs(const std::vector<std::string>& args, DaemonArgs* out);

// `hwfarmd --help`.
std::string daemonUsage();

// `text` (docs/hwfarmd.md) with its generated blocks ("synopsis",
// "options") made from the table; false with `error`.
bool regenerateDaemonDocs(const std::string& text, std::string* out, std::string* error);

} // namespace hwfarm
