// hwfarmctl's commands and options as one table. The parser, `--help`,
// the command reference in docs/cli.md, the bash completion and the man page
// are all made from it, so none of them can name an option the others do
// not know (docs/cli.md, "Generated from the command table").
#pragma once

#include <string>
#include <vector>

namespace hwfarm::cli {

struct Session;
class Args;

// What completes an option's value or a positional argument.
enum class Completion { none, file, directory };

struct OptionSpec {
  const char* name;               // "--type"
  const char* alias = "";         // "-q", or ""
  const char* value = "";         // "T": the option takes a value; "": a flag
  const char* help = "";          // one sentence, no final period
  const char* default_text = "";  // what applies without the option; "": nothing
  const char* choices = "";       // the values it takes, space-separated; "": any
  bool repeatable = false;        // every occurrence counts (else the last)
  bool required = false;
  Completion complete = Completion::none;
};

struct PositionalSpec {
  const char* name;          // "ID", "IMAGE"
  const char* choices = "";  // space-separated; "": any
  bool many = false;         // IMAGE...: one or more
  bool optional = false;
  Completion complete = Completion::none;
};

struct CommandSpec {
  const char* name;     // "lease acquire": one or two words
  const char* group;    // the heading it is listed under in the usage
  const char* summary;  // one line, no final period
  const char* help;     // what `COMMAND --help` adds: sentences, "" for none
  std::vector<PositionalSpec> positionals;
  std::vector<OptionSpec> options;
  int (*run)(Session&, const Args&);
  const char* synopsis = "";  // the arguments' part of the usage line when the specs cannot say it
  const char* rest = "";      // what follows "--" ("CMD [ARGS...]"); "": nothing may
  bool hidden = false;        // not in the help, the docs or the completion
};

struct ExitCodeSpec {
  const char* code;  // "0", "CMD's code", "130, 143"
  const char* brief; // for the usage
  const char* detail;
};

struct EnvironmentSpec {
  const char* name;
  const char* use;
};

const std::vector<CommandSpec>& commands();
const std::vector<OptionSpec>& globalOptions();
const std::vector<ExitCodeSpec>& exitCodes();
const std::vector<EnvironmentSpec>& environment();

// The command named `name` ("lease acquire"), or nullptr.
const CommandSpec* findCommand(const std::string& name);

} // namespace hwfarm::cli
