// Board presence by console path: a board whose serial.port is an explicit
// path (/dev/serial/by-id/..., a pty link) is present while that path
// resolves. Watched with inotify on the event loop (no polling): udev creates
// and removes those links as devices come and go. Missing directories are
// watched through their nearest existing ancestor.
//
// Thread safety: the io_context's thread only.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>

namespace boost::asio {
class io_context;
}

namespace hwfarm {

class PresenceWatcher {
 public:
  using Changed = std::function<void(const std::string& board, bool present)>;
  PresenceWatcher(boost::asio::io_context& io, Changed changed);
  ~PresenceWatcher();

  // Replaces the watched set: board name -> console path.
  void watch(const std::map<std::string, std::string>& paths);
  // Stops watching (for shutdown: nothing stays pending on the loop).
  void stop();

 private:
  struct Impl;
  std::shared_ptr<Impl> impl_;
};

} // namespace hwfarm
