#include "daemon/app/command_line.h"

#include <sstream>

#include "common/generated_text.h"
#include "config/suggest.h"

namespace hwfarm {
namespace {

std::string label(const DaemonOption& o) {
  std::string text = *o.alias ? std::string(o.alias) + ", " + o.name : std::string(o.name);
  if (!*o.value) return text;
  return text + (o.value_optional ? " [" + std::string(o.value) + "]" : " " + std::string(o.value));
}

const DaemonOption* find(const std::string& word) {
  for (const auto& o : daemonOptions())
    if (word == o.name || (*o.alias && word == o.alias)) return &o;
  return nullptr;
}

constexpr const char* kSynopsis =
    "hwfarmd [--config FILE]          run in the foreground\n"
    "hwfarmd --check-config [FILE]    validate FILE (or --config's), exit 0 or 1\n"
    "hwfarmd --version | --help\n";

} // namespace

const std::vector<DaemonOption>& daemonOptions() {
  static const std::vector<DaemonOption> table{
      {"--config", "-c", "FILE", "the fleet configuration (hwfarm.toml(5)); without it, the built-in simulated "
                                 "fleet with its state in ./.hwfarm-state", false},
      {"--simulator-launcher", "", "SOCKET",
       "confine simulated boards' QEMU through hwfarm-launcher listening at SOCKET instead of running bubblewrap "
       "itself, so hwfarmd needs no namespaces (the systemd unit passes /run/hwfarm-launcher.sock)", false},
      {"--check-config", "-t", "FILE", "validate FILE (or --config's) and its tokens and credentials files, print "
                                       "each error as FILE:LINE:COL: key: message, exit 0 or 1", true},
      {"--version", "", "", "print the version and exit", false},
      {"--help", "-h", "", "print the usage and exit", false},
  };
  return table;
}

std::optional<std::string> parseDaemonArgs(const std::vector<std::string>& args, DaemonArgs* out) {
  for (size_t i = 0; i < args.size(); ++i) {
    std::string word = args[i], value;
    bool has_value = false;
    if (size_t eq = word.find('='); word.rfind("--", 0) == 0 && eq != std::string::npos) {
      value = word.substr(eq + 1);
      word = word.substr(0, eq);
      has_value = true;
    }
    if (word == "--generate-docs" && i + 1 < args.size()) { // hidden: docs/hwfarmd.md from the table
      out->generate_docs = args[++i];
      continue;
    }
    const DaemonOption* o = find(word);
    if (!o) {
      std::vector<std::string> names;
      for (const auto& d : daemonOptions()) names.emplace_back(d.name);
      std::string close = word.rfind("-", 0) == 0 ? config::closestMatch(word, names) : "";
      return "unknown argument \"" + args[i] + "\"" + (close.empty() ? "" : " (did you mean " + close + "?)");
    }
    if (!*o->value && has_value) return std::string(o->name) + " takes no value";
    if (*o->value && !has_value) {
      bool next = i + 1 < args.size() && args[i + 1].rfind("-", 0) != 0;
      if (next) {
        value = args[++i];
        has_value = true;
      } else if (!o->value_optional) {
        return std::string(o->name) + " needs a value (" + o->value + ")";
      }
    }
    std::string name = o->name;
    if (name == "--config") out->config_path = value;
    else if (name == "--simulator-launcher") out->simulator_launcher = value;
    else if (name == "--check-config") {
      out->check = true;
      if (has_value) out->config_path = value;
    } else if (name == "--version") out->version = true;
    else if (name == "--help") out->help = true;
  }
  return std::nullopt;
}

std::string daemonUsage() {
  std::string out, synopsis = kSynopsis;
  for (size_t at = 0, line = 0; at < synopsis.size(); ++line) {
    size_t nl = synopsis.find('\n', at);
    out += (line ? "       " : "usage: ") + synopsis.substr(at, nl - at + 1);
    at = nl + 1;
  }
  out += "\noptions:\n";
  constexpr size_t kIndent = 24, kWidth = 79;
  for (const auto& o : daemonOptions()) {
    std::string line = "  " + label(o);
    // The help beside the label (below a long one), wrapped under itself.
    line += line.size() + 2 > kIndent ? "\n" + std::string(kIndent, ' ') : std::string(kIndent - line.size(), ' ');
    size_t column = kIndent;
    std::istringstream words(o.help);
    bool first = true;
    for (std::string word; words >> word; first = false) {
      if (!first && column + 1 + word.size() > kWidth) {
        line += "\n" + std::string(kIndent, ' ');
        column = kIndent;
      } else if (!first) {
        line += ' ';
        ++column;
      }
      line += word;
      column += word.size();
    }
    out += line + "\n";
  }
  return out +
         "\nSignals: SIGHUP reloads the configuration, SIGTERM and SIGINT stop gracefully.\n"
         "Exit status: 0 stopped or valid, 1 configuration or start-up error, 2 bad usage.\n";
}

bool regenerateDaemonDocs(const std::string& text, std::string* out, std::string* error) {
  auto make = [](const std::string& name) -> std::optional<std::string> {
    if (name == "synopsis") return "```\n" + std::string(kSynopsis) + "```\n";
    if (name != "options") return std::nullopt;
    std::string table = "| Option | Meaning |\n| --- | --- |\n";
    for (const auto& o : daemonOptions()) table += "| `" + label(o) + "` | " + o.help + " |\n";
    return table;
  };
  return regenerateBlocks(text, make, out, error);
}

} // namespace hwfarm
