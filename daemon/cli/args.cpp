#include "daemon/cli/args.h"

namespace hwfarm::cli {

Args::Args(const std::vector<std::string>& argv, const std::set<std::string>& valued,
           const std::set<std::string>& flags) {
  for (size_t i = 0; i < argv.size(); ++i) {
    const std::string& a = argv[i];
    if (a == "--") {
      has_rest_ = true;
      rest_.assign(argv.begin() + static_cast<std::ptrdiff_t>(i) + 1, argv.end());
      return;
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
    if (valued.count(name)) {
      if (has_inline) {
        values_[name].push_back(inline_value);
      } else if (i + 1 < argv.size()) {
        values_[name].push_back(argv[++i]);
      } else {
        error_ = name + " needs a value";
        return;
      }
    } else if (flags.count(name) && !has_inline) {
      flags_.insert(name);
    } else {
      error_ = "unknown option " + name;
      return;
    }
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
