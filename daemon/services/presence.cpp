#include "daemon/services/presence.h"

#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <set>

#include <boost/asio/io_context.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <spdlog/spdlog.h>

#include "common/status.h"

namespace hwfarm {
namespace asio = boost::asio;

struct PresenceWatcher::Impl : std::enable_shared_from_this<PresenceWatcher::Impl> {
  Impl(asio::io_context& io, Changed c) : stream(io), changed(std::move(c)) {
    int fd = ::inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
    if (fd < 0) throw std::runtime_error("inotify_init1 failed");
    stream.assign(fd);
  }

  static bool exists(const std::string& path) {
    struct stat st {};
    return ::stat(path.c_str(), &st) == 0; // follows links: a dangling link is absent
  }

  // Watches the nearest existing ancestor of every path's directory.
  void rewatch() {
    std::set<std::string> wanted;
    for (const auto& [board, path] : paths) {
      std::filesystem::path dir = std::filesystem::path(path).parent_path();
      while (!dir.empty() && !exists(dir.string()) && dir != dir.root_path()) dir = dir.parent_path();
      wanted.insert(dir.string());
    }
    for (auto it = watches.begin(); it != watches.end();) {
      if (wanted.count(it->first)) {
        ++it;
        continue;
      }
      ::inotify_rm_watch(stream.native_handle(), it->second);
      it = watches.erase(it);
    }
    for (const auto& dir : wanted) {
      if (watches.count(dir)) continue;
      int wd = ::inotify_add_watch(stream.native_handle(), dir.c_str(),
                                   IN_CREATE | IN_DELETE | IN_MOVED_TO | IN_MOVED_FROM | IN_ATTRIB);
      if (wd >= 0) watches[dir] = wd;
      else spdlog::warn("{}", Status::fromErrno("cannot watch " + dir + " for board presence", errno).message());
    }
  }

  void evaluate() {
    rewatch();
    for (const auto& [board, path] : paths) {
      bool now = exists(path);
      auto it = state.find(board);
      if (it != state.end() && it->second == now) continue;
      state[board] = now;
      changed(board, now); // the first look counts too: a restored lease's board may be gone
    }
  }

  void read() {
    stream.async_read_some(asio::buffer(buffer), [self = shared_from_this()](boost::system::error_code ec, size_t) {
      if (ec) return;
      self->evaluate(); // any change in a watched directory: look again
      self->read();
    });
  }

  asio::posix::stream_descriptor stream;
  Changed changed;
  std::map<std::string, std::string> paths;
  std::map<std::string, int> watches;
  std::map<std::string, bool> state;
  std::array<char, 4096> buffer{};
};

PresenceWatcher::PresenceWatcher(asio::io_context& io, Changed changed)
    : impl_(std::make_shared<Impl>(io, std::move(changed))) {
  impl_->read();
}

PresenceWatcher::~PresenceWatcher() { stop(); }

void PresenceWatcher::stop() {
  boost::system::error_code ignored;
  impl_->stream.close(ignored);
}

void PresenceWatcher::watch(const std::map<std::string, std::string>& paths) {
  impl_->paths = paths;
  for (auto it = impl_->state.begin(); it != impl_->state.end();) {
    if (paths.count(it->first)) ++it;
    else it = impl_->state.erase(it);
  }
  impl_->evaluate();
}

} // namespace hwfarm
