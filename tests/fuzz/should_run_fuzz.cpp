// Fuzz target: the should-run tag matcher (daemon/core/ci/should_run.h) on
// PR text from anyone who can open a pull request. The input's first line
// is the title, its second the labels (comma separated), the rest the
// trigger comment.
// Invariants: never a crash; every decision has a reason; tier 1 runs every
// PR, tier 3 none; on tier 2 a PR runs exactly when findTag finds a tag, and
// then it leases as pr-tagged; the match names a configured tag, label or
// bot command.
#include <cstdint>
#include <string>
#include <string_view>

#include "daemon/core/ci/should_run.h"
#include "tests/fuzz/fuzz_check.h"

using namespace hwfarm::ci;
using hwfarm::lease::Context;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  Trigger t;
  size_t nl = text.find('\n');
  t.title = std::string(text.substr(0, nl));
  if (nl != std::string_view::npos) {
    std::string_view rest = text.substr(nl + 1);
    size_t nl2 = rest.find('\n');
    std::string_view labels = rest.substr(0, nl2);
    while (!labels.empty()) {
      size_t comma = labels.find(',');
      t.labels.emplace_back(labels.substr(0, comma));
      if (comma == std::string_view::npos) break;
      labels.remove_prefix(comma + 1);
    }
    if (nl2 != std::string_view::npos) t.comment = std::string(rest.substr(nl2 + 1));
  }
  TagRules rules{{"microtvm", "hw"}, {"hw-ci"}, {"@tvm-bot run-odt", "/run"}};
  auto tag = findTag(rules, t);
  if (tag)
    FUZZ_CHECK(tag->rfind("title tag [", 0) == 0 || tag->rfind("label ", 0) == 0 || tag->rfind("comment \"", 0) == 0,
               "a match of an unknown kind: %s", tag->c_str());
  for (int tier = 1; tier <= 4; ++tier) {
    Decision d = shouldRun(rules, t, tier);
    FUZZ_CHECK(!d.reason.empty(), "a decision without a reason on tier %d", tier);
    FUZZ_CHECK(d.matched.empty() == !tag, "matched \"%s\" but findTag differs", d.matched.c_str());
    if (tier == 1) FUZZ_CHECK(d.run, "tier 1 refused a PR");
    if (tier == 2) FUZZ_CHECK(d.run == tag.has_value(), "tier 2 ran=%d with tag=%d", d.run, tag.has_value());
    if (tier >= 3) FUZZ_CHECK(!d.run, "tier %d ran a PR", tier);
    if (d.run) FUZZ_CHECK((d.lease_context == Context::pr_tagged) == tag.has_value(), "lease context vs tag");
  }
  return 0;
}
