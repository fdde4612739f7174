// hwfarmd with USB devices faked by umockdev (the daemon runs under
// umockdev-run with two ST-LINK/V2-1 probes): the configured one is present
// and leasable with its console tty, the other is listed as unclaimed.
#include <catch2/catch.hpp>

#include <boost/json.hpp>
#include <thread>

#include "tests/support/daemon_harness.h"

using namespace hwfarm::test;
namespace json = boost::json;
using namespace std::chrono_literals;

TEST_CASE("a USB board found by discovery is leasable and an unknown probe is unclaimed") {
  TempDir dir;
  std::string config = qemuFleet(dir.file("state"), 0) +
                       "  [[worker.board]]\n  name = \"nucleo-1\"\n  type = \"nucleo-f429zi\"\n"
                       "  usb = { vendor = \"0483\", product = \"374b\", serial = \"066DFF535155878281151932\" }\n"
                       "  [[worker.board]]\n  name = \"nucleo-2\"\n  type = \"nucleo-f429zi\"\n"
                       "  usb = { vendor = \"0483\", product = \"374b\", serial = \"NOT-PLUGGED-IN\" }\n";
  RunningDaemon d(dir, config, {}, {UMOCKDEV_RUN, "-d", std::string(HWFARM_SOURCE_DIR) + "/tests/usb/stlink-pair.umockdev",
                                    "--"});
  json::value boards;
  for (int i = 0; i < 300; ++i) {
    boards = json::parse(d.get("/v1/boards").body);
    if (boards.at("boards").at(0).at("state").as_string() == "available") break;
    std::this_thread::sleep_for(10ms);
  }
  REQUIRE(boards.at("boards").at(0).at("state").as_string() == "available");
  REQUIRE(boards.at("boards").at(1).at("state").as_string() == "offline");

  auto r = d.request("POST", "/v1/leases", R"({"selector":{"type":"nucleo-f429zi"},"context":"manual"})", "");
  REQUIRE(r.status == 201);
  json::value lease = json::parse(r.body);
  REQUIRE(lease.at("boards").at(0).at("name").as_string() == "nucleo-1");
  REQUIRE(lease.at("boards").at(0).at("usb_serial").as_string() == "066DFF535155878281151932");

  auto unclaimed = runCommand({HWFARMCTL_PATH, "--url", d.url(), "boards", "--unclaimed"});
  REQUIRE(unclaimed.status.code == 0);
  REQUIRE(unclaimed.out == "# 0483:374b on port 1-2\n"
                           "[[worker.board]]\nname = \"CHANGE-ME\"\ntype = \"CHANGE-ME\"\n"
                           "usb = { vendor = \"0483\", product = \"374b\", serial = \"0670FF484849785087085514\" }\n\n");
}
