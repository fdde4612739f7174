#include "drivers/console_log.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstdio>

#include "common/status.h"

namespace hwfarm::drivers {

namespace {

uint64_t fileSize(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 ? static_cast<uint64_t>(st.st_size) : 0;
}

} // namespace

ConsoleLog::ConsoleLog(std::string path, uint64_t max_bytes)
    : ConsoleLog(std::move(path), ConsoleLogLimits{max_bytes, nullptr, nullptr, nullptr}, nullptr) {}

ConsoleLog::ConsoleLog(std::string path, ConsoleLogLimits limits, Stopped on_stopped)
    : path_(std::move(path)),
      limits_(std::move(limits)),
      on_stopped_(std::move(on_stopped)),
      start_(std::chrono::steady_clock::now()) {
  // Appends: a lease restored after a restart keeps what it captured before
  // (the quotas already count those bytes: they are on disk).
  file_ = std::fopen(path_.c_str(), "ae");
  if (!file_) {
    stop(Status::fromErrno("cannot open console log " + path_, errno).message());
    return;
  }
  long end = std::fseek(file_, 0, SEEK_END) == 0 ? std::ftell(file_) : -1;
  written_ = end > 0 ? static_cast<uint64_t>(end) : 0;
}

ConsoleLog::~ConsoleLog() {
  if (file_) std::fclose(file_);
}

void ConsoleLog::account(int64_t bytes) {
  for (auto* q : {limits_.lease.get(), limits_.total.get()}) {
    if (!q) continue;
    if (bytes < 0 && q->used < static_cast<uint64_t>(-bytes)) q->used = 0;
    else q->used += static_cast<uint64_t>(bytes);
  }
}

std::string ConsoleLog::overQuota(uint64_t bytes) const {
  for (auto* q : {limits_.lease.get(), limits_.total.get()})
    if (q && q->used + bytes > q->limit)
      return "console log " + path_ + ": " + q->name + " (" + std::to_string(q->limit) +
             " bytes) reached; later output is not kept";
  return "";
}

// FILE becomes FILE.1 (replacing the old one) and FILE starts empty.
bool ConsoleLog::rotate() {
  std::fclose(file_);
  file_ = nullptr;
  std::string old = path_ + ".1";
  uint64_t replaced = fileSize(old);
  if (std::rename(path_.c_str(), old.c_str()) != 0) {
    stop(Status::fromErrno("cannot rename console log " + path_ + " to " + old, errno).message());
    return false;
  }
  account(-static_cast<int64_t>(replaced));
  file_ = std::fopen(path_.c_str(), "we");
  written_ = 0;
  if (!file_) {
    stop(Status::fromErrno("cannot open console log " + path_, errno).message());
    return false;
  }
  return true;
}

void ConsoleLog::stop(const std::string& why) {
  if (stopped()) return;
  stop_reason_ = why;
  if (file_) {
    // The remark itself goes past the quota: it is one line, once.
    std::string text = stamped("-- " + why + " --");
    if (std::fwrite(text.data(), 1, text.size(), file_) == text.size() && std::fflush(file_) == 0)
      account(static_cast<int64_t>(text.size()));
    std::fclose(file_);
    file_ = nullptr;
  }
  if (on_stopped_) on_stopped_(why);
}

void ConsoleLog::write(const std::string& text) {
  if (!file_) {
    dropped_ += text.size();
    return;
  }
  if (!room_checked_ || since_room_check_ >= ConsoleLogLimits::kRoomCheckBytes) {
    room_checked_ = true;
    since_room_check_ = 0;
    if (limits_.room) {
      std::string why = limits_.room();
      if (!why.empty()) {
        stop("console log " + path_ + ": " + why + "; later output is not kept");
        dropped_ += text.size();
        return;
      }
    }
  }
  if (written_ + text.size() > limits_.max_file_bytes && !rotate()) {
    dropped_ += text.size();
    return;
  }
  if (std::string why = overQuota(text.size()); !why.empty()) {
    stop(why);
    dropped_ += text.size();
    return;
  }
  size_t n = std::fwrite(text.data(), 1, text.size(), file_);
  if (n != text.size() || std::fflush(file_) != 0) {
    int err = errno;
    // What reached the file counts; the rest is dropped.
    uint64_t now = fileSize(path_);
    account(static_cast<int64_t>(now) - static_cast<int64_t>(written_));
    written_ = now;
    dropped_ += text.size();
    stop(Status::fromErrno("cannot write console log " + path_, err).message());
    return;
  }
  written_ += text.size();
  since_room_check_ += text.size();
  account(static_cast<int64_t>(text.size()));
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
