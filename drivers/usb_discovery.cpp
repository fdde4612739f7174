#include "drivers/usb_discovery.h"

#include <libudev.h>
#include <libusb-1.0/libusb.h>
#include <fcntl.h>
#include <poll.h>

#include <cctype>
#include <cerrno>
#include <cstdio>
#include <stdexcept>

#include <boost/asio/io_context.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>

#include "common/status.h"

namespace hwfarm::drivers {
namespace asio = boost::asio;

namespace {

std::string portPath(libusb_device* device) {
  uint8_t ports[8];
  int n = libusb_get_port_numbers(device, ports, sizeof ports);
  std::string path = std::to_string(libusb_get_bus_number(device)) + "-";
  for (int i = 0; i < n; ++i) path += (i ? "." : "") + std::to_string(ports[i]);
  return n > 0 ? path : "usb" + std::to_string(libusb_get_bus_number(device)); // a root hub
}

std::string hex4(uint16_t v) {
  char b[5];
  std::snprintf(b, sizeof b, "%04x", v);
  return b;
}

} // namespace

BoardMatch matchBoards(const config::FleetConfig& config, const std::vector<UsbDevice>& devices) {
  BoardMatch match;
  std::vector<bool> claimed(devices.size(), false);
  std::vector<std::pair<uint16_t, uint16_t>> wanted;
  // Boards named by serial claim first, then by port, then by ids alone, so
  // a loose match never takes the device a precise one names.
  std::vector<const config::BoardConfig*> order;
  for (int pass = 0; pass < 3; ++pass)
    for (const auto& w : config.workers)
      for (const auto& b : w.boards) {
        int rank = b.usb.serial ? 0 : b.usb.port ? 1 : 2;
        if (rank == pass) order.push_back(&b);
      }
  for (const config::BoardConfig* board : order) {
    const config::BoardConfig& b = *board;
    if (b.driver != "usb" || !b.usb.vendor || !b.usb.product) continue;
    wanted.emplace_back(*b.usb.vendor, *b.usb.product);
    for (size_t i = 0; i < devices.size(); ++i) {
      const UsbDevice& d = devices[i];
      if (claimed[i] || d.vendor != *b.usb.vendor || d.product != *b.usb.product) continue;
      if (b.usb.serial && d.serial != *b.usb.serial) continue;
      if (b.usb.port && d.port != *b.usb.port) continue;
      claimed[i] = true;
      match.boards[b.name] = d;
      break;
    }
  }
  for (size_t i = 0; i < devices.size(); ++i) {
    if (claimed[i]) continue;
    for (const auto& [vendor, product] : wanted)
      if (devices[i].vendor == vendor && devices[i].product == product) {
        match.unclaimed.push_back(devices[i]);
        break;
      }
  }
  return match;
}

std::string usbHubOf(const std::string& port) {
  size_t dash = port.find('-');
  if (dash == std::string::npos || dash == 0 || dash + 1 >= port.size()) return "";
  for (char c : port)
    if (!std::isdigit(static_cast<unsigned char>(c)) && c != '-' && c != '.') return "";
  size_t dot = port.rfind('.');
  return dot == std::string::npos ? port.substr(0, dash) : port.substr(0, dot);
}

std::string boardSnippet(const UsbDevice& d) {
  std::string s = "[[worker.board]]\nname = \"CHANGE-ME\"\ntype = \"CHANGE-ME\"\nusb = { vendor = \"" + hex4(d.vendor) +
                  "\", product = \"" + hex4(d.product) + "\"";
  if (!d.serial.empty()) s += ", serial = \"" + d.serial + "\"";
  else s += ", port = \"" + d.port + "\"";
  return s + " }\n";
}

struct UsbDiscovery::Impl {
  Impl(asio::io_context& io_context, Changed c) : io(io_context), changed(std::move(c)) {
    if (libusb_init(&usb) != 0) throw std::runtime_error("libusb_init failed");
    udev_ = udev_new();
    if (!udev_) {
      release();
      throw std::runtime_error("udev_new failed");
    }
    if (libusb_has_capability(LIBUSB_CAP_HAS_HOTPLUG)) {
      // ENUMERATE reports the devices already there through the same
      // callback, so none plugged in meanwhile is missed.
      enumerating = true;
      int rc = libusb_hotplug_register_callback(
          usb, static_cast<libusb_hotplug_event>(LIBUSB_HOTPLUG_EVENT_DEVICE_ARRIVED | LIBUSB_HOTPLUG_EVENT_DEVICE_LEFT),
          LIBUSB_HOTPLUG_ENUMERATE, LIBUSB_HOTPLUG_MATCH_ANY, LIBUSB_HOTPLUG_MATCH_ANY, LIBUSB_HOTPLUG_MATCH_ANY,
          &Impl::hotplug, this, &callback);
      enumerating = false;
      if (rc != LIBUSB_SUCCESS) {
        callback = 0;
        release();
        // Without it no board would ever appear, silently.
        throw std::runtime_error(std::string("libusb_hotplug_register_callback failed: ") + libusb_error_name(rc));
      }
    } else {
      libusb_device** list = nullptr;
      ssize_t n = libusb_get_device_list(usb, &list);
      for (ssize_t i = 0; i < n; ++i) arrived(list[i]);
      libusb_free_device_list(list, 1);
    }
    // libusb signals its events (hotplug included) on these descriptors.
    const libusb_pollfd** fds = libusb_get_pollfds(usb);
    for (size_t i = 0; fds && fds[i]; ++i) {
      int fd = ::fcntl(fds[i]->fd, F_DUPFD_CLOEXEC, 3);
      if (fd < 0) {
        std::string why = Status::fromErrno("cannot duplicate libusb's descriptor " + std::to_string(fds[i]->fd), errno)
                              .message();
        libusb_free_pollfds(fds);
        for (auto& s : streams) {
          boost::system::error_code ignored;
          s->close(ignored);
        }
        streams.clear();
        if (callback) libusb_hotplug_deregister_callback(usb, callback);
        callback = 0;
        release();
        throw std::runtime_error(why);
      }
      auto stream = std::make_unique<asio::posix::stream_descriptor>(io, fd);
      wait(*stream);
      streams.push_back(std::move(stream));
    }
    libusb_free_pollfds(fds);
  }

  ~Impl() {
    for (auto& s : streams) {
      boost::system::error_code ignored;
      s->close(ignored);
    }
    if (callback) libusb_hotplug_deregister_callback(usb, callback);
    release();
  }

  // What the constructor acquired from libusb and udev (also when it throws).
  void release() {
    if (usb) libusb_exit(usb);
    usb = nullptr;
    if (udev_) udev_unref(udev_);
    udev_ = nullptr;
  }

  void wait(asio::posix::stream_descriptor& stream) {
    stream.async_wait(asio::posix::stream_descriptor::wait_read, [this, &stream](boost::system::error_code ec) {
      if (ec) return;
      timeval zero{0, 0};
      libusb_handle_events_timeout_completed(usb, &zero, nullptr);
      wait(stream);
    });
  }

  static int LIBUSB_CALL hotplug(libusb_context*, libusb_device* device, libusb_hotplug_event event, void* self) {
    auto* impl = static_cast<Impl*>(self);
    if (event == LIBUSB_HOTPLUG_EVENT_DEVICE_ARRIVED) impl->arrived(device);
    else impl->devices.erase(portPath(device));
    if (impl->changed && !impl->enumerating) impl->changed();
    return 0;
  }

  void arrived(libusb_device* device) {
    libusb_device_descriptor d{};
    if (libusb_get_device_descriptor(device, &d) != 0 || d.bDeviceClass == LIBUSB_CLASS_HUB) return;
    UsbDevice u;
    u.vendor = d.idVendor;
    u.product = d.idProduct;
    u.port = portPath(device);
    if (udev_device* dev = udev_device_new_from_subsystem_sysname(udev_, "usb", u.port.c_str())) {
      if (const char* serial = udev_device_get_sysattr_value(dev, "serial")) u.serial = serial;
      udev_device_unref(dev);
    }
    u.tty = ttyOf(u.port);
    devices[u.port] = u;
  }

  // The device node of a tty whose USB device parent is `port`.
  std::string ttyOf(const std::string& port) const {
    std::string found;
    udev_enumerate* e = udev_enumerate_new(udev_);
    udev_enumerate_add_match_subsystem(e, "tty");
    udev_enumerate_scan_devices(e);
    udev_list_entry* entry;
    udev_list_entry_foreach(entry, udev_enumerate_get_list_entry(e)) {
      udev_device* tty = udev_device_new_from_syspath(udev_, udev_list_entry_get_name(entry));
      if (!tty) continue;
      udev_device* parent = udev_device_get_parent_with_subsystem_devtype(tty, "usb", "usb_device");
      const char* node = udev_device_get_devnode(tty);
      if (parent && node && udev_device_get_sysname(parent) == port) found = node;
      udev_device_unref(tty);
      if (!found.empty()) break;
    }
    udev_enumerate_unref(e);
    return found;
  }

  asio::io_context& io;
  Changed changed;
  libusb_context* usb = nullptr;
  struct udev* udev_ = nullptr;
  libusb_hotplug_callback_handle callback = 0;
  bool enumerating = false; // the start-up pass of LIBUSB_HOTPLUG_ENUMERATE
  std::vector<std::unique_ptr<asio::posix::stream_descriptor>> streams;
  std::map<std::string, UsbDevice> devices; // by port path
};

UsbDiscovery::UsbDiscovery(asio::io_context& io, Changed changed)
    : impl_(std::make_unique<Impl>(io, std::move(changed))) {}

UsbDiscovery::~UsbDiscovery() = default;

std::vector<UsbDevice> UsbDiscovery::devices() const {
  std::vector<UsbDevice> out;
  for (const auto& [port, d] : impl_->devices) out.push_back(d);
  return out;
}

std::string UsbDiscovery::ttyOf(const std::string& port) const { return impl_->ttyOf(port); }

} // namespace hwfarm::drivers
