// A board's console, as captured for operators and artifacts: one line per
// line received, prefixed with the time since capture started, size-capped
// with one rotation (FILE -> FILE.1).
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>

namespace hwfarm::drivers {

class ConsoleLog {
 public:
  // Opens `path` for appending; `max_bytes` caps each of FILE and FILE.1.
  ConsoleLog(std::string path, uint64_t max_bytes);
  ~ConsoleLog();
  ConsoleLog(const ConsoleLog&) = delete;
  ConsoleLog& operator=(const ConsoleLog&) = delete;

  void line(const std::string& text); // "[   1.234] text\n"
  std::string stamped(const std::string& text) const; // the same line, not written
  void note(const std::string& text); // "[   1.234] -- text --\n" (hwfarm's own remarks)
  bool ok() const { return file_ != nullptr; }
  const std::string& path() const { return path_; }

 private:
  void write(const std::string& text);

  std::string path_;
  uint64_t max_bytes_;
  uint64_t written_ = 0;
  std::FILE* file_ = nullptr;
  std::chrono::steady_clock::time_point start_;
};

} // namespace hwfarm::drivers
