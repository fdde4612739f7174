// Whether a CI build should use this agent's hardware: the trigger (a PR's
// title, labels and trigger comment, or a nightly/manual build) against the
// configured tag patterns and the tier the agent serves now. Pure: text and
// the tier in, a decision with its reason out (docs/cli.md "should-run").
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "daemon/core/lease/types.h"

namespace hwfarm::ci {

// Bounds on what a caller may send (the API refuses more with a 400).
inline constexpr size_t kMaxTitleBytes = 1024;
inline constexpr size_t kMaxCommentBytes = 64 * 1024;
inline constexpr size_t kMaxLabels = 100;
inline constexpr size_t kMaxLabelBytes = 256;

// What marks a PR as tagged for hardware ([should_run] in the fleet config).
struct TagRules {
  // "[tag]" in the title (any case), a label equal to a tag, or a tag as an
  // argument of a bot command.
  std::vector<std::string> tags;
  // Labels that tag a PR by themselves.
  std::vector<std::string> labels;
  // Bot commands ("@tvm-bot run-odt"): a comment line that starts with one
  // tags the PR when nothing follows it or one of the words after it is a
  // tag ("@tvm-bot run-odt microtvm").
  std::vector<std::string> bot_commands;

  bool empty() const { return tags.empty() && labels.empty() && bot_commands.empty(); }
};

struct Trigger {
  lease::Context context = lease::Context::pr;
  std::string title;
  std::vector<std::string> labels;
  std::string comment;
};

struct Decision {
  bool run = false;
  // One sentence: why yes, or why not and what would make it yes.
  std::string reason;
  // The context to lease with when run is true: "pr-tagged" for a PR that
  // matched, so a tier-2 agent grants it; otherwise the trigger's context.
  lease::Context lease_context = lease::Context::manual;
  // What tagged the PR ("title tag [microtvm]", "label hw-ci", "comment
  // \"@tvm-bot run-odt microtvm\""); empty when nothing did.
  std::string matched;
};

// What in `trigger` tags it under `rules`, as Decision::matched says it;
// nothing when nothing does. Title tags come first, then labels, then the
// comment's first matching line.
std::optional<std::string> findTag(const TagRules& rules, const Trigger& trigger);

// The decision for an agent serving `tier` (1..3; 4: suspended, manual
// requests only). PR contexts (pr, pr-tagged) are judged by their tags:
// tier 1 runs every PR, tier 2 only tagged ones, tier 3 none; nightly and
// manual builds run wherever the tier serves them.
Decision shouldRun(const TagRules& rules, const Trigger& trigger, int tier);

// "PRs tagged [microtvm] or labelled hw-ci or triggered by \"@tvm-bot
// run-odt\"", for reasons; "tagged PRs (no tags are configured:
// [should_run])" without rules.
std::string describeRules(const TagRules& rules);

} // namespace hwfarm::ci
