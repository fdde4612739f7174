// Serial console benchmark: 16 ptys at once, each fed a 3 Mbaud-equivalent
// stream (300 KB/s of 60-byte lines) for a few seconds, read by hwfarmd's
// SerialPort on one event loop; next to the same streams read by a plain
// blocking read() loop per port (the baseline). Reports bytes in = bytes out
// and CPU time per port.
//
//   hwfarm_serial_bench [--seconds S] [--ports N]
#include <fcntl.h>
#include <pty.h>
#include <sys/resource.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <boost/asio/io_context.hpp>

#include "drivers/serial_port.h"

using Clock = std::chrono::steady_clock;

namespace {

double cpuSeconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_utime.tv_sec + u.ru_utime.tv_usec / 1e6 + u.ru_stime.tv_sec + u.ru_stime.tv_usec / 1e6;
}

struct Pty {
  int master = -1, slave = -1;
  std::string path;
};

std::vector<Pty> openPtys(int n) {
  std::vector<Pty> ptys(static_cast<size_t>(n));
  for (auto& p : ptys) {
    char name[256];
    openpty(&p.master, &p.slave, name, nullptr, nullptr);
    termios tio{};
    tcgetattr(p.slave, &tio);
    cfmakeraw(&tio);
    tcsetattr(p.slave, TCSANOW, &tio);
    p.path = name;
  }
  return ptys;
}

// Writers: each port gets `rate` bytes/s of 60-byte lines for `seconds`.
std::vector<std::thread> feed(std::vector<Pty>& ptys, double seconds, size_t rate, std::atomic<uint64_t>& sent) {
  std::vector<std::thread> writers;
  for (auto& p : ptys)
    writers.emplace_back([&p, seconds, rate, &sent] {
      std::string line(59, 'x');
      line += '\n';
      auto start = Clock::now();
      uint64_t mine = 0;
      while (Clock::now() - start < std::chrono::duration<double>(seconds)) {
        double due = std::chrono::duration<double>(Clock::now() - start).count() * static_cast<double>(rate);
        while (static_cast<double>(mine) < due) {
          ssize_t n = ::write(p.master, line.data(), line.size());
          if (n > 0) mine += static_cast<uint64_t>(n);
          else std::this_thread::sleep_for(std::chrono::microseconds(200));
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      }
      sent += mine;
    });
  return writers;
}

struct Result {
  uint64_t sent = 0, received = 0;
  double cpu_ms_per_port_s = 0;
};

Result runHwfarm(int ports, double seconds, size_t rate) {
  auto ptys = openPtys(ports);
  boost::asio::io_context io;
  std::vector<std::unique_ptr<hwfarm::drivers::SerialPort>> readers;
  uint64_t received = 0;
  for (auto& p : ptys) {
    hwfarm::drivers::SerialOptions o;
    o.lock_dir.clear();
    o.baud = 3000000;
    auto opened = hwfarm::drivers::SerialPort::open(io, p.path, o);
    if (!opened) throw std::runtime_error(opened.status().message());
    auto port = std::move(opened).value();
    port->start([&](const hwfarm::ConsoleLine& line) { received += line.text.size() + 1; }, nullptr, nullptr);
    readers.push_back(std::move(port));
  }
  std::atomic<uint64_t> sent{0};
  double cpu0 = cpuSeconds();
  auto writers = feed(ptys, seconds, rate, sent);
  std::atomic<bool> fed{false};
  std::thread waiter([&] {
    for (auto& w : writers) w.join();
    fed = true;
  });
  // Read until the writers are done, then until everything arrived (5 s grace).
  auto grace_end = Clock::time_point::max();
  while (Clock::now() < grace_end) {
    io.run_for(std::chrono::milliseconds(50));
    if (fed && grace_end == Clock::time_point::max()) grace_end = Clock::now() + std::chrono::seconds(5);
    if (fed && received >= sent) break;
  }
  waiter.join();
  Result r;
  r.sent = sent;
  r.received = received;
  // Writer CPU is included in both runs alike; the difference is the reader.
  r.cpu_ms_per_port_s = (cpuSeconds() - cpu0) * 1000.0 / ports / seconds;
  for (auto& p : ptys) {
    close(p.master);
    close(p.slave);
  }
  return r;
}

Result runBaseline(int ports, double seconds, size_t rate) {
  auto ptys = openPtys(ports);
  std::atomic<uint64_t> sent{0}, received{0};
  std::atomic<bool> stop{false};
  std::vector<std::thread> readers;
  for (auto& p : ptys)
    readers.emplace_back([&p, &received, &stop] {
      int fd = ::open(p.path.c_str(), O_RDONLY | O_NOCTTY);
      char buffer[8192];
      while (!stop) {
        pollfd pf{fd, POLLIN, 0};
        if (poll(&pf, 1, 100) <= 0) continue;
        ssize_t n = ::read(fd, buffer, sizeof buffer);
        if (n > 0) received += static_cast<uint64_t>(n);
      }
      ::close(fd);
    });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  double cpu0 = cpuSeconds();
  auto writers = feed(ptys, seconds, rate, sent);
  for (auto& w : writers) w.join();
  for (int i = 0; i < 50 && received < sent; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  double cpu = cpuSeconds() - cpu0;
  stop = true;
  for (auto& r : readers) r.join();
  Result r;
  r.sent = sent;
  r.received = received;
  r.cpu_ms_per_port_s = cpu * 1000.0 / ports / seconds;
  for (auto& p : ptys) {
    close(p.master);
    close(p.slave);
  }
  return r;
}

} // namespace

int main(int argc, char** argv) {
  double seconds = 3;
  int ports = 16;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string a = argv[i];
    if (a == "--seconds") seconds = std::stod(argv[i + 1]);
    if (a == "--ports") ports = std::stoi(argv[i + 1]);
  }
  const size_t rate = 300000; // 3 Mbaud, 10 bits per byte
  Result h = runHwfarm(ports, seconds, rate);
  Result b = runBaseline(ports, seconds, rate);
  std::printf("serial console benchmark: %d ptys at once, %zu bytes/s each (3 Mbaud), %.1f s\n", ports, rate,
              seconds);
  std::printf("%-36s %18s %18s\n", "", "hwfarm SerialPort", "blocking read()");
  std::printf("%-36s %18llu %18llu\n", "bytes written", static_cast<unsigned long long>(h.sent),
              static_cast<unsigned long long>(b.sent));
  std::printf("%-36s %18llu %18llu\n", "bytes received", static_cast<unsigned long long>(h.received),
              static_cast<unsigned long long>(b.received));
  std::printf("%-36s %18s %18s\n", "lost", h.sent == h.received ? "none" : "LOST",
              b.sent == b.received ? "none" : "LOST");
  std::printf("%-36s %18.1f %18.1f\n", "CPU ms per port per second", h.cpu_ms_per_port_s, b.cpu_ms_per_port_s);
  std::printf("%-36s %18s %18s\n", "  (both include the writers' CPU)", "", "");
  return h.sent == h.received ? 0 : 1;
}
