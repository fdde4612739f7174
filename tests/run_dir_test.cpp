// daemon/services/run_dir: a run's files written into its directory, each
// synced and renamed into place, the changed folders synced once after the
// last; a file that cannot be written is named and the others still are.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "daemon/services/run_dir.h"
#include "tests/support/process.h"
#include "tests/support/small_disk.h"

using namespace hwfarm;
using namespace hwfarm::test;
namespace fs = std::filesystem;

namespace {

std::string contents(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// Every name under `dir`, relative, sorted.
std::vector<std::string> tree(const std::string& dir) {
  std::vector<std::string> names;
  for (const auto& e : fs::recursive_directory_iterator(dir)) names.push_back(fs::relative(e.path(), dir).string());
  std::sort(names.begin(), names.end());
  return names;
}

} // namespace

TEST_CASE("a run's files land in their folders, made on the way, with no temp file left") {
  TempDir dir;
  RunDir runs(dir.file("runs"));
  REQUIRE(runs.create("run-1").ok());
  std::vector<std::string> unwritten;
  Status s = runs.write("run-1",
                        {{"summary.json", "{}"},
                         {"outputs/img/target_0.npy", std::string(1000, 'x')},
                         {"outputs/img/target_ref.npy", "ref"},
                         {"traces/a/b/c.txt", "deep"}},
                        &unwritten);
  INFO(s.message());
  CHECK(s.ok());
  CHECK(unwritten.empty());
  CHECK(tree(runs.path("run-1")) ==
        std::vector<std::string>{"outputs", "outputs/img", "outputs/img/target_0.npy", "outputs/img/target_ref.npy",
                                 "summary.json", "traces", "traces/a", "traces/a/b", "traces/a/b/c.txt"});
  CHECK(contents(runs.path("run-1") + "/outputs/img/target_0.npy") == std::string(1000, 'x'));
  CHECK(contents(runs.path("run-1") + "/traces/a/b/c.txt") == "deep");
  // A second write replaces a file whole.
  REQUIRE(runs.write("run-1", {{"summary.json", "{\"state\":\"passed\"}"}}).ok());
  CHECK(contents(runs.path("run-1") + "/summary.json") == "{\"state\":\"passed\"}");
}

TEST_CASE("a file whose folder is a file is named as unwritten and the others are written") {
  TempDir dir;
  RunDir runs(dir.file("runs"));
  REQUIRE(runs.create("run-1").ok());
  std::vector<std::string> unwritten;
  Status s = runs.write("run-1", {{"a.txt", "first"}, {"a.txt/b.txt", "under a file"}, {"c.txt", "last"}},
                        &unwritten);
  REQUIRE_FALSE(s.ok());
  CHECK(s.message().find("cannot create " + runs.path("run-1") + "/a.txt") != std::string::npos);
  CHECK(unwritten == std::vector<std::string>{"a.txt/b.txt"});
  CHECK(contents(runs.path("run-1") + "/a.txt") == "first");
  CHECK(contents(runs.path("run-1") + "/c.txt") == "last");
}

TEST_CASE("a file that would eat into the disk's reserve is not written, and the small ones are") {
  TempDir dir;
  SmallDisk disk(dir.file("disk"), "4M");
  RunDir runs(disk.dir + "/runs", 2u << 20);
  REQUIRE(runs.create("run-1").ok());
  std::vector<std::string> unwritten;
  Status s = runs.write("run-1", {{"big.bin", std::string(3u << 20, 'b')}, {"small.txt", "fits"}}, &unwritten);
  REQUIRE_FALSE(s.ok());
  CHECK(s.code() == Code::no_space);
  CHECK(s.message().find("no room for " + runs.path("run-1") + "/big.bin") != std::string::npos);
  CHECK(unwritten == std::vector<std::string>{"big.bin"});
  CHECK(tree(runs.path("run-1")) == std::vector<std::string>{"small.txt"});
}

TEST_CASE("a file that cannot replace what is in its place leaves no temp file among the run's files") {
  TempDir dir;
  RunDir runs(dir.file("runs"));
  REQUIRE(runs.create("run-1").ok());
  REQUIRE(runs.write("run-1", {{"out/x.txt", "a folder's file"}}).ok());
  std::vector<std::string> unwritten;
  // "out" is a folder: renaming a file over it fails.
  Status s = runs.write("run-1", {{"out", "a file"}, {"y.txt", "fits"}}, &unwritten);
  REQUIRE_FALSE(s.ok());
  CHECK(s.message().find("cannot rename " + runs.path("run-1") + "/.out.tmp to " + runs.path("run-1") + "/out") !=
        std::string::npos);
  CHECK(unwritten == std::vector<std::string>{"out"});
  CHECK(tree(runs.path("run-1")) == std::vector<std::string>{"out", "out/x.txt", "y.txt"});
  Result<std::vector<std::string>> listed = runs.list("run-1");
  REQUIRE(listed);
  CHECK(*listed == std::vector<std::string>{"out/x.txt", "y.txt"});
}

TEST_CASE("a file named as another one's temp file is kept when both are written together") {
  TempDir dir;
  RunDir runs(dir.file("runs"));
  REQUIRE(runs.create("run-1").ok());
  // (a harness's results may hold both names)
  Status s = runs.write("run-1", {{"log.tmp", "the harness's own file"}, {"log", "the log"}});
  INFO(s.message());
  REQUIRE(s.ok());
  CHECK(contents(runs.path("run-1") + "/log.tmp") == "the harness's own file");
  CHECK(contents(runs.path("run-1") + "/log") == "the log");
  CHECK(tree(runs.path("run-1")) == std::vector<std::string>{"log", "log.tmp"});
}
