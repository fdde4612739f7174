#include "drivers/console_log.h"

#include <cstdio>

namespace hwfarm::drivers {

ConsoleLog::ConsoleLog(std::string path, uint64_t max_bytes)
    : path_(std::move(path)), max_bytes_(max_bytes), start_(std::chrono::steady_clock::now()) {
  // Appends: a lease restored after a restart keeps what it captured before.
  file_ = std::fopen(path_.c_str(), "ae");
  if (file_) {
    std::fseek(file_, 0, SEEK_END);
    written_ = static_cast<uint64_t>(std::ftell(file_));
  }
}

ConsoleLog::~ConsoleLog() {
  if (file_) std::fclose(file_);
}

void ConsoleLog::write(const std::string& text) {
  if (!file_) return;
  if (written_ + text.size() > max_bytes_) {
    std::fclose(file_);
    std::rename(path_.c_str(), (path_ + ".1").c_str());
    file_ = std::fopen(path_.c_str(), "we");
    written_ = 0;
    if (!file_) return;
  }
  std::fwrite(text.data(), 1, text.size(), file_);
  std::fflush(file_);
  written_ += text.size();
}

std::string ConsoleLog::stamped(const std::string& text) const {
  double t = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  char stamp[32];
  std::snprintf(stamp, sizeof stamp, "[%9.3f] ", t);
  return stamp + text + "\n";
}

void ConsoleLog::line(const std::string& text) { write(stamped(text)); }

void ConsoleLog::note(const std::string& text) { line("-- " + text + " --"); }

} // namespace hwfarm::drivers
