#include "drivers/serial_port.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <termios.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cerrno>
#include <cstring>
#include <list>
#include <map>

#include <boost/asio/io_context.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/steady_timer.hpp>

#include "drivers/console_log.h"

namespace hwfarm::drivers {
namespace asio = boost::asio;

namespace {

speed_t speedOf(int64_t baud) {
  static const std::map<int64_t, speed_t> speeds{
      {50, B50},         {75, B75},         {110, B110},       {134, B134},       {150, B150},
      {200, B200},       {300, B300},       {600, B600},       {1200, B1200},     {1800, B1800},
      {2400, B2400},     {4800, B4800},     {9600, B9600},     {19200, B19200},   {38400, B38400},
      {57600, B57600},   {115200, B115200}, {230400, B230400}, {460800, B460800}, {500000, B500000},
      {576000, B576000}, {921600, B921600}, {1000000, B1000000}, {1152000, B1152000}, {1500000, B1500000},
      {2000000, B2000000}, {2500000, B2500000}, {3000000, B3000000}, {3500000, B3500000}, {4000000, B4000000}};
  auto it = speeds.find(baud);
  return it == speeds.end() ? B0 : it->second;
}

// UUCP/HDB lock file: LCK..ttyACM0 holding the owner's pid, so minicom,
// screen and other tools see the port as busy.
std::string lockPath(const std::string& dir, const std::string& device) {
  std::string name = device.rfind("/dev/", 0) == 0 ? device.substr(5) : device;
  for (char& c : name)
    if (c == '/') c = '_';
  return dir + "/LCK.." + name;
}

// Takes the lock file; on failure the message follows the device path.
Status takeLock(const std::string& path) {
  for (int attempt = 0; attempt < 2; ++attempt) {
    int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd >= 0) {
      char text[16];
      int n = std::snprintf(text, sizeof text, "%10d\n", static_cast<int>(::getpid()));
      bool written = ::write(fd, text, static_cast<size_t>(n)) == n;
      ::close(fd);
      return written ? Status::success() : Status::fromErrno("cannot write " + path, errno);
    }
    if (errno != EEXIST) return Status::fromErrno("cannot create lock " + path, errno);
    char text[32] = {};
    int rfd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    ssize_t n = rfd >= 0 ? ::read(rfd, text, sizeof text - 1) : -1;
    if (rfd >= 0) ::close(rfd);
    int pid = n > 0 ? std::atoi(text) : 0;
    if (pid > 0 && (::kill(pid, 0) == 0 || errno == EPERM))
      return Status::infrastructure(Code::busy, "is locked by pid " + std::to_string(pid) + " (" + path + ")");
    ::unlink(path.c_str()); // stale: its owner is gone
  }
  return Status::infrastructure(Code::busy, "cannot take lock " + path);
}

} // namespace

struct SerialPort::Impl : std::enable_shared_from_this<SerialPort::Impl> {
  struct Expectation {
    uint64_t id;
    std::regex pattern;
    std::shared_ptr<asio::steady_timer> timer;
    std::function<void(std::optional<std::string>)> done;
  };

  Impl(asio::io_context& io, int fd, size_t max_line) : stream(io, fd), reader(max_line) {}

  void read() {
    stream.async_read_some(asio::buffer(buffer), [self = shared_from_this()](boost::system::error_code ec, size_t n) {
      // Closed while this completion was queued: its data is not wanted.
      if (self->is_closed) return;
      if (ec) return self->ended(ec == asio::error::eof ? "end of file" : ec.message());
      self->bytes += n;
      self->consume(std::string_view(self->buffer.data(), n));
      if (!self->is_closed) self->read();
    });
  }

  void consume(std::string_view data) {
    reader.feed(data, [this](const ConsoleLine& line) { emit(line); });
  }

  void emit(const ConsoleLine& piece) {
    if (is_closed) return; // closed by a callback of a line before
    std::string line(piece.text);
    if (log) log->line(line);
    if (on_line) on_line(ConsoleLine{line, piece.continued, piece.end});
    for (auto it = expectations.begin(); it != expectations.end();) {
      if (std::regex_search(line, it->pattern)) {
        auto done = std::move(it->done);
        it->timer->cancel();
        it = expectations.erase(it);
        done(line);
      } else {
        ++it;
      }
    }
  }

  void ended(const std::string& reason) {
    if (is_closed) return;
    reader.finish([this](const ConsoleLine& line) { emit(line); });
    is_closed = true;
    if (log) log->note("console closed: " + reason);
    auto pending = std::move(expectations);
    expectations.clear();
    for (auto& e : pending) {
      e.timer->cancel();
      e.done(std::nullopt);
    }
    boost::system::error_code ignored;
    stream.close(ignored);
    if (!lock.empty()) ::unlink(lock.c_str()); // free for the next opener at once
    lock.clear();
    if (on_closed) on_closed(reason);
  }

  asio::posix::stream_descriptor stream;
  SerialOptions options;
  std::string path;
  std::string lock;
  std::array<char, 8192> buffer{};
  LineReader reader;
  uint64_t bytes = 0;
  bool is_closed = false;
  LineHandler on_line;
  ClosedHandler on_closed;
  ConsoleLog* log = nullptr;
  // A deadline finds its expectation by id: once the line or the close has
  // answered it, the entry is gone, even if the deadline's completion was
  // already queued when its timer was cancelled.
  std::list<Expectation> expectations;
  uint64_t next_expectation = 1;
};

Result<int> connectUnixSocket(const std::string& path, int type, std::string failure) {
  if (failure.empty()) failure = "cannot connect to " + path;
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::string address = path;
  int dir = -1; // a path longer than a socket address: through its directory
  if (path.size() >= sizeof addr.sun_path) {
    size_t slash = path.rfind('/');
    std::string name = slash == std::string::npos ? path : path.substr(slash + 1);
    std::string parent = slash == std::string::npos ? "." : slash == 0 ? "/" : path.substr(0, slash);
    dir = ::open(parent.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (dir < 0) return Status::fromErrno(failure + ": cannot open its directory", errno);
    address = "/proc/self/fd/" + std::to_string(dir) + "/" + name;
    if (address.size() >= sizeof addr.sun_path) {
      ::close(dir);
      return Status::infrastructure(Code::invalid_argument, failure + ": its name is longer than the " +
                                                                std::to_string(sizeof addr.sun_path - 1) +
                                                                " bytes a socket address holds");
    }
  }
  std::memcpy(addr.sun_path, address.c_str(), address.size() + 1);
  int fd = ::socket(AF_UNIX, type | SOCK_CLOEXEC, 0);
  int failed = fd < 0 || ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ? errno : 0;
  if (dir >= 0) ::close(dir); // connected (or not): the socket does not need it
  if (failed) {
    if (fd >= 0) ::close(fd);
    return Status::fromErrno(failure, failed);
  }
  return fd;
}

Result<std::unique_ptr<SerialPort>> SerialPort::open(asio::io_context& io, const std::string& path,
                                                     const SerialOptions& options) {
  int fd = -1;
  std::string lock;
  if (path.rfind("unix:", 0) == 0) {
    Result<int> connected = connectUnixSocket(path.substr(5));
    if (!connected) return std::move(connected).takeStatus();
    fd = *connected;
  } else {
    speed_t speed = speedOf(options.baud);
    if (speed == B0)
      return Status::infrastructure(Code::invalid_argument,
                                    "baud rate " + std::to_string(options.baud) + " is not supported");
    if (!options.lock_dir.empty()) {
      // Named after the device itself (LCK..ttyACM0), not the by-id link, so
      // other tools see the same lock.
      char real[PATH_MAX];
      lock = lockPath(options.lock_dir, ::realpath(path.c_str(), real) ? std::string(real) : path);
      if (Status locked = takeLock(lock); !locked.ok())
        return Status::infrastructure(locked.code(), path + " " + locked.message());
    }
    fd = ::open(path.c_str(), O_RDWR | O_NOCTTY | O_NONBLOCK | O_CLOEXEC);
    termios tio{};
    if (fd < 0 || ::ioctl(fd, TIOCEXCL) != 0 || ::tcgetattr(fd, &tio) != 0) {
      Status failed = Status::fromErrno("cannot open " + path, errno);
      if (fd >= 0) ::close(fd);
      if (!lock.empty()) ::unlink(lock.c_str());
      return failed;
    }
    ::cfmakeraw(&tio);
    tio.c_cflag |= CLOCAL | CREAD;
    tio.c_cc[VMIN] = 1;
    tio.c_cc[VTIME] = 0;
    ::cfsetspeed(&tio, speed);
    if (::tcsetattr(fd, TCSANOW, &tio) != 0) {
      Status failed = Status::fromErrno("cannot configure " + path, errno);
      ::close(fd);
      if (!lock.empty()) ::unlink(lock.c_str());
      return failed;
    }
  }
  auto impl = std::make_shared<Impl>(io, fd, options.max_line);
  impl->options = options;
  impl->path = path;
  impl->lock = lock;
  impl->stream.non_blocking(true);
  return std::unique_ptr<SerialPort>(new SerialPort(impl));
}

SerialPort::SerialPort(std::shared_ptr<Impl> impl) : impl_(std::move(impl)) {}

SerialPort::~SerialPort() {
  impl_->log = nullptr; // the log may be gone before us
  close();
}

void SerialPort::start(LineHandler on_line, ClosedHandler on_closed, ConsoleLog* log) {
  impl_->on_line = std::move(on_line);
  impl_->on_closed = std::move(on_closed);
  impl_->log = log;
  impl_->read();
}

void SerialPort::expect(const std::regex& pattern, std::chrono::milliseconds timeout,
                        std::function<void(std::optional<std::string>)> done) {
  if (impl_->is_closed) return done(std::nullopt);
  auto timer = std::make_shared<asio::steady_timer>(impl_->stream.get_executor());
  uint64_t id = impl_->next_expectation++;
  impl_->expectations.push_back({id, pattern, timer, std::move(done)});
  timer->expires_after(timeout);
  timer->async_wait([weak = std::weak_ptr<Impl>(impl_), id](boost::system::error_code ec) {
    auto self = weak.lock();
    if (ec || !self) return;
    auto& list = self->expectations;
    auto it = std::find_if(list.begin(), list.end(), [id](const Impl::Expectation& e) { return e.id == id; });
    if (it == list.end()) return; // answered already
    auto done = std::move(it->done);
    list.erase(it);
    done(std::nullopt);
  });
}

void SerialPort::close() {
  if (impl_->is_closed) return;
  // Closing on purpose is not news, and the owner wants no more lines: it
  // may be gone once close() returns (a lease ended).
  impl_->on_closed = nullptr;
  impl_->on_line = nullptr;
  impl_->ended("closed by hwfarmd");
}

uint64_t SerialPort::bytesRead() const { return impl_->bytes; }
bool SerialPort::closed() const { return impl_->is_closed; }
const std::string& SerialPort::path() const { return impl_->path; }

} // namespace hwfarm::drivers
