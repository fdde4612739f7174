// daemon/cli/run_manifest: the suite manifest and thresholds file hwfarmctl
// run reads, parsed from text; every refusal names FILE:LINE:COL and the key.
#include <catch2/catch.hpp>

#include <boost/json.hpp>

#include "daemon/cli/run_manifest.h"

using namespace hwfarm::cli;
namespace json = boost::json;

namespace {

std::string manifestError(const std::string& text) {
  SuiteManifest m;
  std::string error;
  CHECK_FALSE(parseSuiteManifest(text, "ci/suite.toml", &m, &error));
  return error;
}

} // namespace

TEST_CASE("a suite manifest gives the images with their names and paths from its directory, the options and the rules") {
  std::string text = R"(suite = "nightly"
mode = "each"
reference = "golden:../previous"
deadline_s = 30

[[image]]
name = "conv"
path = "build/conv.elf"
reference_image = "build/conv-qemu.elf"

[[image]]
path = "/abs/dense.elf"
golden = "golden/dense"

[[threshold]]
expected_pcc = 0.98

[[threshold]]
image = "conv"
case = "square"
output = "y"
require_allclose = true
)";
  SuiteManifest m;
  std::string error;
  REQUIRE(parseSuiteManifest(text, "ci/suite.toml", &m, &error));
  CHECK(error.empty());
  CHECK(m.suite == "nightly");
  CHECK(m.mode == "each");
  CHECK(m.reference == "golden:previous");
  CHECK(m.deadline_s == 30);
  REQUIRE(m.images.size() == 2);
  CHECK(m.images[0].name == "conv");
  CHECK(m.images[0].path == "ci/build/conv.elf");
  CHECK(m.images[0].reference_image == "ci/build/conv-qemu.elf");
  CHECK(m.images[0].golden.empty());
  CHECK(m.images[1].name == "dense.elf"); // no name: the file name
  CHECK(m.images[1].path == "/abs/dense.elf");
  CHECK(m.images[1].golden == "ci/golden/dense");
  CHECK(json::serialize(m.thresholds) ==
        R"([{"expected_pcc":9.8E-1},{"case":"square","image":"conv","output":"y","require_allclose":true}])");
}

TEST_CASE("manifest errors read FILE:LINE:COL: key: message") {
  CHECK(manifestError("[[image]]\npath = \"a.elf\"\ncolour = 1\n") ==
        "ci/suite.toml:3:10: image.colour: unknown key (name, path, reference_image, golden)");
  CHECK(manifestError("mode = \"all\"\n[[image]]\npath = \"a.elf\"\n") ==
        "ci/suite.toml:1:8: mode: expected \"shard\" or \"each\"");
  CHECK(manifestError("reference = \"qemux\"\n[[image]]\npath = \"a.elf\"\n") ==
        "ci/suite.toml:1:13: reference: expected \"qemu\", \"none\", \"golden\" or \"golden:DIR\"");
  CHECK(manifestError("[[image]]\nname = \"a\"\n") == "ci/suite.toml:1:1: image: needs a path");
  CHECK(manifestError("[[image]]\npath = \"/abs/\"\n") ==
        "ci/suite.toml:1:1: image: path \"/abs/\" names a directory, not an image file");
  CHECK(manifestError("[[image]]\npath = 3\n") == "ci/suite.toml:2:8: image.path: expected a string");
  CHECK(manifestError("deadline_s = -1\n[[image]]\npath = \"a.elf\"\n") ==
        "ci/suite.toml:1:14: deadline_s: expected seconds in (0, 86400]");
  CHECK(manifestError("image = \"a.elf\"\n") == "ci/suite.toml:1:9: image: expected [[image]] tables");
  CHECK(manifestError("suite = \"x\"\n") == "ci/suite.toml:1:1: image: a suite needs at least one [[image]]");
  CHECK(manifestError("[[image]]\npath = \"a.elf\"\n[[threshold]]\natol = [1]\n") ==
        "ci/suite.toml:4:8: threshold.atol: expected a string, number or boolean");
  CHECK(manifestError("threshold = 1\n[[image]]\npath = \"a.elf\"\n") ==
        "ci/suite.toml:1:13: threshold: expected [[threshold]] tables");
  CHECK(manifestError("labels = []\n[[image]]\npath = \"a.elf\"\n") ==
        "ci/suite.toml:1:10: labels: unknown key (suite, mode, reference, deadline_s, [[image]], [[threshold]])");
  // A TOML syntax error is placed too.
  CHECK(manifestError("[[image]]\npath = \n").rfind("ci/suite.toml:2:", 0) == 0);
  // Bounded: a manifest over 1 MiB is refused before it is parsed.
  CHECK(manifestError(std::string(kMaxManifestBytes + 1, '#')) == "ci/suite.toml:1:1: the file is over 1048576 bytes");
}

TEST_CASE("a thresholds file gives its [[threshold]] tables and refuses anything else with its place") {
  json::array rules;
  std::string error;
  REQUIRE(parseThresholdsFile("[[threshold]]\ncase = \"conv\"\natol = 1e-3\nignore = false\n", "t.toml", &rules, &error));
  CHECK(json::serialize(rules) == R"([{"atol":1E-3,"case":"conv","ignore":false}])");
  rules.clear();
  CHECK_FALSE(parseThresholdsFile("mode = \"each\"\n", "t.toml", &rules, &error));
  CHECK(error == "t.toml:1:8: mode: unknown table or key (expected [[threshold]] tables)");
  CHECK_FALSE(parseThresholdsFile("[[threshold]]\nexpected_pcc = \n", "t.toml", &rules, &error));
  CHECK(error.rfind("t.toml:2:", 0) == 0);
}
