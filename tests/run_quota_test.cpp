// daemon/core/run/artifacts: what a run's quota of bytes keeps of its files
// (withinQuota) and the reason a run that passed it ends with.
#include <catch2/catch.hpp>

#include "daemon/core/run/artifacts.h"

using namespace hwfarm::run;

namespace {

ArtifactFile file(const std::string& path, size_t bytes) { return {path, std::string(bytes, 'x')}; }

std::vector<std::string> paths(const std::vector<ArtifactFile>& files) {
  std::vector<std::string> out;
  for (const auto& f : files) out.push_back(f.path);
  return out;
}

} // namespace

TEST_CASE("a quota keeps junit.xml first, then each file in order that still fits") {
  // Given a run's files, junit.xml last as summaryFiles gives them
  std::vector<ArtifactFile> files{file("traces/a.txt", 600), file("outputs/a/x.npy", 300), file("traces/b.txt", 500),
                                  file("golden_results.json", 50), file("junit.xml", 100)};
  // When its quota is 1000 bytes
  Kept kept = withinQuota(files, 1000);
  // Then junit.xml comes first, then the files that fit, in order; the rest are left out
  CHECK(paths(kept.files) == std::vector<std::string>{"junit.xml", "traces/a.txt", "outputs/a/x.npy"});
  CHECK(kept.left_out == std::vector<std::string>{"traces/b.txt", "golden_results.json"});
  CHECK(kept.bytes == 1000);
  CHECK(kept.wanted == 1550);
  // (a smaller file after one that did not fit still goes in when it fits)
  Kept more = withinQuota(files, 1060);
  CHECK(more.left_out == std::vector<std::string>{"traces/b.txt"});
  // And the reason says how much was wanted, what was kept and what not
  CHECK(quotaReason(kept, 1000, "runs.max_artifact_bytes") ==
        "its artifacts (1550 bytes) exceed runs.max_artifact_bytes (1000 bytes): 3 file(s) kept (1000 bytes), "
        "2 left out: traces/b.txt, golden_results.json");
}

TEST_CASE("a quota of 0 keeps every file, and a quota at the exact size keeps them all") {
  std::vector<ArtifactFile> files{file("traces/a.txt", 600), file("junit.xml", 100)};
  Kept none = withinQuota(files, 0);
  CHECK(none.left_out.empty());
  CHECK(none.files.size() == 2);
  Kept exact = withinQuota(files, 700);
  CHECK(exact.left_out.empty());
  CHECK(exact.bytes == 700);
  Kept one_short = withinQuota(files, 699);
  CHECK(one_short.left_out == std::vector<std::string>{"traces/a.txt"});
}

TEST_CASE("a quota's reason names the first five files left out and counts the rest") {
  std::vector<ArtifactFile> files;
  for (int i = 0; i < 8; ++i) files.push_back(file("traces/t" + std::to_string(i) + ".txt", 10));
  Kept kept = withinQuota(files, 5);
  REQUIRE(kept.left_out.size() == 8);
  CHECK(quotaReason(kept, 5, "runs.max_lease_artifact_bytes") ==
        "its artifacts (80 bytes) exceed runs.max_lease_artifact_bytes (5 bytes): 0 file(s) kept (0 bytes), 8 left "
        "out: traces/t0.txt, traces/t1.txt, traces/t2.txt, traces/t3.txt, traces/t4.txt and 3 more");
}
