#include "daemon/cli/args.h"

#include "config/suggest.h"

namespace hwfarm::cli {
namespace {

const OptionSpec* findOption(const CommandSpec& command, const std::string& word) {
  for (const auto& o : command.options)
    if (word == o.name || (*o.alias && word == o.alias)) return &o;
  return nullptr;
}

} // namespace

std::string unknownOptionMessage(const std::string& option, const CommandSpec& command) {
  std::vector<std::string> names;
  for (const auto& o : command.options) names.emplace_back(o.name);
  std::string message = "unknown option " + option;
  if (std::string close = config::closestMatch(option, names); !close.empty())
    return message + " (did you mean " + close + "?)";
  std::vector<std::string> takers;
  for (const auto& c : commands())
    if (!c.hidden && findOption(c, option)) takers.emplace_back(c.name);
  if (!takers.empty()) {
    message += " (an option of ";
    for (size_t i = 0; i < takers.size(); ++i) message += (i ? ", " : "") + takers[i];
    message += ")";
  }
  return message;
}

Args::Args(const std::vector<std::string>& argv, const CommandSpec& command) {
  for (size_t i = 0; i < argv.size() && error_.empty(); ++i) {
    const std::string& a = argv[i];
    if (a == "--") {
      has_rest_ = true;
      rest_.assign(argv.begin() + static_cast<std::ptrdiff_t>(i) + 1, argv.end());
      break;
    }
    if (a.size() < 2 || a[0] != '-') {
      positional_.push_back(a);
      continue;
    }
    std::string name = a, inline_value;
    bool has_inline = false;
    if (size_t eq = a.find('='); eq != std::string::npos && a.rfind("--", 0) == 0) {
      name = a.substr(0, eq);
      inline_value = a.substr(eq + 1);
      has_inline = true;
    }
    const OptionSpec* option = findOption(command, name);
    if (!option) {
      error_ = unknownOptionMessage(name, command);
    } else if (!*option->value) {
      if (has_inline) error_ = std::string(option->name) + " takes no value";
      else flags_.insert(option->name);
    } else if (has_inline) {
      values_[option->name].push_back(inline_value);
    } else if (i + 1 < argv.size()) {
      values_[option->name].push_back(argv[++i]);
    } else {
      error_ = std::string(option->name) + " needs a value (" + option->value + ")";
    }
  }
  if (error_.empty()) check(command);
}

void Args::check(const CommandSpec& command) {
  for (const auto& o : command.options)
    if (o.required && !values_.count(o.name) && !flags_.count(o.name)) {
      error_ = std::string(o.name) + (*o.value ? std::string(" ") + o.value : "") + " is required";
      return;
    }
  size_t least = 0, most = 0;
  bool unbounded = false;
  for (const auto& p : command.positionals) {
    if (!p.optional) ++least;
    ++most;
    unbounded = unbounded || p.many;
  }
  if (positional_.size() < least) {
    error_ = "missing " + std::string(command.positionals[positional_.size()].name);
  } else if (!unbounded && positional_.size() > most) {
    error_ = "unexpected argument \"" + positional_[most] + "\"";
  } else if (has_rest_ && !*command.rest) {
    error_ = "takes nothing after \"--\"";
  }
}

std::optional<std::string> Args::value(const std::string& name) const {
  auto it = values_.find(name);
  if (it == values_.end() || it->second.empty()) return std::nullopt;
  return it->second.back();
}

std::vector<std::string> Args::values(const std::string& name) const {
  auto it = values_.find(name);
  return it == values_.end() ? std::vector<std::string>{} : it->second;
}

} // namespace hwfarm::cli
