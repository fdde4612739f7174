// A fault-injection board: a pty that behaves like a board's console, a
// "flasher" and a "power switch" that talk to it, and faults on command
// (the LevelDB EnvWrapper idea applied to boards).
//
//   fake_board serve --link PATH --control SOCK
//       Creates a pty, links PATH to its slave (as udev links
//       /dev/serial/by-id/...), and obeys commands on the unix socket SOCK.
//   fake_board flash SOCK IMAGE [reset]
//                                     the board's flasher (exit 0 = flashed); with
//                                     reset, the board then runs the image (a
//                                     flasher that resets its target)
//   fake_board power SOCK on|off|cycle
//   fake_board mode SOCK MODE         normal | drop | garbage | noise | stall |
//                                     slow | unplug | flash-fail | flash-hang |
//                                     vanish
//
// An "image" is a text file: powering on prints its lines on the console.
// Modes change what happens next: drop stops output halfway with the line
// still up, garbage prints noise first, noise prints only noise whatever the
// image (a console read at the wrong baud rate), stall stops after the first line,
// slow prints "boot N" (N counts the boots) and then a line every 100 ms
// until the board is powered off, unplug prints the first half and then
// vanishes (mid-run), flash-fail/-hang break the flasher, vanish removes
// the device at once.
#include <poll.h>
#include <pty.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <deque>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace {

int usage() {
  std::fprintf(stderr, "usage: fake_board serve --link PATH --control SOCK | flash SOCK IMAGE [reset] | "
                       "power SOCK on|off|cycle | mode SOCK MODE\n");
  return 2;
}

sockaddr_un address(const std::string& path) {
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  std::strncpy(a.sun_path, path.c_str(), sizeof a.sun_path - 1);
  return a;
}

// Client side: one command, one reply line.
int send(const std::string& sock, const std::string& command) {
  int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
  sockaddr_un a = address(sock);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    std::fprintf(stderr, "fake_board: cannot reach the board at %s: %s\n", sock.c_str(), std::strerror(errno));
    return 3;
  }
  std::string line = command + "\n";
  if (::write(fd, line.data(), line.size()) < 0) return 3;
  std::string reply;
  char c;
  while (::read(fd, &c, 1) == 1 && c != '\n') reply += c;
  std::printf("%s\n", reply.c_str());
  return reply == "ok" ? 0 : 1;
}

struct Board {
  int master = -1;
  std::string link;
  std::string mode = "normal";
  std::vector<std::string> image;
  int boots = 0;
  bool unplugging = false;
  std::deque<std::string> pending; // slow mode: the lines still to print
  std::chrono::steady_clock::time_point next_line;

  void put(const std::string& text) const {
    if (master >= 0 && ::write(master, text.data(), text.size()) < 0) {
      // Nobody reads: like a UART with no one listening.
    }
  }

  void powerOn() {
    ++boots;
    pending.clear();
    if (mode == "slow") {
      put("boot " + std::to_string(boots) + "\n");
      pending.assign(image.begin(), image.end());
      next_line = std::chrono::steady_clock::now() + std::chrono::milliseconds(100);
      return;
    }
    if (mode == "noise") {
      for (int i = 0; i < 4; ++i) put(std::string("\x15\xfe\x80~~\xe6\x98~\n", 9));
      return;
    }
    size_t lines = image.size();
    if (mode == "drop" || mode == "unplug") lines /= 2;
    if (mode == "stall") lines = std::min<size_t>(lines, 1);
    if (mode == "garbage") put(std::string("\x13\x80\xfe garbage \x01\xff\n", 15));
    for (size_t i = 0; i < lines; ++i) put(image[i] + "\n");
    if (mode == "unplug") unplugging = true; // once the power tool has its answer
  }

  // The device goes away, as a board whose USB cable is pulled.
  [[noreturn]] void unplug() const {
    ::unlink(link.c_str());
    ::close(master);
    std::exit(0);
  }

  // Returns the reply, or "" for no reply at all (a hung tool).
  std::string obey(const std::string& line) {
    std::istringstream in(line);
    std::string verb, arg, option;
    in >> verb >> arg >> option;
    if (verb == "mode") {
      mode = arg;
      if (mode == "vanish") unplug();
      return "ok";
    }
    if (verb == "flash") {
      if (mode == "flash-hang") return "";
      if (mode == "flash-fail") return "error: verify failed at 0x08000000";
      std::ifstream file(arg);
      if (!file) return "error: cannot read image " + arg;
      image.clear();
      for (std::string l; std::getline(file, l);) image.push_back(l);
      if (option == "reset") powerOn();
      return "ok";
    }
    if (verb == "power") {
      pending.clear(); // off: a slow boot stops here
      if (arg == "on" || arg == "cycle") powerOn();
      return "ok";
    }
    return "error: unknown command " + verb;
  }
};

int serve(const std::string& link, const std::string& sock) {
  Board board;
  board.link = link;
  int slave = -1;
  char name[256];
  if (::openpty(&board.master, &slave, name, nullptr, nullptr) != 0) return 1;
  // The control socket listens before the device link appears: the link
  // makes the board present, and its flasher may run at once.
  int listener = ::socket(AF_UNIX, SOCK_STREAM, 0);
  ::unlink(sock.c_str());
  sockaddr_un a = address(sock);
  if (::bind(listener, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || ::listen(listener, 8) != 0) return 1;
  ::unlink(link.c_str());
  if (::symlink(name, link.c_str()) != 0) return 1;
  std::printf("fake board console %s -> %s, control %s\n", link.c_str(), name, sock.c_str());
  std::fflush(stdout);
  signal(SIGPIPE, SIG_IGN);
  std::vector<int> hung; // connections of a flasher told to hang
  while (true) {
    if (!board.pending.empty()) { // a slow boot's next line, unless a command comes first
      auto wait = std::chrono::duration_cast<std::chrono::milliseconds>(board.next_line -
                                                                        std::chrono::steady_clock::now());
      pollfd p{listener, POLLIN, 0};
      if (::poll(&p, 1, static_cast<int>(std::max<int64_t>(0, wait.count()))) == 0) {
        board.put(board.pending.front() + "\n");
        board.pending.pop_front();
        board.next_line += std::chrono::milliseconds(100);
        continue;
      }
    }
    int client = ::accept(listener, nullptr, nullptr);
    if (client < 0) continue;
    std::string line;
    char c;
    while (::read(client, &c, 1) == 1 && c != '\n') line += c;
    std::string reply = board.obey(line);
    if (reply.empty()) {
      hung.push_back(client);
      continue;
    }
    reply += "\n";
    if (::write(client, reply.data(), reply.size()) < 0) {
      // The client left.
    }
    ::close(client);
    if (board.unplugging) { // a moment later: what it printed reaches the reader first
      ::usleep(200 * 1000);
      board.unplug();
    }
  }
}

} // namespace

int main(int argc, char** argv) {
  std::vector<std::string> a(argv + 1, argv + argc);
  if (a.size() == 5 && a[0] == "serve" && a[1] == "--link" && a[3] == "--control") return serve(a[2], a[4]);
  if (a.size() == 3 && a[0] == "flash") return send(a[1], "flash " + a[2]);
  if (a.size() == 4 && a[0] == "flash" && a[3] == "reset") return send(a[1], "flash " + a[2] + " reset");
  if (a.size() == 3 && a[0] == "power") return send(a[1], "power " + a[2]);
  if (a.size() == 3 && a[0] == "mode") return send(a[1], "mode " + a[2]);
  return usage();
}
