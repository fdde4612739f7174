// hwfarmctl's command-line parser, driven by the command table
// (command_table.h): an option the command's table does not list is
// unknown, and every option it lists is parsed.
#pragma once

#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "daemon/cli/command_table.h"

namespace hwfarm::cli {

class Args {
 public:
  // Parses `argv`, the words after the command's name: options as
  // "--opt VALUE", "--opt=VALUE" or a flag (by name or alias), positionals,
  // and everything after "--". error() is non-empty for an unknown option
  // (with a suggestion), a missing value, a value given to a flag, a missing
  // required option, too few or too many positionals, or "--" where the
  // command takes nothing after it.
  Args(const std::vector<std::string>& argv, const CommandSpec& command);

  const std::string& error() const { return error_; }
  const std::vector<std::string>& positional() const { return positional_; }
  const std::vector<std::string>& rest() const { return rest_; } // after "--"
  bool hasRest() const { return has_rest_; }
  // By the option's name ("--quiet"), not its alias.
  bool flag(const std::string& name) const { return flags_.count(name) > 0; }
  std::optional<std::string> value(const std::string& name) const;
  std::vector<std::string> values(const std::string& name) const;

 private:
  void check(const CommandSpec& command);

  std::map<std::string, std::vector<std::string>> values_;
  std::set<std::string> flags_;
  std::vector<std::string> positional_;
  std::vector<std::string> rest_;
  bool has_rest_ = false;
  std::string error_;
};

// "unknown option --typ (did you mean --type?)"; names the commands that
// take it when another command does.
std::string unknownOptionMessage(const std::string& option, const CommandSpec& command);

} // namespace hwfarm::cli
