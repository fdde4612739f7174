// A board's console, as captured for operators and artifacts: one line per
// line received, prefixed with the time since capture started, size-capped
// with one rotation (FILE -> FILE.1), and within the byte quotas it shares
// with other logs (a lease's, everyone's) and the disk's free-space reserve.
//
// Thread safety: a log and the quotas it shares with others are used from
// one thread (the event loop).
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <memory>
#include <string>

namespace hwfarm::drivers {

// Bytes a group of console logs holds on disk, and how many it may hold.
struct ConsoleQuota {
  std::string name; // for messages: "limits.console_log_bytes_per_lease"
  uint64_t limit = UINT64_MAX;
  uint64_t used = 0;
};

struct ConsoleLogLimits {
  uint64_t max_file_bytes = 16 * 1024 * 1024; // each of FILE and FILE.1
  std::shared_ptr<ConsoleQuota> lease;        // may be null
  std::shared_ptr<ConsoleQuota> total;        // may be null
  // Asked before the first write and then after every kRoomCheckBytes
  // written: empty when the disk has room, else why not (the reserve that
  // keeps the database writable is reached).
  std::function<std::string()> room;
  static constexpr uint64_t kRoomCheckBytes = 64 * 1024;
};

class ConsoleLog {
 public:
  using Stopped = std::function<void(const std::string& why)>;
  // Opens `path` for appending; `max_bytes` caps each of FILE and FILE.1.
  ConsoleLog(std::string path, uint64_t max_bytes);
  // The same within `limits`. When a quota or the reserve is reached, or a
  // write fails, the log notes why (if it still can) and keeps nothing more;
  // `on_stopped` runs once with the reason, which names the file.
  ConsoleLog(std::string path, ConsoleLogLimits limits, Stopped on_stopped);
  ~ConsoleLog();
  ConsoleLog(const ConsoleLog&) = delete;
  ConsoleLog& operator=(const ConsoleLog&) = delete;

  void line(const std::string& text); // "[   1.234] text\n"
  std::string stamped(const std::string& text) const; // the same line, not written
  void note(const std::string& text); // "[   1.234] -- text --\n" (hwfarm's own remarks)
  bool ok() const { return file_ != nullptr; }
  bool stopped() const { return !stop_reason_.empty(); }
  const std::string& stopReason() const { return stop_reason_; }
  uint64_t droppedBytes() const { return dropped_; }
  const std::string& path() const { return path_; }

 private:
  void write(const std::string& text);
  bool rotate();
  std::string overQuota(uint64_t bytes) const;
  void stop(const std::string& why);
  void account(int64_t bytes);

  std::string path_;
  ConsoleLogLimits limits_;
  Stopped on_stopped_;
  uint64_t written_ = 0;        // bytes in FILE
  uint64_t since_room_check_ = 0;
  bool room_checked_ = false;
  uint64_t dropped_ = 0;        // bytes not kept after the stop
  std::string stop_reason_;
  std::FILE* file_ = nullptr;
  std::chrono::steady_clock::time_point start_;
};

} // namespace hwfarm::drivers
