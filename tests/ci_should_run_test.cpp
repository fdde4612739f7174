// Which builds an agent's hardware serves (daemon/core/ci/should_run.h):
// the trigger's tags against the configured patterns, and the tier.
#include <catch2/catch.hpp>

#include <string>

#include "daemon/core/ci/should_run.h"

using namespace hwfarm::ci;
using hwfarm::lease::Context;

namespace {

TagRules tvmRules() {
  TagRules r;
  r.tags = {"microtvm"};
  r.labels = {"hw-ci"};
  r.bot_commands = {"@tvm-bot run-odt"};
  return r;
}

Trigger pr(std::string title, std::vector<std::string> labels = {}, std::string comment = "") {
  return Trigger{Context::pr, std::move(title), std::move(labels), std::move(comment)};
}

} // namespace

TEST_CASE("a PR with the title tag on a tier-2 agent runs as pr-tagged") {
  Decision d = shouldRun(tvmRules(), pr("[microTVM] Fix the AOT executor"), 2);
  REQUIRE(d.run);
  REQUIRE(d.lease_context == Context::pr_tagged);
  REQUIRE(d.matched == "title tag [microtvm]");
  REQUIRE(d.reason == "tier 2 runs PRs tagged [microtvm] or labelled hw-ci or triggered by \"@tvm-bot run-odt\"; "
                      "this one has title tag [microtvm]");
}

TEST_CASE("a PR without a tag on a tier-2 agent does not run and says what would make it run") {
  Decision d = shouldRun(tvmRules(), pr("Fix the AOT executor (microtvm)", {"docs"}, "LGTM"), 2);
  REQUIRE_FALSE(d.run);
  REQUIRE(d.matched.empty());
  REQUIRE(d.reason == "tier 2 runs only PRs tagged [microtvm] or labelled hw-ci or triggered by \"@tvm-bot "
                      "run-odt\"; this PR has none of them");
}

TEST_CASE("a PR on a tier-1 agent runs with or without a tag") {
  Decision plain = shouldRun(tvmRules(), pr("Fix a typo"), 1);
  REQUIRE(plain.run);
  REQUIRE(plain.lease_context == Context::pr);
  REQUIRE(plain.reason == "tier 1 runs every PR");
  Decision tagged = shouldRun(tvmRules(), pr("[microtvm] x"), 1);
  REQUIRE(tagged.run);
  REQUIRE(tagged.lease_context == Context::pr_tagged);
  REQUIRE(tagged.reason == "tier 1 runs every PR (this one is tagged: title tag [microtvm])");
}

TEST_CASE("nightly on a tier-3 agent runs and a PR there does not") {
  Decision nightly = shouldRun(tvmRules(), Trigger{Context::nightly, "", {}, ""}, 3);
  REQUIRE(nightly.run);
  REQUIRE(nightly.lease_context == Context::nightly);
  REQUIRE(nightly.reason == "tier 3 runs nightly builds");
  Decision tagged = shouldRun(tvmRules(), pr("[microtvm] x"), 3);
  REQUIRE_FALSE(tagged.run);
  REQUIRE(tagged.reason == "tier 3 runs no PRs, only nightly and manual builds");
}

TEST_CASE("a suspended agent runs manual builds only") {
  REQUIRE_FALSE(shouldRun(tvmRules(), Trigger{Context::nightly, "", {}, ""}, 4).run);
  REQUIRE(shouldRun(tvmRules(), Trigger{Context::nightly, "", {}, ""}, 4).reason ==
          "suspended runs only manual builds");
  REQUIRE(shouldRun(tvmRules(), Trigger{Context::manual, "", {}, ""}, 4).run);
}

TEST_CASE("labels tag a PR when they are a tag or a configured label") {
  REQUIRE(findTag(tvmRules(), pr("x", {"docs", "HW-CI"})) == std::optional<std::string>("label HW-CI"));
  REQUIRE(findTag(tvmRules(), pr("x", {"microtvm"})) == std::optional<std::string>("label microtvm"));
  REQUIRE_FALSE(findTag(tvmRules(), pr("x", {"hw-ci-later", "micro"})));
}

TEST_CASE("a bot command tags a PR alone or with a tag argument") {
  TagRules r = tvmRules();
  // Given the command alone on a line of a longer comment
  REQUIRE(findTag(r, pr("x", {}, "Thanks!\r\n  @tvm-bot run-odt\r\n")) ==
          std::optional<std::string>("comment \"@tvm-bot run-odt\""));
  // with a tag among its arguments
  REQUIRE(findTag(r, pr("x", {}, "@tvm-bot run-odt  cortexm microtvm")) ==
          std::optional<std::string>("comment \"@tvm-bot run-odt  cortexm microtvm\""));
  // with arguments that are no tag, a longer command word, or the command inside a line
  REQUIRE_FALSE(findTag(r, pr("x", {}, "@tvm-bot run-odt hexagon")));
  REQUIRE_FALSE(findTag(r, pr("x", {}, "@tvm-bot run-odtx microtvm")));
  REQUIRE_FALSE(findTag(r, pr("x", {}, "please @tvm-bot run-odt")));
  // Without tags configured, any arguments go.
  r.tags.clear();
  REQUIRE(findTag(r, pr("x", {}, "@tvm-bot run-odt hexagon")));
}

TEST_CASE("title tags need their brackets") {
  REQUIRE_FALSE(findTag(tvmRules(), pr("microtvm: x [micro] [microtvm")));
  REQUIRE(findTag(tvmRules(), pr("x [MicroTVM]")));
}

TEST_CASE("a pr-tagged context is taken as tagged by the caller") {
  Decision d = shouldRun(tvmRules(), Trigger{Context::pr_tagged, "untagged", {}, ""}, 2);
  REQUIRE(d.run);
  REQUIRE(d.matched == "context pr-tagged");
  REQUIRE(d.lease_context == Context::pr_tagged);
}

TEST_CASE("without configured rules a tier-2 agent says none are configured") {
  Decision d = shouldRun(TagRules{}, pr("[microtvm] x"), 2);
  REQUIRE_FALSE(d.run);
  REQUIRE(d.reason == "tier 2 runs only tagged PRs (no tags are configured: [should_run]); this PR has none of them");
}
