// The CI integration over a real hwfarmd: hwfarmctl should-run (POST
// /v1/should-run), jenkins labels, and lease export --format twister-hwmap
// (GET /v1/leases/{id}/twister-hwmap) checked with twister's own schema.
#include <catch2/catch.hpp>

#include <regex>
#include <thread>

#include <boost/json.hpp>

#include "tests/support/daemon_harness.h"

using namespace hwfarm::test;
namespace json = boost::json;
using namespace std::chrono_literals;

namespace {

CommandResult ctl(const RunningDaemon& d, std::vector<std::string> args, std::map<std::string, std::string> env = {}) {
  args.insert(args.begin(), HWFARMCTL_PATH);
  std::map<std::string, std::string> e{{"HWFARM_URL", d.url()}, {"HWFARM_TOKEN", ""}, {"CHANGE_ID", ""},
                                       {"CHANGE_TITLE", ""},    {"HWFARM_CONTEXT", ""}, {"HWFARM_LEASE_ID", ""}};
  for (const auto& [k, v] : env) e[k] = v;
  return runCommand(args, e, 60s);
}

// Two workers; tier `tier`; the tag patterns of a TVM-like project; two
// USB boards whose consoles are plain files (present while they exist) and
// a simulated one; twister mappings for the USB type and the simulator.
std::string ciFleet(const TempDir& dir, int tier) {
  std::string tty0 = dir.write("ttyACM0", ""), tty1 = dir.write("ttyACM1", "");
  std::string state = dir.file("state");
  return "[agent]\nname = \"ci-lab\"\nlisten = \"127.0.0.1:0\"\nstate_dir = \"" + state + "\"\nlock_dir = \"" + state +
         "\"\ntier = " + std::to_string(tier) + "\nanonymous = \"loopback\"\n"
         "[[worker]]\nname = \"w0\"\nnode = \"lab-a\"\n"
         "  [[worker.board]]\n  name = \"nucleo-1\"\n  type = \"nucleo-f429zi\"\n"
         "  usb = { vendor = \"0483\", product = \"374b\", serial = \"066DFF49\" }\n"
         "  serial = { port = \"" + tty0 + "\", baud = 921600 }\n"
         "  [[worker.board]]\n  name = \"nucleo-2\"\n  type = \"nucleo-f429zi\"\n"
         "  usb = { vendor = \"0483\", product = \"374b\", serial = \"066DFF50\" }\n"
         "  serial = { port = \"" + tty1 + "\" }\n"
         "[[worker]]\nname = \"w1\"\nnode = \"lab-b\"\n"
         "  [[worker.board]]\n  name = \"sim-1\"\n  type = \"mps2-an385\"\n  driver = \"qemu\"\n"
         "[should_run]\ntags = [\"microtvm\"]\nlabels = [\"hw-ci\"]\nbot_commands = [\"@tvm-bot run-odt\"]\n"
         "[[twister]]\ntype = \"nucleo-f429zi\"\nplatform = \"nucleo_f429zi\"\nrunner = \"openocd\"\n"
         "product = \"STM32 STLink\"\n"
         "[[twister]]\ntype = \"mps2-an385\"\nplatform = \"mps2/an385\"\nrunner = \"qemu\"\nbaud = 38400\n";
}

// The map through twister's schema (tests/twister_hwmap_check.py); the
// parsed map when it validates, the errors otherwise.
CommandResult checkHwmap(const std::string& map_path) {
  return runCommand({PYTHON3_PATH, std::string(HWFARM_SOURCE_DIR) + "/tests/twister_hwmap_check.py",
                     std::string(HWFARM_SOURCE_DIR) + "/tests/schemas/twister-hwmap-schema.yaml", map_path});
}

bool boardsAvailable(const RunningDaemon& d, size_t n) {
  for (int i = 0; i < 200; ++i) {
    size_t available = 0;
    json::value boards = json::parse(d.get("/v1/boards").body);
    for (const auto& b : boards.at("boards").as_array())
      available += b.at("state") == "available";
    if (available == n) return true;
    std::this_thread::sleep_for(20ms);
  }
  return false;
}

} // namespace

TEST_CASE("should-run on a tier-2 agent runs tagged PRs and says why an untagged one does not run") {
  TempDir dir;
  RunningDaemon d(dir, ciFleet(dir, 2));
  // Given a PR whose title carries the tag
  auto tagged = ctl(d, {"should-run", "--context", "pr", "--title", "[microTVM] Fix AOT"});
  CHECK(tagged.status.code == 0);
  CHECK(tagged.out == "yes: tier 2 runs PRs tagged [microtvm] or labelled hw-ci or triggered by \"@tvm-bot "
                      "run-odt\"; this one has title tag [microtvm]\nlease context: pr-tagged\n");
  // a label, and a bot command in the trigger comment (CHANGE_TITLE is the default title)
  CHECK(ctl(d, {"should-run", "--context", "pr", "--labels", "docs, hw-ci"}).status.code == 0);
  auto bot = ctl(d, {"--json", "should-run", "--context", "pr", "--comment", "LGTM\n@tvm-bot run-odt microtvm\n"},
                 {{"CHANGE_TITLE", "Fix AOT"}});
  REQUIRE(bot.status.code == 0);
  json::value body = json::parse(bot.out);
  CHECK(body.at("run") == true);
  CHECK(body.at("matched") == "comment \"@tvm-bot run-odt microtvm\"");
  CHECK(body.at("lease_context") == "pr-tagged");
  CHECK(body.at("effective_tier") == 2);
  // Without a tag: no, exit 1, and what would make it yes.
  auto untagged = ctl(d, {"should-run", "--context", "pr", "--title", "Fix AOT", "--comment", "@tvm-bot run-odt hexagon"});
  CHECK(untagged.status.code == 1);
  CHECK(untagged.out == "no: tier 2 runs only PRs tagged [microtvm] or labelled hw-ci or triggered by \"@tvm-bot "
                        "run-odt\"; this PR has none of them\n");
  // Nightly builds run; the context comes from $HWFARM_CONTEXT by default.
  auto nightly = ctl(d, {"should-run"}, {{"HWFARM_CONTEXT", "nightly"}});
  CHECK(nightly.status.code == 0);
  CHECK(nightly.out == "yes: tier 2 runs nightly builds\nlease context: nightly\n");
}

TEST_CASE("should-run on a tier-1 agent runs every PR and a tier-3 agent none") {
  TempDir one, three;
  RunningDaemon tier1(one, ciFleet(one, 1));
  RunningDaemon tier3(three, ciFleet(three, 3));
  auto plain = ctl(tier1, {"should-run", "--context", "pr", "--title", "Fix a typo"});
  CHECK(plain.status.code == 0);
  CHECK(plain.out == "yes: tier 1 runs every PR\nlease context: pr\n");
  auto refused = ctl(tier3, {"should-run", "--context", "pr", "--title", "[microtvm] x"});
  CHECK(refused.status.code == 1);
  CHECK(refused.out == "no: tier 3 runs no PRs, only nightly and manual builds\n");
  CHECK(ctl(tier3, {"should-run", "--context", "nightly"}).status.code == 0);
}

TEST_CASE("POST /v1/should-run refuses unknown fields and oversized or malformed input") {
  TempDir dir;
  RunningDaemon d(dir, ciFleet(dir, 2));
  auto detail = [&](const std::string& body) {
    auto r = d.request("POST", "/v1/should-run", body);
    REQUIRE(r.status == 400);
    return std::string(json::parse(r.body).at("detail").as_string());
  };
  CHECK(detail(R"({"title":"x"})") == "context: required field is missing");
  CHECK(detail(R"({"context":"weekly"})") == "context: expected pr, pr-tagged, nightly or manual, got \"weekly\"");
  CHECK(detail(R"({"context":"pr","tags":[]})") == "tags: unknown field");
  CHECK(detail(R"({"context":"pr","labels":"hw-ci"})") == "labels: expected an array of strings");
  CHECK(detail(R"({"context":"pr","title":"a\nb"})") == "title: contains a control character");
  CHECK(detail(R"({"context":"pr","title":")" + std::string(1025, 'x') + "\"}") == "title: longer than 1024 bytes");
  std::string many = R"({"context":"pr","labels":[)";
  for (int i = 0; i < 101; ++i) many += std::string(i ? "," : "") + "\"l\"";
  CHECK(detail(many + "]}") == "labels: more than 100 labels");
  CHECK(d.request("GET", "/v1/should-run", "").status == 405);
  // The daemon's answer reaches hwfarmctl's exit code as an error (not a "no").
  CHECK(ctl(d, {"should-run", "--context", "weekly"}).status.code == 1);
  CHECK(ctl(d, {"should-run", "--tier", "2"}).status.code == 2);
}

TEST_CASE("jenkins labels gives each worker's node hwfarm its board types and the tier") {
  TempDir dir;
  RunningDaemon d(dir, ciFleet(dir, 2));
  auto labels = ctl(d, {"jenkins", "labels"});
  CHECK(labels.status.code == 0);
  CHECK(labels.out == "lab-a hwfarm nucleo-f429zi hwfarm-tier2\nlab-b hwfarm mps2-an385 hwfarm-tier2\n");
  auto js = ctl(d, {"--json", "jenkins", "labels"});
  REQUIRE(js.status.code == 0);
  json::value body = json::parse(js.out);
  CHECK(body.at("agent") == "ci-lab");
  CHECK(json::serialize(body.at("workers").at(0)) ==
        R"({"worker":"w0","node":"lab-a","labels":["hwfarm","nucleo-f429zi","hwfarm-tier2"]})");
  CHECK(ctl(d, {"jenkins", "nodes"}).status.code == 2);
}

TEST_CASE("lease export writes a twister hardware map that twister's schema accepts") {
  TempDir dir;
  RunningDaemon d(dir, ciFleet(dir, 1));
  REQUIRE(boardsAvailable(d, 3));
  // Given both USB boards leased: the map from inside lease run ($HWFARM_LEASE_ID)
  std::string map = dir.file("map.yml");
  auto run = ctl(d, {"lease", "run", "--type", "nucleo-f429zi", "--count", "2", "--context", "manual", "--", HWFARMCTL_PATH,
                     "lease", "export", "--format", "twister-hwmap", "--out", map});
  REQUIRE(run.status.code == 0);
  auto checked = checkHwmap(map);
  INFO(readFile(map) << checked.err);
  REQUIRE(checked.status.code == 0);
  json::array entries = json::parse(checked.out).as_array();
  REQUIRE(entries.size() == 2);
  CHECK(json::serialize(entries[0]) ==
        R"({"connected":true,"id":"066DFF49","platform":"nucleo_f429zi","product":"STM32 STLink","runner":"openocd","serial":")" +
            dir.file("ttyACM0") + R"(","baud":921600})");
  CHECK(entries[1].at("id") == "066DFF50");
  CHECK(entries[1].at("baud") == 115200); // the board's serial.baud default
  // A simulated board: its own baud, no serial device, a note on its console.
  auto acquired = ctl(d, {"-q", "lease", "acquire", "--type", "mps2-an385", "--context", "manual"});
  REQUIRE(acquired.status.code == 0);
  std::string id = acquired.out.substr(0, acquired.out.size() - 1);
  auto sim = ctl(d, {"lease", "export", "--format", "twister-hwmap", "--lease", id});
  REQUIRE(sim.status.code == 0);
  std::string sim_map = dir.write("sim.yml", sim.out);
  auto sim_checked = checkHwmap(sim_map);
  INFO(sim.out << sim_checked.err);
  REQUIRE(sim_checked.status.code == 0);
  json::value entry = json::parse(sim_checked.out).at(0);
  CHECK(entry.at("platform") == "mps2/an385");
  CHECK(entry.at("baud") == 38400);
  CHECK_FALSE(entry.as_object().contains("serial"));
  CHECK(std::string(entry.at("notes").as_string()) == "hwfarm board sim-1 (qemu): no serial device; its console is hwfarmctl console " + id +
                                 " sim-1");
  // The schema is really applied: the map without its runner is refused.
  std::string broken = dir.write("broken.yml", std::regex_replace(sim.out, std::regex("  runner: .*\n"), ""));
  auto refused = checkHwmap(broken);
  CHECK(refused.status.code == 1);
  CHECK(refused.err.find("Cannot find required key 'runner'") != std::string::npos);
  // An ended lease, an unknown one, and a bad format.
  REQUIRE(ctl(d, {"lease", "release", id}).status.code == 0);
  auto ended = ctl(d, {"lease", "export", "--format", "twister-hwmap", "--lease", id});
  CHECK(ended.status.code == 1);
  CHECK(ended.err.find("HTTP 409: not_active: lease " + id + " has ended (released)") != std::string::npos);
  CHECK(ctl(d, {"lease", "export", "--format", "twister-hwmap", "--lease", "nope"}).status.code == 1);
  CHECK(ctl(d, {"lease", "export", "--format", "lava", "--lease", id}).status.code == 2);
  CHECK(ctl(d, {"lease", "export", "--format", "twister-hwmap"}).status.code == 2);
}

TEST_CASE("lease export names the board types that have no twister mapping") {
  TempDir dir;
  std::string fleet = ciFleet(dir, 1);
  fleet = fleet.substr(0, fleet.find("[[twister]]\ntype = \"mps2-an385\""));
  RunningDaemon d(dir, fleet);
  auto run = ctl(d, {"lease", "run", "--type", "mps2-an385", "--context", "manual", "--", HWFARMCTL_PATH, "lease",
                     "export", "--format", "twister-hwmap"});
  CHECK(run.status.code == 1);
  CHECK(run.err.find("HTTP 409: no_twister_mapping: no [[twister]] entry in the fleet config for board type "
                     "\"mps2-an385\"") != std::string::npos);
}
