// USB discovery against devices faked at the kernel interface with umockdev
// (run under umockdev-wrapper): enumeration, matching by vendor, product and
// serial, unclaimed devices, the console tty through udev, and hotplug.
#include <catch2/catch.hpp>

#include <umockdev.h>

#include <boost/asio/io_context.hpp>

#include "config/loader.h"
#include "drivers/usb_discovery.h"

using namespace hwfarm::drivers;
using namespace std::chrono_literals;

namespace {

const char* kStlinkPath = "/sys/devices/pci0000:00/0000:00:14.0/usb1/1-1";

// An ST-LINK/V2-1 (0483:374b) on port 1-1 with its ttyACM0 console, and a
// second one on 1-2 that no board claims.
std::string stlink(const std::string& port, const std::string& devnum, const std::string& serial) {
  return "P: /devices/pci0000:00/0000:00:14.0/usb1/" + port + "\n"
         "N: bus/usb/001/" + devnum + "\n"
         "E: DEVNAME=/dev/bus/usb/001/" + devnum + "\n"
         "E: DEVTYPE=usb_device\nE: DRIVER=usb\nE: SUBSYSTEM=usb\nE: BUSNUM=001\nE: DEVNUM=" + devnum + "\n"
         "A: idVendor=0483\nA: idProduct=374b\nA: serial=" + serial + "\nA: busnum=1\nA: devnum=" +
         std::to_string(std::stoi(devnum)) + "\n"
         // device descriptor (0483:374b, 1 configuration) + a configuration with one interface
         "H: descriptors=12010002EF02014083044B370001010203010902190001010080320904000001FF00000007058102400000\n";
}

std::string ttyAcm(const std::string& port, const std::string& tty, const std::string& serial) {
  return "P: /devices/pci0000:00/0000:00:14.0/usb1/" + port + "/" + port + ":1.2\n"
         "E: DEVTYPE=usb_interface\nE: DRIVER=cdc_acm\nE: SUBSYSTEM=usb\n\n"
         "P: /devices/pci0000:00/0000:00:14.0/usb1/" + port + "/" + port + ":1.2/tty/" + tty + "\n"
         "N: " + tty + "\nE: DEVNAME=/dev/" + tty + "\nE: SUBSYSTEM=tty\nE: ID_SERIAL_SHORT=" + serial + "\n";
}

hwfarm::config::FleetConfig fleet(const std::string& serial) {
  auto r = hwfarm::config::parseFleetConfig(
      "[agent]\nname = \"lab\"\ntier = 1\n[[worker]]\nname = \"w\"\n"
      "  [[worker.board]]\n  name = \"nucleo-1\"\n  type = \"nucleo\"\n"
      "  usb = { vendor = \"0483\", product = \"374b\", serial = \"" + serial + "\" }\n",
      "fleet.toml");
  REQUIRE(r.ok());
  return *r.config;
}

struct Testbed {
  UMockdevTestbed* tb = umockdev_testbed_new();
  ~Testbed() { g_object_unref(tb); }
  void add(const std::string& description) {
    GError* error = nullptr;
    if (!umockdev_testbed_add_from_string(tb, description.c_str(), &error)) FAIL(error->message);
  }
};

} // namespace

TEST_CASE("discovery matches boards by vendor and product and serial and lists the rest as unclaimed") {
  INFO("run under umockdev-wrapper (LD_PRELOAD=" << (getenv("LD_PRELOAD") ? getenv("LD_PRELOAD") : "") << ")");
  Testbed bed;
  bed.add(stlink("1-1", "002", "066DFF535155878281151932") + "\n" + ttyAcm("1-1", "ttyACM0", "066DFF535155878281151932"));
  bed.add(stlink("1-2", "003", "0670FF484849785087085514"));
  boost::asio::io_context io;
  UsbDiscovery discovery(io, nullptr);
  auto devices = discovery.devices();
  REQUIRE(devices.size() == 2);
  REQUIRE(devices[0].port == "1-1");
  REQUIRE(devices[0].vendor == 0x0483);
  REQUIRE(devices[0].product == 0x374b);
  REQUIRE(devices[0].serial == "066DFF535155878281151932");
  REQUIRE(devices[0].tty == "/dev/ttyACM0");
  REQUIRE(devices[1].tty.empty());

  auto match = matchBoards(fleet("066DFF535155878281151932"), devices);
  REQUIRE(match.boards.at("nucleo-1").port == "1-1");
  REQUIRE(match.unclaimed.size() == 1);
  REQUIRE(match.unclaimed[0].serial == "0670FF484849785087085514");
  REQUIRE(boardSnippet(match.unclaimed[0]) ==
          "[[worker.board]]\nname = \"CHANGE-ME\"\ntype = \"CHANGE-ME\"\n"
          "usb = { vendor = \"0483\", product = \"374b\", serial = \"0670FF484849785087085514\" }\n");

  // A serial that matches nothing: the board is absent, both devices unclaimed.
  auto mismatch = matchBoards(fleet("NOT-PLUGGED-IN"), devices);
  REQUIRE(mismatch.boards.empty());
  REQUIRE(mismatch.unclaimed.size() == 2);
}

TEST_CASE("a board named by serial gets its device even when a looser board comes first") {
  auto r = hwfarm::config::parseFleetConfig(
      "[agent]\nname = \"lab\"\ntier = 1\n[[worker]]\nname = \"w\"\n"
      "  [[worker.board]]\n  name = \"any\"\n  type = \"n\"\n  usb = { vendor = \"0483\", product = \"374b\" }\n"
      "  [[worker.board]]\n  name = \"exact\"\n  type = \"n\"\n"
      "  usb = { vendor = \"0483\", product = \"374b\", serial = \"B\" }\n",
      "fleet.toml");
  REQUIRE(r.ok());
  std::vector<UsbDevice> devices{{0x0483, 0x374b, "B", "1-1", ""}, {0x0483, 0x374b, "A", "1-2", ""}};
  auto match = matchBoards(*r.config, devices);
  REQUIRE(match.boards.at("exact").serial == "B");
  REQUIRE(match.boards.at("any").serial == "A");
  REQUIRE(match.unclaimed.empty());
}

TEST_CASE("hotplug: a board that is unplugged and plugged back is followed without polling") {
  INFO("run under umockdev-wrapper (LD_PRELOAD=" << (getenv("LD_PRELOAD") ? getenv("LD_PRELOAD") : "") << ")");
  Testbed bed;
  bed.add(stlink("1-1", "002", "066DFF535155878281151932"));
  boost::asio::io_context io;
  int changes = 0;
  UsbDiscovery discovery(io, [&] { ++changes; });
  REQUIRE(discovery.devices().size() == 1);

  // Unplug: the remove uevent first (removing the device alone sends none).
  umockdev_testbed_uevent(bed.tb, kStlinkPath, "remove");
  umockdev_testbed_remove_device(bed.tb, kStlinkPath);
  auto start = std::chrono::steady_clock::now();
  while (changes < 1 && std::chrono::steady_clock::now() - start < 10s) io.run_one_for(100ms);
  REQUIRE(changes == 1);
  REQUIRE(discovery.devices().empty());

  // Plug it back in.
  bed.add(stlink("1-1", "002", "066DFF535155878281151932"));
  umockdev_testbed_uevent(bed.tb, kStlinkPath, "add");
  start = std::chrono::steady_clock::now();
  while (changes < 2 && std::chrono::steady_clock::now() - start < 10s) io.run_one_for(100ms);
  REQUIRE(changes == 2);
  REQUIRE(discovery.devices().size() == 1);
  REQUIRE(discovery.devices()[0].serial == "066DFF535155878281151932");
}

TEST_CASE("a device's hub in uhubctl's location syntax, for infrastructure events") {
  CHECK(hwfarm::drivers::usbHubOf("1-1.4") == "1-1");
  CHECK(hwfarm::drivers::usbHubOf("3-2.1.7") == "3-2.1");
  CHECK(hwfarm::drivers::usbHubOf("1-4") == "1");
  CHECK(hwfarm::drivers::usbHubOf("") == "");
  CHECK(hwfarm::drivers::usbHubOf("1-") == "");
  CHECK(hwfarm::drivers::usbHubOf("x-1") == "");
  CHECK(hwfarm::drivers::usbHubOf("../1-1") == "");
}
