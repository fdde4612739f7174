// USB discovery: which boards are plugged in, found with libusb at start-up
// and followed through libusb's hotplug events on the daemon's event loop
// (no polling). Serial numbers and console ttys come from udev (the kernel's
// sysfs copy of iSerialNumber and the tty child of the USB device), so no
// device has to be opened to identify it.
//
// Thread safety: the io_context's thread only.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "config/fleet_config.h"

namespace boost::asio {
class io_context;
}

namespace hwfarm::drivers {

struct UsbDevice {
  uint16_t vendor = 0;
  uint16_t product = 0;
  std::string serial; // may be empty
  std::string port;   // "1-1.4": bus and port path
  std::string tty;    // console node of a tty child ("/dev/ttyACM0"), may be empty
};

// Which configured boards are which devices (pure).
struct BoardMatch {
  std::map<std::string, UsbDevice> boards; // board name -> its device
  // Devices of a configured vendor:product that no board claims, so an
  // operator can copy their serial into the config.
  std::vector<UsbDevice> unclaimed;
};
BoardMatch matchBoards(const config::FleetConfig& config, const std::vector<UsbDevice>& devices);

// The hub a device at `port` ("1-1.4": bus 1, port 4 of the hub at 1-1)
// hangs off, in uhubctl's location syntax: "1-1"; "1" for a root hub's
// port ("1-4"); "" for a path that is not one.
std::string usbHubOf(const std::string& port);

// A [[worker.board]] snippet for an unclaimed device.
std::string boardSnippet(const UsbDevice& device);

class UsbDiscovery {
 public:
  using Changed = std::function<void()>;
  // Enumerates now; `changed` runs after every arrival or departure. Throws
  // std::runtime_error when libusb cannot start (start-up only).
  UsbDiscovery(boost::asio::io_context& io, Changed changed);
  ~UsbDiscovery();
  UsbDiscovery(const UsbDiscovery&) = delete;
  UsbDiscovery& operator=(const UsbDiscovery&) = delete;

  std::vector<UsbDevice> devices() const;
  // Looks the tty up again (a tty child may bind after its USB parent).
  std::string ttyOf(const std::string& port) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

} // namespace hwfarm::drivers
