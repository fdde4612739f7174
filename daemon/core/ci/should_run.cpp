#include "daemon/core/ci/should_run.h"

#include "daemon/core/health/format.h"

namespace hwfarm::ci {
namespace {

char lower(char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; }

bool sameText(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (lower(a[i]) != lower(b[i])) return false;
  return true;
}

bool startsWith(std::string_view text, std::string_view prefix) {
  return text.size() >= prefix.size() && sameText(text.substr(0, prefix.size()), prefix);
}

bool containsText(std::string_view text, std::string_view needle) {
  if (needle.size() > text.size()) return false;
  for (size_t i = 0; i + needle.size() <= text.size(); ++i)
    if (sameText(text.substr(i, needle.size()), needle)) return true;
  return false;
}

bool space(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f'; }

std::string_view trimmed(std::string_view s) {
  while (!s.empty() && space(s.front())) s.remove_prefix(1);
  while (!s.empty() && space(s.back())) s.remove_suffix(1);
  return s;
}

bool isTag(const TagRules& rules, std::string_view word) {
  for (const auto& t : rules.tags)
    if (sameText(t, word)) return true;
  return false;
}

// Whether one comment line is a bot command that tags the PR.
bool commandTags(const TagRules& rules, std::string_view line, const std::string& command) {
  line = trimmed(line);
  if (command.empty() || !startsWith(line, command)) return false;
  std::string_view rest = line.substr(command.size());
  if (!rest.empty() && !space(rest.front())) return false; // "@bot run-odtx" is another command
  rest = trimmed(rest);
  if (rest.empty() || rules.tags.empty()) return true;
  while (!rest.empty()) {
    size_t end = 0;
    while (end < rest.size() && !space(rest[end])) ++end;
    if (isTag(rules, rest.substr(0, end))) return true;
    rest = trimmed(rest.substr(end));
  }
  return false;
}

std::string joinedOr(const std::vector<std::string>& items, const std::string& before, const std::string& after) {
  std::string out;
  for (const auto& i : items) out += (out.empty() ? "" : " or ") + before + i + after;
  return out;
}

} // namespace

std::optional<std::string> findTag(const TagRules& rules, const Trigger& trigger) {
  for (const auto& t : rules.tags)
    if (containsText(trigger.title, "[" + t + "]")) return "title tag [" + t + "]";
  for (const auto& label : trigger.labels) {
    if (isTag(rules, label)) return "label " + label;
    for (const auto& l : rules.labels)
      if (sameText(l, label)) return "label " + label;
  }
  std::string_view comment = trigger.comment;
  while (!comment.empty()) {
    size_t end = comment.find('\n');
    std::string_view line = comment.substr(0, end);
    for (const auto& command : rules.bot_commands)
      if (commandTags(rules, line, command)) return "comment \"" + std::string(trimmed(line)) + "\"";
    if (end == std::string_view::npos) break;
    comment.remove_prefix(end + 1);
  }
  return std::nullopt;
}

std::string describeRules(const TagRules& rules) {
  if (rules.empty()) return "tagged PRs (no tags are configured: [should_run])";
  std::vector<std::string> parts;
  if (!rules.tags.empty()) parts.push_back("tagged " + joinedOr(rules.tags, "[", "]"));
  if (!rules.labels.empty()) parts.push_back("labelled " + joinedOr(rules.labels, "", ""));
  if (!rules.bot_commands.empty()) parts.push_back("triggered by " + joinedOr(rules.bot_commands, "\"", "\""));
  std::string out = "PRs";
  for (size_t i = 0; i < parts.size(); ++i) out += (i ? " or " : " ") + parts[i];
  return out;
}

Decision shouldRun(const TagRules& rules, const Trigger& trigger, int tier) {
  Decision d;
  d.lease_context = trigger.context;
  std::string name = health::tierName(tier);
  bool pr = trigger.context == lease::Context::pr || trigger.context == lease::Context::pr_tagged;
  if (!pr) {
    d.run = lease::tierServes(tier, trigger.context);
    std::string what = std::string(lease::toString(trigger.context)) + " builds";
    d.reason = d.run ? name + " runs " + what
                     : name + " runs only " + (tier >= 4 ? "manual builds" : "nightly and manual builds");
    return d;
  }
  if (trigger.context == lease::Context::pr_tagged) d.matched = "context pr-tagged";
  else if (auto tag = findTag(rules, trigger)) d.matched = *tag;
  bool tagged = !d.matched.empty();
  if (tagged) d.lease_context = lease::Context::pr_tagged;
  if (lease::tierServes(tier, lease::Context::pr)) {
    d.run = true;
    d.reason = name + " runs every PR" + (tagged ? " (this one is tagged: " + d.matched + ")" : "");
  } else if (lease::tierServes(tier, lease::Context::pr_tagged)) {
    d.run = tagged;
    d.reason = tagged ? name + " runs " + describeRules(rules) + "; this one has " + d.matched
                      : name + " runs only " + describeRules(rules) + "; this PR has none of them";
  } else {
    d.reason = name + " runs no PRs, only " + (tier >= 4 ? "manual builds" : "nightly and manual builds");
  }
  return d;
}

} // namespace hwfarm::ci
