#include "drivers/sim_launcher.h"

#include <poll.h>
#include <signal.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <list>

#include "drivers/process_table.h"
#include "drivers/qemu_board.h"
#include "drivers/reaper.h"
#include "drivers/serial_port.h"
#include "drivers/spawn.h"

namespace hwfarm::drivers {
namespace {

constexpr std::string_view kMagic = "hwfarm-launch 1";
constexpr int kLaunchFds = 3;           // log, info, status
constexpr size_t kMaxSimulators = 256;  // connections one launcher serves at once

Status bad(const std::string& what) {
  return Status::infrastructure(Code::invalid_argument, "launch request: " + what);
}

// An absolute, normalized path other than "/".
bool plainAbsolute(const std::string& path) {
  std::filesystem::path p(path);
  return p.is_absolute() && path != "/" && p.lexically_normal().string() == path;
}

bool isMark(const std::string& mark) {
  for (unsigned char c : mark)
    if (c < 0x20 || c == 0x7f) return false;  // printed in the journal: no forged lines
  for (const char* key : {kInstanceMark, kOwnerMark, kChildMark}) {
    std::string prefix = std::string(key) + "=";
    if (mark.rfind(prefix, 0) == 0) return true;
  }
  return false;
}

void sendText(int fd, const std::string& text) {
  // A peer that went away: its end is handled where its connection is read.
  (void)::send(fd, text.data(), text.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
}

// bubblewrap's child (the sandbox's pid 1, in a session of its own, so out
// of bubblewrap's group) and then bubblewrap's group, SIGKILLed.
void killSandbox(pid_t bwrap) {
  signalChildren(bwrap, SIGKILL);
  ::kill(-bwrap, SIGKILL);
}

}  // namespace

std::string encodeLaunchRequest(const LaunchRequest& request) {
  std::string out(kMagic);
  out += '\0';
  auto field = [&out](std::string_view key, const std::string& value) {
    out.append(key).append("=").append(value);
    out += '\0';
  };
  field("image", request.image);
  field("socket_dir", request.socket_dir);
  field("proc", request.with_proc ? "1" : "0");
  for (const auto& mark : request.marks) field("mark", mark);
  for (const auto& arg : request.qemu) field("arg", arg);
  return out;
}

Result<LaunchRequest> parseLaunchRequest(std::string_view payload) {
  if (payload.size() > kLaunchRequestMax) return bad("larger than " + std::to_string(kLaunchRequestMax) + " bytes");
  if (payload.empty() || payload.back() != '\0') return bad("not a list of NUL-terminated fields");
  std::vector<std::string_view> fields;
  for (size_t at = 0; at < payload.size();) {
    size_t end = payload.find('\0', at);
    fields.push_back(payload.substr(at, end - at));
    at = end + 1;
  }
  if (fields[0] != kMagic) return bad("not \"" + std::string(kMagic) + "\" (another hwfarm version's launcher?)");
  LaunchRequest request;
  bool has_image = false, has_dir = false, has_proc = false;
  for (size_t i = 1; i < fields.size(); ++i) {
    std::string_view f = fields[i];
    size_t eq = f.find('=');
    if (eq == std::string_view::npos) return bad("field " + std::to_string(i) + " has no '='");
    std::string key(f.substr(0, eq)), value(f.substr(eq + 1));
    auto once = [&](bool* seen) -> Status {
      if (*seen) return bad(key + " given twice");
      *seen = true;
      return Status::success();
    };
    if (key == "image" || key == "socket_dir") {
      if (Status s = once(key == "image" ? &has_image : &has_dir); !s.ok()) return s;
      if (!plainAbsolute(value)) return bad(key + " \"" + value + "\" is not an absolute, normalized path");
      (key == "image" ? request.image : request.socket_dir) = value;
    } else if (key == "proc") {
      if (Status s = once(&has_proc); !s.ok()) return s;
      if (value != "0" && value != "1") return bad("proc is \"" + value + "\", not 0 or 1");
      request.with_proc = value == "1";
    } else if (key == "mark") {
      if (!isMark(value)) return bad("mark \"" + value + "\" is not one of hwfarmd's marks");
      if (request.marks.size() == kLaunchMarksMax)
        return bad("more than " + std::to_string(kLaunchMarksMax) + " marks");
      request.marks.push_back(value);
    } else if (key == "arg") {
      if (request.qemu.size() == kLaunchArgsMax)
        return bad("more than " + std::to_string(kLaunchArgsMax) + " arguments");
      request.qemu.push_back(value);
    } else {
      return bad("unknown field \"" + key + "\"");
    }
  }
  if (!has_image || !has_dir) return bad(has_image ? "no socket_dir" : "no image");
  if (request.qemu.empty()) return bad("no QEMU command");
  if (!plainAbsolute(request.qemu[0])) return bad("QEMU \"" + request.qemu[0] + "\" is not an absolute path");
  return request;
}

bool sendWithDescriptors(int fd, std::string_view payload, const std::vector<int>& fds) {
  iovec iov{const_cast<char*>(payload.data()), payload.size()};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  std::vector<char> control(fds.empty() ? 0 : CMSG_SPACE(sizeof(int) * fds.size()));
  if (!fds.empty()) {
    msg.msg_control = control.data();
    msg.msg_controllen = control.size();
    cmsghdr* cmsg = CMSG_FIRSTHDR(&msg);
    cmsg->cmsg_level = SOL_SOCKET;
    cmsg->cmsg_type = SCM_RIGHTS;
    cmsg->cmsg_len = CMSG_LEN(sizeof(int) * fds.size());
    std::memcpy(CMSG_DATA(cmsg), fds.data(), sizeof(int) * fds.size());
  }
  ssize_t sent;
  do sent = ::sendmsg(fd, &msg, MSG_NOSIGNAL);
  while (sent < 0 && errno == EINTR);
  return sent == static_cast<ssize_t>(payload.size());
}

Result<LaunchedSandbox> launchSandbox(const std::string& socket_path, const LaunchRequest& request, int log_fd,
                                      int info_fd, int status_fd) {
  std::string where = "the simulator launcher at " + socket_path;
  Result<int> connected =
      connectUnixSocket(socket_path, SOCK_SEQPACKET, "cannot reach " + where + " (is hwfarm-launcher.socket started?)");
  if (!connected) return std::move(connected).takeStatus();
  int fd = *connected;
  auto fail = [fd](Status status) {
    ::close(fd);
    return status;
  };
  std::string payload = encodeLaunchRequest(request);
  if (payload.size() > kLaunchRequestMax)
    return fail(Status::infrastructure(Code::invalid_argument,
                                       "launch request: larger than " + std::to_string(kLaunchRequestMax) + " bytes"));
  if (!sendWithDescriptors(fd, payload, {log_fd, info_fd, status_fd}))
    return fail(Status::fromErrno("cannot send to " + where, errno));
  pollfd p{fd, POLLIN, 0};
  int ready;
  do ready = ::poll(&p, 1, 10000);
  while (ready < 0 && errno == EINTR);
  char answer[4096];
  ssize_t n = ready > 0 ? ::recv(fd, answer, sizeof answer - 1, 0) : -1;
  if (n <= 0) return fail(Status::infrastructure(Code::unavailable, where + " did not answer"));
  std::string text(answer, static_cast<size_t>(n));
  if (text.rfind("pid ", 0) == 0) {
    pid_t pid = static_cast<pid_t>(std::strtol(text.c_str() + 4, nullptr, 10));
    if (pid > 0) return LaunchedSandbox{pid, fd};
  }
  if (text.rfind("error ", 0) == 0) return fail(Status::infrastructure(Code::unavailable, text.substr(6)));
  return fail(Status::infrastructure(Code::unavailable, where + " answered \"" + text + "\""));
}

bool signalLaunched(int connection, int signal) {
  std::string text = "signal " + std::to_string(signal);
  return ::send(connection, text.data(), text.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(text.size());
}

int readLaunchedExit(int connection) {
  char text[64];
  ssize_t n;
  do n = ::recv(connection, text, sizeof text - 1, MSG_DONTWAIT);
  while (n < 0 && errno == EINTR);
  if (n > 5 && std::string_view(text, 5) == "exit ") {
    text[n] = '\0';
    return static_cast<int>(std::strtol(text + 5, nullptr, 10));
  }
  return SIGKILL;  // the wait status of a process killed by SIGKILL
}

namespace {

struct Simulator {
  int connection = -1;  // -1 once its client went away
  pid_t pid = -1;       // bubblewrap's, once started
  int pidfd = -1;
  std::string what;
};

// Reads one request from `sim`'s connection and starts its sandbox; false
// when it was refused (the answer sent, the connection to be closed), true
// when it started or nothing came after all.
bool start(Simulator* sim, const std::string& bwrap) {
  std::string payload(kLaunchRequestMax + 1, '\0');
  iovec iov{payload.data(), payload.size()};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * (kLaunchFds + 1))]{};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof control;
  ssize_t n;
  do n = ::recvmsg(sim->connection, &msg, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
  while (n < 0 && errno == EINTR);
  std::vector<int> fds;
  for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c))
    if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS)
      for (size_t i = 0; i < (c->cmsg_len - CMSG_LEN(0)) / sizeof(int); ++i) {
        int fd;
        std::memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof fd);
        fds.push_back(fd);
      }
  auto refuse = [&](const std::string& why) {
    for (int fd : fds) ::close(fd);
    if (n > 0) sendText(sim->connection, "error " + why);
    return false;
  };
  if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return true;  // nothing yet: poll again
  if (n <= 0) return refuse("");
  if (msg.msg_flags & (MSG_TRUNC | MSG_CTRUNC) || fds.size() != kLaunchFds)
    return refuse(msg.msg_flags & MSG_TRUNC
                      ? "launch request: larger than " + std::to_string(kLaunchRequestMax) + " bytes"
                      : "launch request: not sent with exactly 3 descriptors");
  Result<LaunchRequest> request = parseLaunchRequest(std::string_view(payload.data(), static_cast<size_t>(n)));
  if (!request) return refuse(request.status().message());
  if (bwrap.empty()) return refuse("bwrap not found in PATH (install Debian's bubblewrap package)");
  SpawnOptions options;
  options.argv = simulatorSandboxArgv(bwrap, 3, 4, request->marks, request->qemu[0], request->image,
                                      request->socket_dir, request->with_proc);
  options.argv.insert(options.argv.end(), request->qemu.begin(), request->qemu.end());
  options.stdout_fd = fds[0];
  options.stderr_fd = fds[0];
  options.keep_fds = {fds[1], fds[2]};
  options.renumber_keep_fds = true;
  options.environment = request->marks;  // bubblewrap is hwfarmd's child too (drivers/reaper.h)
  for (const auto& mark : request->marks)
    if (mark.rfind(std::string(kChildMark) + "=", 0) == 0) sim->what = mark.substr(std::strlen(kChildMark) + 1);
  options.what = sim->what;
  Result<pid_t> child = spawnProcess(options);
  if (!child) return refuse(child.status().message());
  for (int fd : fds) ::close(fd);
  sim->pid = *child;
  sim->pidfd = static_cast<int>(::syscall(SYS_pidfd_open, sim->pid, 0));
  if (sim->pidfd < 0) {
    killSandbox(sim->pid);
    killGroupAndReap(sim->pid);
    sim->pid = -1;
    return refuse(std::string("pidfd_open: ") + std::strerror(errno));
  }
  sendText(sim->connection, "pid " + std::to_string(sim->pid));
  std::fprintf(stderr, "hwfarm-launcher: started %s (bubblewrap pid %d)\n", sim->what.c_str(), sim->pid);
  return true;
}

}  // namespace

int runLauncher(int listen_fd, const std::string& bwrap) {
  sigset_t stop;
  sigemptyset(&stop);
  sigaddset(&stop, SIGTERM);
  sigaddset(&stop, SIGINT);
  ::sigprocmask(SIG_BLOCK, &stop, nullptr);
  int signals = ::signalfd(-1, &stop, SFD_CLOEXEC);
  ::signal(SIGPIPE, SIG_IGN);
  std::list<Simulator> sims;
  auto finish = [&](std::list<Simulator>::iterator it) {
    int raw = killGroupAndReap(it->pid);
    if (it->connection >= 0) sendText(it->connection, "exit " + std::to_string(raw));
    std::fprintf(stderr, "hwfarm-launcher: %s ended (wait status %d)\n", it->what.c_str(), raw);
    if (it->connection >= 0) ::close(it->connection);
    ::close(it->pidfd);
    return sims.erase(it);
  };
  for (;;) {
    std::vector<pollfd> polled{{listen_fd, POLLIN, 0}, {signals, POLLIN, 0}};
    for (const auto& sim : sims) {
      polled.push_back({sim.connection, static_cast<short>(sim.connection >= 0 ? POLLIN : 0), 0});
      polled.push_back({sim.pidfd, static_cast<short>(sim.pidfd >= 0 ? POLLIN : 0), 0});
    }
    if (::poll(polled.data(), polled.size(), -1) < 0) {
      if (errno == EINTR) continue;
      std::perror("hwfarm-launcher: poll");
      return 1;
    }
    if (polled[1].revents) break;
    size_t i = 2;
    for (auto it = sims.begin(); it != sims.end(); i += 2) {
      short from_client = polled[i].revents, ended = polled[i + 1].revents;
      if (from_client && it->pid < 0) {  // its request
        if (!start(&*it, bwrap)) {
          ::close(it->connection);
          it = sims.erase(it);
          continue;
        }
      } else if (from_client) {
        char text[32];
        ssize_t n = ::recv(it->connection, text, sizeof text - 1, MSG_DONTWAIT);
        if (n > 0) {
          text[n] = '\0';
          if (std::string_view(text) == "signal 9") killSandbox(it->pid);
        } else if (n == 0 || (errno != EAGAIN && errno != EINTR)) {  // the client went away
          killSandbox(it->pid);
          ::close(it->connection);
          it->connection = -1;
        }
      }
      if (ended && it->pidfd >= 0) {
        it = finish(it);
        continue;
      }
      ++it;
    }
    if (polled[0].revents & POLLIN) {
      int client = ::accept4(listen_fd, nullptr, nullptr, SOCK_CLOEXEC);
      if (client < 0) continue;
      ucred peer{};
      socklen_t size = sizeof peer;
      if (::getsockopt(client, SOL_SOCKET, SO_PEERCRED, &peer, &size) != 0 ||
          (peer.uid != ::geteuid() && peer.uid != 0)) {
        sendText(client, "error the simulator launcher serves only its own user");
        ::close(client);
      } else if (sims.size() >= kMaxSimulators) {
        sendText(client, "error the simulator launcher runs " + std::to_string(kMaxSimulators) + " simulators already");
        ::close(client);
      } else {
        sims.push_back(Simulator{client});
      }
    }
  }
  for (auto& sim : sims)
    if (sim.pid > 0) killSandbox(sim.pid);
  for (auto it = sims.begin(); it != sims.end();) {
    if (it->pid > 0) {
      it = finish(it);
    } else {
      ::close(it->connection);
      it = sims.erase(it);
    }
  }
  return 0;
}

}  // namespace hwfarm::drivers
