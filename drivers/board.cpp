#include "drivers/board.h"

#include <cstdio>
#include <filesystem>
#include <mutex>

#include "drivers/flasher.h"
#include "drivers/qemu_board.h"

namespace hwfarm::drivers {
namespace {

// A board on USB: flashed by its preset or command, powered by its switch,
// its console a tty.
class UsbBoard : public Board {
 public:
  UsbBoard(config::BoardConfig c, std::string work_dir, TtyResolver resolve)
      : c_(std::move(c)), work_dir_(std::move(work_dir)), resolve_(std::move(resolve)) {}

  Status flash(const std::string& image, const std::string& log_path) override {
    if (c_.flash.driver.empty())
      return Status::infrastructure(Code::unavailable, "board " + c_.name + " has no flasher configured");
    std::filesystem::create_directories(work_dir_);
    return drivers::flash(c_.flash, image, target(), log_path, work_dir_).withContext("flashing board " + c_.name);
  }
  Status power(PowerAction action, const std::string& log_path) override {
    return drivers::power(c_.power, action, target(), log_path);
  }
  Result<std::string> console() override {
    if (c_.serial.port != "auto") return c_.serial.port;
    std::string tty = resolve_ ? resolve_(c_.name) : "";
    if (tty.empty())
      return Status::infrastructure(Code::unavailable,
                                    "board " + c_.name + ": no console tty found under its USB device");
    return tty;
  }
  void reset() override {}
  bool consoleFollowsPower() const override { return false; }

 private:
  FlashTarget target() const {
    std::string port = c_.serial.port;
    if (port == "auto") port = resolve_ ? resolve_(c_.name) : "";
    return {c_.name, c_.usb.serial.value_or(""), port};
  }
  config::BoardConfig c_;
  std::string work_dir_;
  TtyResolver resolve_;
};

class SimulatedBoard : public Board {
 public:
  // A fleet board is always a run's target (SimRole, drivers/qemu_board.h).
  SimulatedBoard(const config::BoardConfig& c, const std::string& work_dir)
      : qemu_(c.name, c.qemu, work_dir, SimRole::target) {}

  Status flash(const std::string& image, const std::string& log_path) override {
    std::lock_guard lock(mutex_);
    Status s = qemu_.flash(image);
    if (std::FILE* log = std::fopen(log_path.c_str(), "ae")) {
      std::fprintf(log, "%s\n", s.ok() ? ("staged " + image + " for the simulator").c_str() : s.message().c_str());
      std::fclose(log);
    }
    return s;
  }
  Status power(PowerAction action, const std::string&) override {
    std::lock_guard lock(mutex_);
    if (action != PowerAction::on) qemu_.powerOff();
    setConsole("", !powersOff(action));
    if (powersOff(action)) return Status::success(); // a simulator needs no off time
    std::string console;
    Status s = qemu_.powerOn(&console);
    setConsole(console, false);
    return s;
  }
  // Answers at once, also while power() starts QEMU (it runs on the event
  // loop, which must never wait for a driver).
  Result<std::string> console() override {
    std::lock_guard lock(console_mutex_);
    if (console_.empty())
      return Status::infrastructure(Code::unavailable, starting_ ? "the simulated board is still powering on"
                                                                 : "the simulated board is off: power it on first");
    return console_;
  }
  void reset() override {
    std::lock_guard lock(mutex_);
    qemu_.powerOff();
    qemu_.clearImage();
    setConsole("", false);
  }
  bool consoleFollowsPower() const override { return true; }
  ProcessEnd processEnd(std::chrono::milliseconds timeout) override {
    std::lock_guard lock(mutex_);
    std::optional<QemuEnd> end = qemu_.waitEnd(timeout);
    ProcessEnd e;
    if (!end) return e;
    e.lockup = drivers::guestLockup(qemu_.logPath());
    e.reset = end->guest;
    if (!e.lockup.empty() || e.reset) e.evidence = end->evidence();
    else e.crashed = Status::infrastructure(Code::unavailable, end->describe("the simulator"), end->evidence());
    return e;
  }

 private:
  void setConsole(const std::string& console, bool starting) {
    std::lock_guard lock(console_mutex_);
    console_ = console;
    starting_ = starting;
  }

  std::mutex mutex_; // held by flash/power/reset (worker threads) for as long as they run
  QemuBoard qemu_;
  std::mutex console_mutex_; // guards console_ and starting_; never held across driver work
  std::string console_;
  bool starting_ = false;
};

} // namespace

std::unique_ptr<Board> makeBoard(const config::BoardConfig& config, const std::string& work_dir,
                                 TtyResolver resolve_tty) {
  if (config.driver == "qemu") return std::make_unique<SimulatedBoard>(config, work_dir);
  return std::make_unique<UsbBoard>(config, work_dir, std::move(resolve_tty));
}

} // namespace hwfarm::drivers
