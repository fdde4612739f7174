// A small command-line parser for hwfarmctl: options with values, flags,
// repeated options, positionals and everything after "--".
#pragma once

#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace hwfarm::cli {

class Args {
 public:
  // `valued`: options that take a value ("--url"); `flags`: those that do not.
  // Unknown options and missing values make error() non-empty.
  Args(const std::vector<std::string>& argv, const std::set<std::string>& valued, const std::set<std::string>& flags);

  const std::string& error() const { return error_; }
  const std::vector<std::string>& positional() const { return positional_; }
  const std::vector<std::string>& rest() const { return rest_; } // after "--"
  bool hasRest() const { return has_rest_; }
  bool flag(const std::string& name) const { return flags_.count(name) > 0; }
  std::optional<std::string> value(const std::string& name) const;
  std::vector<std::string> values(const std::string& name) const;

 private:
  std::map<std::string, std::vector<std::string>> values_;
  std::set<std::string> flags_;
  std::vector<std::string> positional_;
  std::vector<std::string> rest_;
  bool has_rest_ = false;
  std::string error_;
};

} // namespace hwfarm::cli
