// daemon/core/run/naming: artifact names never collide.
#include <catch2/catch.hpp>

#include <set>

#include "daemon/core/run/naming.h"

using namespace hwfarm::run;

TEST_CASE("names are normalized to [0-9A-Za-z_] and trimmed of '_'") {
  CHECK(normalizeName("nucleo-f429zi") == "nucleo_f429zi");
  CHECK(normalizeName("sim m3 (a)") == "sim_m3_a");
  CHECK(normalizeName("__x__y__") == "x_y");
  CHECK(normalizeName("../../etc/passwd") == "etc_passwd");
  CHECK(normalizeName("\xc3\xa9t\xc3\xa9") == "t");
  CHECK(normalizeName("---") == "unnamed");
  CHECK(normalizeName("", "target") == "target");
}

TEST_CASE("two targets sharing a name get _0 and _1 in target order, a unique one no index, the reference _ref") {
  RunNames n = runNames({"nucleo", "qemu", "nucleo"}, std::string("qemu"));
  CHECK(n.targets == std::vector<std::string>{"nucleo_0", "qemu", "nucleo_1"});
  CHECK(n.reference == "qemu_ref");
  CHECK(tracePath("pass", n.targets[0]) == "traces/pass__nucleo_0.txt");
  CHECK(tracePath("pass", n.reference) == "traces/pass__qemu_ref.txt");
  CHECK(flashLogPath("pass", "nucleo_1") == "logs/flash__pass__nucleo_1.txt");
  CHECK(goldenPath("nucleo_1") == "golden_results__nucleo_1.json");
  CHECK(runNames({"a"}, std::nullopt).reference.empty());
}

TEST_CASE("names that normalize alike, and names that look indexed, still never collide") {
  // "nucleo-0" normalizes to a name the duplicates would get; it keeps it
  // and they skip it.
  RunNames n = runNames({"nucleo", "nucleo-0", "nucleo", "nucleo/x", "nucleo x", "qemu_ref"}, std::string("qemu"));
  CHECK(n.targets == std::vector<std::string>{"nucleo_1", "nucleo_0", "nucleo_2", "nucleo_x_0", "nucleo_x_1", "qemu_ref"});
  CHECK(n.reference == "qemu_0_ref");
  std::set<std::string> all(n.targets.begin(), n.targets.end());
  all.insert(n.reference);
  CHECK(all.size() == n.targets.size() + 1);
}

TEST_CASE("images and output files get distinct names by the same rule") {
  CHECK(imageNames({"build/pass.elf", "pass-elf", "fail.bin", "x/fail.hex", "model.tflite"}) ==
        std::vector<std::string>{"pass", "pass_elf", "fail_0", "fail_1", "model_tflite"});
  CHECK(outputFileNames({"square.y", "test_add.py::t.y", "a/b.y", "a:b.y"}) ==
        std::vector<std::string>{"square.y.npy", "test_add_py_t.y.npy", "a_b.y_0.npy", "a_b.y_1.npy"});
  CHECK(outputDir("pass", "nucleo_0") == "outputs/pass__nucleo_0");
}

TEST_CASE("a name too long for a file name is cut to its start and a hash of the whole, the same every time") {
  std::string long_a(250, 'a'), long_b = std::string(249, 'a') + "b";
  std::string a = normalizeName(long_a), b = normalizeName(long_b);
  CHECK(a.size() == kMaxNameBytes);
  CHECK(a.rfind(std::string(kMaxNameBytes - 9, 'a') + "_", 0) == 0);
  CHECK(a == normalizeName(long_a)); // deterministic
  CHECK(a != b);                     // names that share a start stay apart
  CHECK(normalizeName(std::string(kMaxNameBytes, 'x')) == std::string(kMaxNameBytes, 'x'));
  // A 250-byte case and a 250-byte output make one file name under 255 bytes.
  std::vector<std::string> files = outputFileNames({long_a + "." + long_b});
  REQUIRE(files.size() == 1);
  CHECK(files[0].size() <= 2 * kMaxNameBytes + 5);
  CHECK(files[0].size() < 255);
}
