#include "drivers/qemu_board.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <vector>

#include "drivers/spawn.h"

namespace hwfarm::drivers {

QemuBoard::QemuBoard(std::string name, config::QemuConfig config, std::string work_dir, SimRole role)
    : name_(std::move(name)), config_(std::move(config)), work_dir_(std::move(work_dir)), role_(role) {}

QemuBoard::~QemuBoard() { powerOff(); }

Status QemuBoard::flash(const std::string& image) {
  std::error_code ec;
  std::filesystem::create_directories(work_dir_, ec);
  std::string staged = work_dir_ + "/" + name_ + ".elf";
  std::filesystem::copy_file(image, staged, std::filesystem::copy_options::overwrite_existing, ec);
  if (ec) return Status::fromErrno("cannot stage image " + image, ec.value());
  image_ = staged;
  return Status::success();
}

void QemuBoard::clearImage() {
  if (!image_.empty()) ::unlink(image_.c_str());
  image_.clear();
}

namespace {

// The generic-loader device that writes `role` into guest RAM at reset.
std::string identityLoader(SimRole role) {
  char text[80];
  std::snprintf(text, sizeof text, "loader,addr=0x%x,data=%u,data-len=4", static_cast<unsigned>(kSimIdentityAddress),
                static_cast<unsigned>(role));
  return text;
}

} // namespace

Status QemuBoard::powerOn(std::string* console) {
  if (running()) return Status::infrastructure(Code::conflict, "board " + name_ + " is already powered on");
  if (image_.empty()) return Status::infrastructure(Code::conflict, "board " + name_ + " has no image: flash it first");
  // QEMU sees absolute paths (inside its sandbox the working directory is
  // its socket directory); the console keeps the configured form.
  std::error_code ec;
  std::string dir = std::filesystem::absolute(work_dir_, ec).lexically_normal().string();
  SandboxSpec spec;
  spec.board = name_;
  spec.image = std::filesystem::absolute(image_, ec).lexically_normal().string();
  spec.socket_dir = dir + "/sock";
  spec.socket = spec.socket_dir + "/" + name_ + ".uart";
  if (spec.socket.size() > 107)
    return Status::infrastructure(Code::invalid_argument, "the UART socket path " + spec.socket +
                                                              " is longer than 107 bytes: use a shorter state_dir");
  std::filesystem::create_directories(spec.socket_dir, ec);
  if (ec) return Status::fromErrno("cannot create " + spec.socket_dir, ec.value());
  ::unlink(spec.socket.c_str());
  spec.qemu = findProgram(config_.binary);
  if (!spec.qemu.empty()) spec.qemu = std::filesystem::absolute(spec.qemu, ec).lexically_normal().string();
  if (spec.qemu.empty())
    return Status::infrastructure(Code::not_found,
                                  "QEMU did not start for board " + name_ + ": \"" + config_.binary + "\" not found" +
                                      (config_.binary.find('/') == std::string::npos ? " in PATH" : "") +
                                      " or not executable");
  // No semihosting: the firmware reports its status on the console.
  spec.qemu_args = {"-M", config_.machine};
  if (!config_.cpu.empty()) spec.qemu_args.insert(spec.qemu_args.end(), {"-cpu", config_.cpu});
  spec.qemu_args.insert(spec.qemu_args.end(),
                        {"-display", "none", "-monitor", "none", "-nic", "none", "-sandbox",
                         "on,obsolete=deny,elevateprivileges=deny,spawn=deny,resourcecontrol=deny", "-chardev",
                         "socket,id=uart0,path=" + spec.socket + ",server=on,wait=on", "-serial", "chardev:uart0",
                         "-device", identityLoader(role_), "-kernel", spec.image});
  spec.qemu_args.insert(spec.qemu_args.end(), config_.extra_args.begin(), config_.extra_args.end());
  // Under the packaged units, the QEMU sandbox service makes the sandbox
  // (hwfarmd's own unit may not create namespaces).
  const char* service = std::getenv("HWFARM_QEMU_SANDBOX");
  Result<std::unique_ptr<Sandbox>> started = startSandbox(spec, logPath(), service ? service : "");
  if (!started) return std::move(started).takeStatus();
  sandbox_ = std::move(started.value());
  *console = "unix:" + work_dir_ + "/sock/" + name_ + ".uart";
  return Status::success();
}

bool QemuBoard::running() { return sandbox_ && sandbox_->running(); }

std::optional<int> QemuBoard::exitStatus() { return sandbox_ ? sandbox_->exitStatus() : std::nullopt; }

pid_t QemuBoard::pid() const { return sandbox_ ? sandbox_->pid() : -1; }

void QemuBoard::powerOff() {
  if (sandbox_) sandbox_->stop();
  sandbox_.reset();
}

} // namespace hwfarm::drivers
